"""The C host: TVM's host C made to build with zig's clang and compiled.

While TVM lowers, codegen.py wraps TVM's C printer so that the host IR is rewritten just before it
prints (legalize.py, splitting what C cannot hold into lanes with lanes.py; outline.py gives a host
function's work a function of its own; parallel.py puts parallel loops on TVM's thread pool);
source.py puts the typed prelude (prelude.py, ended by the parallel launches' C: parallel_c.py) in
front of the printed C, writes the compute functions' and parallel bodies' signatures (`restrict`
where no aliasing is promised) and places (outline_c.py), and makes clang's errors readable;
split.py cuts C (and CUDA) source into pieces that compile in parallel (and a kernel library's
entries from their work); compile.py compiles the host C's pieces side by side with zig."""
