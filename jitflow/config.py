"""Every setting of jitflow in one place: explicit arguments, then JITFLOW_* variables, then defaults."""
from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Sequence

from .errors import InvalidInputError
from .logs import warn_once
from .text.quantities import MAX_BYTES, MAX_SECONDS, parse_duration, parse_number, parse_size  # noqa: F401

if TYPE_CHECKING:
    from .targets.cuda_floor import CudaVersion

CUDA_COMPILERS = ("nvrtc", "nvcc")
#: where a CUDA toolkit (nvcc, nvdisasm, cuobjdump) is looked for first, in this order
CUDA_HOME_VARIABLES = ("CUDA_HOME", "CUDA_PATH")

#: name -> (default, meaning); README's settings table is written from this.
ENVIRONMENT = {
    "JITFLOW_CACHE_DIR": ("the user cache directory (platformdirs)", "where built libraries are kept"),
    "JITFLOW_CACHE": ("1", "0 disables the disk cache (every jit() builds in a temporary folder); readonly: "
                           "lookups only, a miss is a CacheMissError and nothing is built or written (the "
                           "cache commands that would change it refuse)"),
    "JITFLOW_RECORD": ("unset", "a file: every key the process obtains (hit or build) is appended to it as a "
                                "JSON line, for `jitflow cache pack --manifest`"),
    "JITFLOW_TRUSTED_KEYS": ("unset (bundles are not verified for their origin)",
                             "public keys (OpenSSH .pub or PEM files, separated by ':'): `jitflow cache unpack` and "
                             "`check` accept only bundles signed by one of them (`pack --sign`)"),
    "JITFLOW_CUDA_COMPILER": ("nvrtc", "device compiler: nvrtc (pip wheels) or nvcc (CUDA toolkit)"),
    "JITFLOW_CUDA_FLOOR": ("the compiler's major version .0 (13.0)",
                           "oldest driver (CUDA version) a CUDA library must load on; decides the fatbin's PTX ISA"),
    "JITFLOW_CPU_LEVEL": ("the architecture's baseline (x86-64, armv8-a)",
                          "how much of the CPU host code may use: x86-64-v2, x86-64-v3, x86-64-v4; armv8.2-a, "
                          "neoverse-n1, neoverse-v1, neoverse-v2; native (this CPU)"),
    "JITFLOW_LOG": ("unset (warnings only)", "log level of the 'jitflow' logger: warning, info or debug"),
    "JITFLOW_ZIG_CACHE_DIR": ("<user cache folder>/jitflow/toolchain/zig-<version>",
                              "zig's own cache, shared by every cache folder of the user (private to the user)"),
    "JITFLOW_BUILD_JOBS": ("the usable cores", "compilers one build runs at once; the host C and the device code "
                                                "are compiled in as many pieces"),
    "JITFLOW_BUILD_BATCH": ("1", "build_all's local processes build up to that many items at once, their host C "
                                 "compiled by one compiler process (the same libraries)"),
    "JITFLOW_CACHE_MAX_SIZE": ("4GiB", "size cap of the cache; least recently used entries are evicted beyond it"),
    "JITFLOW_CACHE_SALT": ("unset", "any text, mixed into every cache key: change it when something jitflow "
                                    "cannot see changes what TVM emits (a registered callback's body, a pass "
                                    "edited in place)"),
    "JITFLOW_PROGRESS": ("auto", "build progress on stderr: auto (terminals only, builds over 1.5 s), 1 or 0"),
    "JITFLOW_REMOTE_CACHE": ("unset (no shared tier)",
                             "shared cache tier behind the local one: redis://host:6379/0, rediss://... (TLS), "
                             "or module:Class of another backend"),
    "JITFLOW_REMOTE_CACHE_KEY": ("unset", "shared secret: entries are signed with it (HMAC-SHA256) and checked"),
    "JITFLOW_REMOTE_CACHE_UNSIGNED": ("0", "1 reads and writes unsigned shared entries when no key is set "
                                           "(anyone who can write to the tier can then run code on every node)"),
    "JITFLOW_REMOTE_CACHE_MAX_BYTES": ("64MiB", "largest entry sent to the shared tier (a size: 16MiB, 50MB)"),
    "JITFLOW_REMOTE_CACHE_TIMEOUT": ("2", "seconds before a shared-tier request gives up (then local only)"),
    "JITFLOW_REMOTE_CACHE_LOCK_TTL": ("30", "seconds the cluster build lock lives unless its builder renews it"),
    "CUDA_HOME": ("unset", "a CUDA toolkit's folder: nvcc and the SASS tools are looked for in its bin/"),
    "CUDA_PATH": ("unset", "the same, read after CUDA_HOME"),
    "TVM_LIBRARY_PATH": ("unset", "a folder searched first for TVM's runtime libraries when a library is loaded, "
                                  "as TVM does; refused where anyone but you or root can write it or them"),
}

DEFAULT_MAX_SIZE = 4 * 1024**3
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
READONLY = "readonly"   # JITFLOW_CACHE / cache=: lookups only, nothing built or written under the cache folder


#: the largest counts and waits the settings accept: beyond them a value is a typo, not a wish
MAX_JOBS = 1024
MAX_BATCH = 256
MAX_REMOTE_SECONDS = 86400


LOG_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}
PROGRESS_MODES = {"auto": "auto", **dict.fromkeys(_TRUE, "on"), **dict.fromkeys(_FALSE, "off")}


def log_level() -> int | None:
    """The level JITFLOW_LOG asks for, or None when it is unset or not a level (one warning says so):
    logging is then the application's, which shows warnings only unless it chose otherwise."""
    raw = os.environ.get("JITFLOW_LOG", "").strip().lower()
    if not raw:
        return None
    if raw not in LOG_LEVELS:
        warn_once("JITFLOW_LOG", "jitflow: JITFLOW_LOG=%r is not a level (use %s); using the default "
                  "(warnings only)", raw, ", ".join(LOG_LEVELS))
        return None
    return LOG_LEVELS[raw]


def progress_mode() -> str:
    """JITFLOW_PROGRESS as 'auto' (terminals only), 'on' or 'off'."""
    raw = os.environ.get("JITFLOW_PROGRESS", "").strip().lower()
    if not raw:
        return "auto"
    if raw not in PROGRESS_MODES:
        warn_once("JITFLOW_PROGRESS", "jitflow: JITFLOW_PROGRESS=%r is not auto, 1 or 0; using auto", raw)
        return "auto"
    return PROGRESS_MODES[raw]


def build_batch(value: Any = None) -> int:
    """How many items one of build_all's local processes builds at once (their host C in one
    compiler process): `value` if given, else JITFLOW_BUILD_BATCH, else 1 (one at a time)."""
    if value is None:
        return int(_env_number("JITFLOW_BUILD_BATCH", 1.0, MAX_BATCH, whole=True)) or 1
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_BATCH:
        raise InvalidInputError(f"batch must be a whole number of items from 1 to {MAX_BATCH} (or None for "
                                f"JITFLOW_BUILD_BATCH, default 1), not {value!r}")
    return value


def cuda_toolkit_homes() -> tuple[Path, ...]:
    """The CUDA toolkit folders the environment names: CUDA_HOME, then CUDA_PATH (those set)."""
    return tuple(Path(home) for home in (os.environ.get(var, "").strip() for var in CUDA_HOME_VARIABLES) if home)


def tvm_library_folder() -> Path | None:
    """TVM_LIBRARY_PATH: the folder TVM looks in first for its libraries (one folder, as TVM reads it)."""
    raw = os.environ.get("TVM_LIBRARY_PATH", "").strip()
    return Path(raw) if raw else None


def trusted_keys(value: Sequence[str | os.PathLike] | None = None) -> tuple[Path, ...]:
    """The public keys a bundle must be signed by: `value` (--trust) if given, else JITFLOW_TRUSTED_KEYS
    (paths separated by os.pathsep), else none (bundles are not verified for their origin)."""
    if value is not None:
        if isinstance(value, (str, os.PathLike)) or not all(isinstance(v, (str, os.PathLike)) for v in value):
            raise InvalidInputError(f"trust must be a list of public key files, not {value!r}")
        return tuple(Path(v).expanduser() for v in value)
    raw = os.environ.get("JITFLOW_TRUSTED_KEYS", "")
    return tuple(Path(p.strip()).expanduser() for p in raw.split(os.pathsep) if p.strip())


def default_cache_dir() -> Path:
    """The per-user cache directory that platformdirs chooses for jitflow."""
    import platformdirs

    return Path(platformdirs.user_cache_dir("jitflow", appauthor=False))


def _env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise InvalidInputError(f"{name}={raw!r} is not a boolean; use 1 or 0")


def _env_size(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    return parse_size(raw, name) if raw else default


def _env_number(name: str, default: float, maximum: float, whole: bool = False) -> float:
    raw = os.environ.get(name, "").strip()
    return parse_number(raw, name, maximum, whole) if raw else default


class RemoteSettings(NamedTuple):
    """The shared cache tier (JITFLOW_REMOTE_CACHE*); `url` None means there is none."""

    url: str | None = None              # may hold the tier's password: left out of repr
    url_problem: str | None = None      # why `url` cannot name a tier (the tier is then off), or None
    secret: str | None = None           # left out of repr
    unsigned: bool = False
    max_bytes: int = 64 << 20
    timeout: float = 2.0
    lock_ttl: float = 30.0

    def __repr__(self) -> str:
        hidden = ("url", "secret")
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields if name not in hidden)
        return f"RemoteSettings({shown})"


def remote_url_problem(url: str | None) -> str | None:
    """Why JITFLOW_REMOTE_CACHE cannot name a tier (a port out of range, a malformed IPv6 host), in
    words that never repeat its password; None when it can, is unset, or is a module:Class."""
    if not url or "://" not in url:
        return None
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        port, _host = parts.port, parts.hostname
    except ValueError as exc:
        why = str(exc)
        if "Port" in why:
            return "JITFLOW_REMOTE_CACHE has a port that is not a number from 1 to 65535"
        if "IPv6" in why or "address" in why:
            return "JITFLOW_REMOTE_CACHE has a host that is not a valid address (IPv6 hosts go in brackets: [::1])"
        return "JITFLOW_REMOTE_CACHE is not a valid URL"
    if port == 0:
        return "JITFLOW_REMOTE_CACHE has a port that is not a number from 1 to 65535"
    return None


def resolve_remote() -> RemoteSettings:
    """The shared tier's settings from the JITFLOW_REMOTE_CACHE* variables."""
    url = os.environ.get("JITFLOW_REMOTE_CACHE", "").strip() or None
    return RemoteSettings(
        url=url, url_problem=remote_url_problem(url),
        secret=os.environ.get("JITFLOW_REMOTE_CACHE_KEY", "").strip() or None,
        unsigned=_env_bool("JITFLOW_REMOTE_CACHE_UNSIGNED", False),
        max_bytes=_env_size("JITFLOW_REMOTE_CACHE_MAX_BYTES", 64 << 20),
        timeout=_env_number("JITFLOW_REMOTE_CACHE_TIMEOUT", 2.0, MAX_REMOTE_SECONDS),
        lock_ttl=_env_number("JITFLOW_REMOTE_CACHE_LOCK_TTL", 30.0, MAX_REMOTE_SECONDS),
    )


class TvmCudaSettings(NamedTuple):
    """TVM's CUDA compiler variables as TVM reads them (flags shell-split, the others as set)."""

    nvrtc_extra: tuple[str, ...] = ()
    ptxas_reg_level: int | None = None
    ptxas_extra: tuple[str, ...] = ()
    nvcc_no_fast_math: bool = False
    compile_mode: str | None = None


def _env_flags(name: str) -> tuple[str, ...]:
    import shlex

    raw = os.environ.get(name, "").strip()
    try:
        return tuple(shlex.split(raw))
    except ValueError as exc:
        raise InvalidInputError(f"{name}={raw!r} cannot be read as flags ({exc}); quote them as a shell "
                                "would") from None


def resolve_tvm_cuda() -> TvmCudaSettings:
    """TVM_CUDA_* from the environment (TVM's own meaning: any TVM_CUDA_NVCC_NO_FAST_MATH turns fast math off)."""
    raw_level = os.environ.get("TVM_CUDA_PTXAS_REG_LEVEL", "").strip()
    if raw_level and not (raw_level.isdigit() and 0 <= int(raw_level) <= 10):
        raise InvalidInputError(f"TVM_CUDA_PTXAS_REG_LEVEL={raw_level!r} is not a register usage level from 0 "
                                "to 10 (ptxas --register-usage-level)")
    mode = os.environ.get("TVM_CUDA_COMPILE_MODE", "").strip().lower()
    return TvmCudaSettings(nvrtc_extra=_env_flags("TVM_CUDA_NVRTC_EXTRA_OPTS"),
                           ptxas_reg_level=int(raw_level) if raw_level else None,
                           ptxas_extra=_env_flags("TVM_CUDA_PTXAS_EXTRA_OPTS"),
                           nvcc_no_fast_math=bool(os.environ.get("TVM_CUDA_NVCC_NO_FAST_MATH")),
                           compile_mode=mode or None)


class Settings(NamedTuple):
    """The resolved configuration of one build (records are NamedTuples on the load path: a frozen
    dataclass costs every `import jitflow` several times as much to define)."""

    cache_dir: Path
    cache_enabled: bool
    cuda_compiler: str
    zig_cache_dir: Path | None          # None: the per-user toolchain folder (toolchain/zig_cc/zig_cache.py)
    cache_max_size: int = DEFAULT_MAX_SIZE
    remote: RemoteSettings = RemoteSettings()
    progress: str = "auto"
    cuda_floor: CudaVersion | None = None   # None: the device compiler's major version .0
    cache_salt: str = ""
    build_jobs: int | None = None       # None: the usable cores (builder/host_c/compile.py)
    tvm_cuda: TvmCudaSettings = TvmCudaSettings()   # TVM's CUDA compiler variables (toolchain/cuda/cuda_flags.py)
    cpu_level: str | None = None        # a level's name (targets/cpu_level.py); None: the baseline
    cpu_level_from: str = "cpu_level"   # where it was given, for messages
    cache_readonly: bool = False        # lookups only: a miss is a CacheMissError (cache_enabled is then True)
    record: Path | None = None          # where each obtained key is appended (cache/deploy/record.py); None: nowhere


def resolve_cuda_floor(value: str | float | None = None) -> CudaVersion | None:
    """cuda_floor= if given, else JITFLOW_CUDA_FLOOR, else None (the compiler's major version .0)."""
    from .targets import cuda_floor

    if value is None:
        raw = os.environ.get("JITFLOW_CUDA_FLOOR", "").strip()
        if not raw:
            return None
        return cuda_floor.check_supported(cuda_floor.parse(raw, "JITFLOW_CUDA_FLOOR"))
    return cuda_floor.check_supported(cuda_floor.parse(value))


def resolve_cpu_level(value: str | None = None) -> tuple[str | None, str]:
    """(cpu_level= if given, else JITFLOW_CPU_LEVEL, else None; where it came from), its spelling
    checked: the host it suits is checked when the target is known."""
    from .targets import cpu_level

    if value is not None:
        return cpu_level.normalize(value), "cpu_level"
    return cpu_level.normalize(os.environ.get("JITFLOW_CPU_LEVEL"), "JITFLOW_CPU_LEVEL"), "JITFLOW_CPU_LEVEL"


def cache_mode(value: Any, variable: bool = False) -> tuple[bool, bool]:
    """cache= (or JITFLOW_CACHE's text, `variable`) as (enabled, readonly): True/1, False/0 or "readonly"."""
    word = value.strip().lower() if isinstance(value, str) else None
    if word == READONLY:
        return True, True
    if isinstance(value, bool) or (variable and word in _TRUE | _FALSE):
        return value if isinstance(value, bool) else word in _TRUE, False
    raise InvalidInputError(f"JITFLOW_CACHE={value!r} is not a boolean or {READONLY}; use 1, 0 or {READONLY}"
                            if variable else f"cache must be True, False, {READONLY!r} or None (the default: "
                            f"JITFLOW_CACHE), not {value!r}")


#: a relative record path -> the absolute path it named when this process first read it
_RECORDS: dict[str, Path] = {}


def resolve_record(value: str | os.PathLike | None = None) -> Path | None:
    """record= if given, else JITFLOW_RECORD, else None: the file obtained keys are appended to
    (absolute). A relative path is taken from the working folder of the first time this process
    reads it, so that a later os.chdir does not send the next keys to another file."""
    raw = os.environ.get("JITFLOW_RECORD", "").strip() if value is None else value
    if not isinstance(raw, (str, os.PathLike)) or (value is not None and not str(raw).strip()):
        raise InvalidInputError(f"record must be the path of a file (str or os.PathLike), not {value!r}")
    if not str(raw):
        return None
    path = Path(raw).expanduser()
    if path.is_absolute():
        return path
    return _RECORDS.setdefault(os.fspath(raw), path.absolute())


def check_text(text: str | None, what: str) -> None:
    """Refuse text that cannot be written as UTF-8 (a lone surrogate such as "\\ud800"): what a cache
    entry's metadata records must read back, and be shown, as it was given."""
    if text is None:
        return
    try:
        text.encode()
    except UnicodeEncodeError as exc:
        raise InvalidInputError(f"{what} holds {text[exc.start:exc.end]!r} at {exc.start}, a lone surrogate: not "
                                "valid Unicode (no UTF-8 file or terminal can hold it); remove it, or write the "
                                "character meant") from None


def check_cache_dir(cache_dir: Any) -> None:
    """Refuse a cache_dir that is not a path, or is empty (it would put the cache in the current folder)."""
    if cache_dir is not None and not isinstance(cache_dir, (str, os.PathLike)):
        raise InvalidInputError(f"cache_dir must be a path (str or os.PathLike), not {type(cache_dir).__name__}")
    if cache_dir is not None and not str(cache_dir).strip():
        raise InvalidInputError("cache_dir is empty; give a folder, or None for the default")


def _check_arguments(cache_dir: Any, cache: Any, cuda_compiler: Any) -> None:
    """Refuse arguments of the wrong type: cache="no" must not read as True."""
    if cache is not None:
        cache_mode(cache)
    check_cache_dir(cache_dir)
    if cuda_compiler is not None and not isinstance(cuda_compiler, str):
        raise InvalidInputError(f"cuda_compiler must be one of {', '.join(CUDA_COMPILERS)}, "
                                f"not {type(cuda_compiler).__name__}")


def resolve(cache_dir: str | os.PathLike | None = None, cache: bool | str | None = None,
            cuda_compiler: str | None = None, cuda_floor: str | float | None = None,
            cache_salt: str | None = None, cpu_level: str | None = None,
            record: str | os.PathLike | None = None) -> Settings:
    """Resolve settings: explicit arguments win over JITFLOW_* variables, which win over defaults."""
    _check_arguments(cache_dir, cache, cuda_compiler)
    if cache_dir is None:
        env_dir = os.environ.get("JITFLOW_CACHE_DIR", "").strip()
        directory = Path(env_dir) if env_dir else default_cache_dir()
    else:
        directory = Path(cache_dir)
    enabled, readonly = cache_mode(cache) if cache is not None else \
        cache_mode(os.environ.get("JITFLOW_CACHE", "").strip() or "1", variable=True)
    compiler = (cuda_compiler or os.environ.get("JITFLOW_CUDA_COMPILER", "") or "nvrtc").strip().lower()
    if compiler not in CUDA_COMPILERS:
        raise InvalidInputError(
            f"unknown CUDA compiler {compiler!r}; choose one of {', '.join(CUDA_COMPILERS)} "
            "(argument cuda_compiler= or JITFLOW_CUDA_COMPILER)")
    directory = directory.expanduser().absolute()
    zig_env = os.environ.get("JITFLOW_ZIG_CACHE_DIR", "").strip()
    zig_dir = Path(zig_env).expanduser().absolute() if zig_env else None
    max_size = _env_size("JITFLOW_CACHE_MAX_SIZE", DEFAULT_MAX_SIZE)
    if cache_salt is not None and not isinstance(cache_salt, str):
        raise InvalidInputError(f"cache_salt must be a string, not {type(cache_salt).__name__}")
    salt = os.environ.get("JITFLOW_CACHE_SALT", "") if cache_salt is None else cache_salt
    check_text(salt, "cache_salt" if cache_salt is not None else "JITFLOW_CACHE_SALT")
    jobs = _env_number("JITFLOW_BUILD_JOBS", 0.0, MAX_JOBS, whole=True)
    level, level_from = resolve_cpu_level(cpu_level)
    return Settings(cache_dir=directory, cache_enabled=enabled, cuda_compiler=compiler, zig_cache_dir=zig_dir,
                    cache_max_size=max_size, remote=resolve_remote(), progress=progress_mode(),
                    cuda_floor=resolve_cuda_floor(cuda_floor), cache_salt=salt, build_jobs=int(jobs) or None,
                    tvm_cuda=resolve_tvm_cuda(), cpu_level=level, cpu_level_from=level_from,
                    cache_readonly=readonly, record=resolve_record(record))
