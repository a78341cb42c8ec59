"""The C toolchain: the zig cc of the `ziglang` wheel compiles the host C (zig.py; its commands run
directly: zig_direct.py, remembered across processes: probe_memo.py, checked when read back:
zig_command_check.py; TVM's headers precompiled: zig_pch.py; several files in one compiler process:
cc1_batch.py, compile_batch.py), keeps its cache (zig_cache.py), links against stub C libraries and
float16 builtins (link.py, host_libs.py, builtins_c.py), and compiles once the objects many libraries
share (object_cache.py)."""
