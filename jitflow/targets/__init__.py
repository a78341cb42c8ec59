"""What a library is built for: the target kind and CUDA archs (spec.py, archs.py) and the CPU
and OS of its host code (hosts.py)."""
from .archs import arch_number, normalize_arch, visible_gpu_arch
from .hosts import DEFAULT_HOST, SUPPORTED_HOSTS, machine_host
from .spec import TargetSpec, resolve_target

__all__ = ["DEFAULT_HOST", "SUPPORTED_HOSTS", "TargetSpec", "arch_number", "machine_host", "normalize_arch",
           "resolve_target", "visible_gpu_arch"]
