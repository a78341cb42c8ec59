"""The compilers: zig cc for host C (zig.py), NVRTC + nvfatbin (nvrtc.py, with the CCCL header
shim cccl_shim.py) or nvcc (nvcc.py) for CUDA, chosen in device_compiler.py; the CUDA toolkit's
programs found in one place (cuda_toolkit.py); their versions (versions.py); and facts about the
install memoized beside jitflow's bytecode (install_memo.py)."""
