"""Building one library: prepare the module (prepare.py), lower it with TVM (lower.py), fix up the
host C (host_c.py), pack the device code (pack.py), all in order in steps.py; the clock and the
progress line time and show it; parallel.py builds many at once (jitflow.build_all)."""
