"""Building one library: check the module (prepare.py), lower it with TVM (lower.py), make the host C
build with zig (host_c/), compile the device code (device_compile.py), pack it (pack.py, vm_blob.py,
blob_object.py), all in order in steps.py; the clock and the progress line time and show it.
jitflow.build_all (farm.py) builds many at once. A cache hit imports nothing of this package."""
