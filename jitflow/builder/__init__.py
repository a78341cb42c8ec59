"""Building one library: prepare the module (prepare.py), lower it with TVM (lower.py), make the host C
build with zig (host_codegen.py runs the IR pass of c_legalize.py and c_lanes.py before TVM prints it;
host_c.py puts the typed prelude of c_prelude.py in front), pack the device code (pack.py), all in
order in steps.py; the clock and the progress line time and show it; parallel.py builds many at once
(jitflow.build_all)."""
