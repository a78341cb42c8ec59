"""The compilers: zig's C toolchain for the host code (zig_cc/) and the CUDA compilers for device code
(cuda/); what both use stays here: tool versions for the key, read without importing the compilers
(versions.py, dist_info.py), the environment compilers run in (environment.py), a build's time limit
as the compilers see it (deadline.py), and facts about the install memoized beside jitflow's bytecode
(install_memo.py)."""
