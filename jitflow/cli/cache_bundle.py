"""`jitflow cache pack|unpack`: cache entries into one bundle (a tar) and back into a cache."""
from __future__ import annotations

import argparse
import sys

from .cache_common import json_option
from .exit_codes import EXIT_OK
from .output import dumps, human_size, plural

PACK_SCHEMA = "jitflow.cache-pack/1"
UNPACK_SCHEMA = "jitflow.cache-unpack/1"


def register(csub: argparse._SubParsersAction) -> list[argparse.ArgumentParser]:
    pack = csub.add_parser("pack", help="write cache entries into one bundle (a tar) to unpack elsewhere",
                           description="Write the chosen entries (every entry when none is chosen) into OUT, an "
                                       "uncompressed tar with a manifest of every file's sha256.")
    pack.add_argument("out", metavar="OUT.tar", help="the bundle to write (replaced if it exists)")
    pack.add_argument("--manifest", metavar="RECORD",
                      help="a record of the keys a workload obtained (the file JITFLOW_RECORD names)")
    pack.add_argument("--key", action="append", metavar="KEY", dest="keys",
                      help="an entry's key, or a prefix of 6 or more hexadecimal digits that starts one entry's "
                           "key; may be given again")
    pack.add_argument("--sign", metavar="KEYFILE",
                      help="sign the manifest with this Ed25519 private key (ssh-keygen -t ed25519, or openssl "
                           "genpkey -algorithm ed25519), for `unpack --trust` to verify who packed the bundle")
    json_option(pack, PACK_SCHEMA)
    pack.set_defaults(func=run_pack)
    unpack = csub.add_parser("unpack", help="install a bundle's entries into the cache, every file checked first",
                             description="Check every file of the bundle IN against its manifest, then install "
                                         "its entries (those the cache has are skipped). A bundle that fails any "
                                         "check is refused whole (exit status 2) and nothing is installed. With "
                                         "--trust (or JITFLOW_TRUSTED_KEYS), only a bundle signed by one of those "
                                         "keys (`pack --sign`) is accepted.")
    unpack.add_argument("bundle", metavar="IN.tar", help="a bundle written by `jitflow cache pack`")
    unpack.add_argument("--readable", action="store_true",
                        help="make the cache's entries readable (never writable) by every user: for an image "
                             "where root unpacks and another user serves (JITFLOW_CACHE=readonly)")
    trust_option(unpack)
    json_option(unpack, UNPACK_SCHEMA)
    unpack.set_defaults(func=run_unpack)
    return [pack, unpack]


def trust_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--trust", action="append", metavar="PUBKEY",
                   help="accept the bundle only if it is signed by this public key (a .pub or PEM file); may be "
                        "given again (default: JITFLOW_TRUSTED_KEYS)")


def run_pack(args: argparse.Namespace) -> int:
    from ..cache.deploy.bundle import pack

    from ..files.export_path import stream_of

    result = pack(args.out, keys=args.keys, manifest=args.manifest, cache_dir=args.cache_dir, sign=args.sign)
    say = sys.stderr if stream_of(args.out) is not None else sys.stdout    # the bundle went to standard output
    if args.json:
        print(dumps(dict(result.to_json(), schema=PACK_SCHEMA)), file=say)
    else:
        size = sum(e.size for e in result.entries)
        signed = f", signed by {result.signer}" if result.signer else ""
        print(f"packed {plural(len(result.entries), 'entry', 'entries')} ({human_size(size)}) into {result.path} "
              f"({human_size(result.bytes)}){signed}", file=say)
    for key in result.skipped:
        print(f"jitflow: note: entry {key[:12]} failed its checks and was left out", file=sys.stderr)
    return EXIT_OK


def run_unpack(args: argparse.Namespace) -> int:
    from ..cache.deploy.bundle_unpack import unpack

    result = unpack(args.bundle, cache_dir=args.cache_dir, readable=args.readable, trust=args.trust)
    if args.json:
        print(dumps(dict(result.to_json(), schema=UNPACK_SCHEMA)))
    else:
        print(f"installed {plural(len(result.installed), 'entry', 'entries')} ({human_size(result.bytes)}), "
              f"skipped {len(result.skipped)} already present, into {result.location}")
        if result.origin is not None:
            print(result.origin.text)
    return EXIT_OK
