"""The CUDA compilers: NVRTC + nvfatbin (nvrtc.py, with the CCCL header shim cccl_shim.py, and
fatbin_build.py) or nvcc (nvcc.py), chosen in device_compiler.py (which checks archs against the
compiler's list); their flags (cuda_flags.py, TVM's TVM_CUDA_* variables applied); the CUDA toolkit's
programs found in one place (cuda_toolkit.py); PTX brought to the CUDA floor and proven by nvJitLink
(ptx_floor.py, nvjitlink.py)."""
