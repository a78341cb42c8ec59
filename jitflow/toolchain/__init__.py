"""The compilers: zig cc for host C (zig.py), NVRTC + nvfatbin (nvrtc.py, with the CCCL header
shim cccl_shim.py) or nvcc (nvcc.py) for CUDA, chosen in cuda.py; and their versions (versions.py)."""
