"""Entries taken to other machines as files: bundles (bundle_format.py; bundle.py packs,
bundle_unpack.py unpacks, bundle_tar.py reads the tar as a bounded stream, bundle_signature.py signs
and verifies the manifest), the record of what a process obtained, from which a bundle is packed
(record.py), and the check before a rollout (rollout.py; rollout_inputs.py: the key inputs this
environment computes against an entry's). Entries leave and enter through the cache's door."""
