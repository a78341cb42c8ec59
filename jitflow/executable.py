"""The lazy Executable that jitflow.compile returns: nothing is built until jit() or export."""
from __future__ import annotations

import os
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from . import config, pipeline
from .cache.store import location
from .cache.store.entry import Entry
from .cache.key.key import CacheKey, cache_key
from .errors import FunctionNotFoundError, InvalidInputError
from .files import export_args, export_path
from .formats import VM_KIND
from .inputs import ir_module, pass_context, tuned
from .inputs.origin import caller_origin
from .options import BuildOptions, InProcess, check_tir_pipeline, relax_pipeline_of
from .pipeline import BuildInfo
from .runtime import cpu_features
from .runtime.library_module import keep_host_c
from .runtime.load import load, load_library  # noqa: F401  (jitflow.load lives with the loader)
from .targets import TargetSpec, machine_host, resolve_target
from .targets import reading as target_reading
from .targets.cpu_level import resolve as resolve_cpu_level
from .targets.spec import chosen as chosen_target
from .toolchain.cuda import device_compiler as cuda_toolchain

_LOADED: dict[tuple[str, str], tuple[Any, dict[str, Any]]] = {}   # (cache dir, key) -> (module, metadata)
_LOADED_LOCK = threading.Lock()


def _tvms_executable() -> type:
    """TVM's Executable class (what tvm.compile returns), where TVM is importable, else object.

    TVM's idioms that take an Executable call its jit() for the runtime module, as
    tvm.relax.VirtualMachine(exe, dev) does; deriving from it lets them take a jitflow Executable.
    Every method TVM's class has is jitflow's own here."""
    try:
        from tvm.runtime import Executable as TvmExecutable
    except ImportError:
        return object
    return TvmExecutable


class Executable(_tvms_executable()):
    """A module, a target and options; builds (or finds in the cache) a library on first use.

    The module is jitflow's own copy, taken by compile(): changing the caller's module afterwards
    changes nothing here, and the key names exactly what is built. It is a tvm.runtime.Executable,
    so that `tvm.relax.VirtualMachine(exe, dev)` runs a Relax model's library as exe.vm(dev) does.
    """

    def __init__(self, mod: Any, spec: TargetSpec, settings: config.Settings, options: BuildOptions,
                 in_process: InProcess) -> None:
        self._mod = mod
        self.target = spec
        self.settings = settings
        self._asked = options
        self._in_process = in_process
        self.build_info: BuildInfo | None = None
        self._options: BuildOptions | None = None
        self._key: CacheKey | None = None
        self._key_seconds = 0.0          # what taking the key cost, until a build counts it
        self._module: Any = None
        self._meta: dict[str, Any] | None = None
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        state = "loaded" if self._module is not None else "built" if self.build_info is not None else "not built"
        return f"<jitflow.Executable {self.target.describe()} {state}>"

    @property
    def mod(self) -> Any:
        """A copy of the module this executable builds (changing it changes nothing here)."""
        return self._mod.clone()

    @property
    def options(self) -> BuildOptions:
        """The build options (a frozen jitflow.options.BuildOptions), the CUDA floor resolved: the one
        asked for, else the device compiler's major version .0 (found on first use)."""
        with self._lock:
            if self._options is None:
                options = self._asked
                if self.target.is_cuda and options.cuda_floor is None:
                    options = options.with_cuda_floor(cuda_toolchain.default_floor(self.settings.cuda_compiler))
                self._options = options
            return self._options

    @property
    def key(self) -> str:
        """The cache key (sha256 hex) of this module, target, options, context, environment and tools
        (cache/key/key.py says what it covers). Reading it changes nothing."""
        return self._cache_key().digest

    def _cache_key(self) -> CacheKey:
        with self._lock:
            if self._key is None:
                start = time.perf_counter()
                self._key = cache_key(self._mod, self.target, self.settings, self.options, self._in_process)
                self._key_seconds = time.perf_counter() - start
            return self._key

    @property
    def cache_key(self) -> CacheKey:
        """The key with the inputs it was taken over (what a build farm's worker checks)."""
        return self._cache_key()

    @property
    def in_process(self) -> InProcess:
        """The caller's objects this build uses that do not travel (its PassContext, a Relax Pass)."""
        return self._in_process

    def with_cache(self, cache: bool | str | None = None, cache_dir: str | os.PathLike | None = None,
                   record: str | os.PathLike | None = None) -> Executable:
        """The same module, target and options (the same key), kept in another cache: `cache=False`
        builds without reading or writing one, `cache="readonly"` only looks up (a miss is a
        CacheMissError), `cache_dir` names the cache folder, `record` the file obtained keys are
        appended to; None keeps this one's setting. Nothing is built."""
        enabled, readonly = (self.settings.cache_enabled, self.settings.cache_readonly) if cache is None \
            else config.cache_mode(cache)
        config.check_cache_dir(cache_dir)
        settings = self.settings._replace(
            cache_enabled=enabled, cache_readonly=readonly,
            record=self.settings.record if record is None else config.resolve_record(record),
            cache_dir=self.settings.cache_dir if cache_dir is None else Path(cache_dir).expanduser().absolute())
        return Executable(self._mod, self.target, settings, self._asked, self._in_process)

    def labelled(self, name: str) -> Executable:
        """The same executable (the same key), its cache entry labelled `name` where compile(name=)
        gave it no label: what `jitflow cache ls` shows for it. Nothing is built."""
        if self._asked.label is not None:
            return self
        name = os.fsencode(name).decode(errors="replace")     # a file name of other bytes than UTF-8
        return Executable(self._mod, self.target, self.settings, replace(self._asked, label=name), self._in_process)

    def cached(self) -> bool:
        """Whether the library is in the cache now (looks only: nothing is built or loaded)."""
        key = self._cache_key()
        if not self.settings.cache_enabled or key.uncacheable:
            return False
        for cache in location.open_cache(self.settings).search():
            found = cache.lookup(key.digest, key.inputs)
            if found is not None:
                found[0].close()
                return True
        return False

    def _obtain(self, deadline: Any = None, fresh: bool | None = None) -> pipeline.Obtained:
        """The verified library, held open, and its metadata: close it (a `with` block) when done.
        fresh: whether the key is taken from the module as it is now (default: when not taken yet)."""
        fresh = self._key is None if fresh is None else fresh
        key = self._cache_key()
        key_seconds, self._key_seconds = self._key_seconds, 0.0   # a build counts the key once
        got = pipeline.obtain(key, self._mod, self.target, self.settings, self.options, self._in_process,
                              key_is_fresh=fresh, deadline=deadline, key_seconds=key_seconds)
        self.build_info = got.info
        self._meta = got.meta
        return got

    def open_library(self) -> pipeline.Obtained:
        """The verified library, built or found in the cache, held open with its metadata, without
        loading it: close it (a `with` block) when done. For tools that read the library's bytes."""
        with self._lock:
            return self._obtain()

    def build(self, timeout_s: float | None = None) -> BuildInfo:
        """Build the library, or find it in the cache, without loading it (no GPU or driver is
        needed): what build_all does for each item. Returns build_info; exe.jit() afterwards is a
        cache hit. With caching off the build is checked and thrown away.

        timeout_s: seconds the build may take; past them its compiler is killed and the build fails
        with BuildTimeoutError, storing nothing (steps that run in this process, TVM's lowering and
        NVRTC, are not interrupted: the build fails when they end). None: no limit."""
        check_timeout(timeout_s)
        with self._lock:
            if timeout_s is None:
                with self._obtain() as got:
                    return got.info
            from .toolchain.deadline import Deadline

            with self._obtain(Deadline.after(timeout_s)) as got:
                return got.info

    def jit(self, device_query: Any = None) -> Any:
        """The loaded TVM runtime module: built once, then a cache hit in every later process.

        device_query: how the GPU and driver the library is checked against are found (a
        jitflow.runtime.compat.DeviceQuery; default the CUDA driver)."""
        self.target.check_runs_here()
        level = self._asked.cpu_level
        if level is not None:
            cpu_features.require(level.needs, level.describe(), "this library",
                                 "export_library() it and load it on a CPU that has them")
        with self._lock:
            if self._module is not None:
                return self._module
            fresh = self._key is None     # taken just below: the build need not check it again
            memo = (str(self.settings.cache_dir), self.key)
            shared = self.settings.cache_enabled and not self._cache_key().uncacheable
            with _LOADED_LOCK:
                cached = _LOADED.get(memo) if shared else None
            if cached is not None:   # the metadata comes with it: the entry may be in the fallback folder
                self._module, self._meta = cached
                self.build_info = BuildInfo(key=self.key, outcome="memory",
                                            cpu_level=level.describe() if level is not None else None)
                if self.settings.record is not None:
                    from .cache.deploy import record

                    record.obtained(self.settings.record, self.key, self._meta, "memory", self.settings.cache_dir,
                                    asked=self._asked.label, origin=self._asked.origin)
                return self._module
            with self._obtain(fresh=fresh) as got:
                module = load_library(got.library, cuda=bool(got.meta.get("cuda")), device_query=device_query)
                keep_host_c(module, Entry(got.library.path.parent).host_c)   # module.inspect_source()
            self._module = module
            if shared:
                with _LOADED_LOCK:
                    _LOADED[memo] = (module, got.meta)
            return module

    @property
    def functions(self) -> list[str]:
        """Names of the functions the library exports (builds or reads the cache entry)."""
        if self._meta is None:
            self.jit()
        return list(self._meta.get("functions", [])) if self._meta else []

    def __getitem__(self, name: str) -> Any:
        module = self.jit()
        if module.kind == VM_KIND:
            raise InvalidInputError(f"this is a Relax model: call exe.vm(device)[{name!r}]")
        func = module.get_function(name, query_imports=True) if _has_function(module, name) else None
        if func is None:
            raise FunctionNotFoundError(name, self.functions)
        return func

    def __call__(self, *args: Any) -> Any:
        """Call the entry function: 'main' if the module has one, else its only function."""
        names = self.functions
        if "main" in names or len(names) != 1:
            return self["main"](*args)
        return self[names[0]](*args)

    def vm(self, device: Any = None, memory_cfg: str | None = None) -> Any:
        """A VirtualMachine over the jitted library of a Relax module (on `device`: a tvm Device,
        "cpu", "cuda:0", a torch.device; default the target's first device). It is jitflow's
        (jitflow.runtime.vm.VirtualMachine, which needs no `tvm` package), with the methods of
        tvm.relax.VirtualMachine; tvm.relax.VirtualMachine(exe, dev) gives TVM's own."""
        from .runtime.vm import virtual_machine

        module = self.jit()
        cuda = bool(self._meta.get("cuda")) if self._meta else self.target.is_cuda
        return virtual_machine(module, device, cuda, memory_cfg, functions=lambda: self.functions)

    def inspect(self) -> Any:
        """Build if needed (a cache hit counts) and report what runs: the host code, the kernels and
        their launches, every device allocation and copy (a jitflow.report.Report; print it)."""
        from .report.gather import inspect_folder

        with self._lock:
            got = self._obtain()
        with got:
            return inspect_folder(got.library.path.parent, got.meta, "build", str(got.info),
                                  keep_paths=self.settings.cache_enabled and not self._cache_key().uncacheable)

    def trace(self, fn: str, *args: Any, calls: int = 3, device: Any = None, memory_cfg: str | None = None) -> Any:
        """Run fn(*args) `calls` times on the GPU and report what the CUDA driver did, per call and at
        start-up, checked against inspect() (a jitflow.tracing.Trace; print it). Needs cupti-python:
        pip install 'jitflow[trace]'."""
        from .tracing.run import trace_executable

        return trace_executable(self, fn, args, calls, device, memory_cfg)

    def export_library(self, path: str | os.PathLike, **tvm_args: Any) -> Path:
        """Write the library to `path` (atomically); it loads with the TVM runtime alone. A name
        ending in a suffix of another format (.tar, .tar.gz, .zip, .o, .a, ...) is refused, and so
        are TVM's keyword arguments (fcompile, ...) but at their defaults (files/export_args.py)."""
        export_args.check(tvm_args)
        dest = export_path.destination(path)   # a regular file or a new name, in a folder that exists
        export_path.check_library_name(dest)   # not x.tar, x.o: what is written is a .so
        with self._lock:
            got = self._obtain()
        with got, export_path.replaced(dest, "export_library", 0o755, sync=True) as out:
            got.library.copy_to(out)   # the verified bytes, whatever the cache's path holds now
        return dest


def check_timeout(timeout_s: Any) -> None:
    """Refuse a timeout_s that is not a number of seconds above 0 (None: no limit)."""
    if timeout_s is None:
        return
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not 0 < timeout_s < float("inf"):
        raise InvalidInputError(f"timeout_s must be a number of seconds above 0 (or None for no limit), "
                                f"not {timeout_s!r}")


def _has_function(module: Any, name: str) -> bool:
    try:
        return module.implements_function(name, query_imports=True)
    except Exception:
        return False


def compile(mod: Any, target: Any = None, *, arch: Any = None, host: str | None = None,
            cuda_compiler: str | None = None, pass_config: dict[str, Any] | None = None,
            device_options: list[str] | tuple[str, ...] = (), cache: bool | str | None = None,
            cache_dir: str | os.PathLike | None = None, relax_pipeline: Any = None,
            cuda_floor: str | float | None = None, cache_salt: str | None = None,
            cpu_level: str | None = None, name: str | None = None, target_host: Any = None,
            tir_pipeline: Any = None, record: str | os.PathLike | None = None) -> Executable:
    """Validate the arguments and return a lazy Executable; nothing is lowered or compiled here.

    mod: a tvm.IRModule or a PrimFunc (copied: later changes to it do not reach the executable).
    target: "cuda", "c" ("llvm" is built as "c"), a dict or a tvm.target.Target; default the
    tvm.target.Target entered around this call (`with tvm.target.Target(...)`), else "cuda".
    arch: one CUDA arch or several ("sm_90", ["sm_80", "sm_90"]); default from the target or GPU;
    "portable": SASS for each GPU generation the compiler supports and PTX for the oldest.
    cuda_floor: the oldest driver (CUDA version, "13.0") the library must load on; it decides the
    PTX ISA of the fatbin. Default JITFLOW_CUDA_FLOOR, else the compiler's major version .0.
    pass_config: PassContext options, merged into the context the caller has entered now (its
    opt level, passes, instruments and config are honoured; none entered means opt_level=3).
    relax_pipeline (Relax modules): a name for tvm.relax.get_pipeline or a tvm.transform.Pass;
    default TVM's pipeline for the target. A name is keyed with the function behind it, a Pass
    by str(pass).
    cache_salt: text mixed into the key (default JITFLOW_CACHE_SALT) for what jitflow cannot see.
    cpu_level: how much of the CPU the host code may use (default JITFLOW_CPU_LEVEL, else the
    architecture's baseline, which every CPU of it runs): "x86-64-v2", "x86-64-v3", "x86-64-v4";
    "armv8.2-a", "neoverse-n1", "neoverse-v1", "neoverse-v2" for aarch64; "native" (this machine's
    CPU, resolved now to its concrete features). The library then loads only where the CPU has them.
    A target whose mcpu names one of these levels (`{"kind": "llvm", "mcpu": "x86-64-v3"}`, a CUDA
    target's llvm host's mcpu) builds at it, over JITFLOW_CPU_LEVEL (targets/reading.py).
    name: a label for the cache entry (`jitflow cache ls` shows it); not part of the key.
    cache: True (default JITFLOW_CACHE, else True), False (build in a temporary folder) or "readonly"
    (lookups only: a miss is a CacheMissError; nothing is built or written under the cache folder).
    record: a file each key this executable obtains is appended to, as a JSON line (default
    JITFLOW_RECORD; cache/deploy/record.py says what a line holds); not part of the key.
    target_host: TVM's spelling of host= (a TVM target: "llvm -mtriple=aarch64-linux-gnu", "c").
    tir_pipeline: only TVM's "default" (None): jitflow runs the TIR pipeline registered under TVM's
    default name, which the key covers (register yours there to run it).
    """
    import tvm

    if isinstance(mod, tvm.tirx.PrimFunc):
        mod = ir_module.prepare(mod)
    elif not isinstance(mod, tvm.IRModule):
        raise InvalidInputError(f"mod must be a tvm.IRModule or a tirx PrimFunc, not {type(mod).__name__}")
    else:
        mod = ir_module.prepare(mod)
    if len(mod.functions) == 0:
        raise InvalidInputError("the IRModule is empty: it has no functions to build")
    settings = target_reading.with_target_level(
        config.resolve(cache_dir=cache_dir, cache=cache, cuda_compiler=cuda_compiler, cuda_floor=cuda_floor,
                       cache_salt=cache_salt, cpu_level=cpu_level, record=record),
        target_reading.read(chosen_target(target)), cpu_level is not None)
    check_tir_pipeline(tir_pipeline)
    spec = resolve_target(target, cuda_toolchain.expand_archs(arch, settings.cuda_compiler), host, target_host)
    level = resolve_cpu_level(settings.cpu_level, spec.host, lambda: cpu_features.this_cpu().features,
                              machine_host(), settings.cpu_level_from)
    if spec.kind == "c":        # a candidate tuned in this process, compiled at another CPU level: said
        tuned.check(mod, tuned.level_name(level, spec.host))
    if pass_config is not None and not isinstance(pass_config, dict):
        raise InvalidInputError("pass_config must be a dict of TVM PassContext options")
    pass_context.check_config(pass_config)
    if isinstance(device_options, str) or not all(isinstance(o, str) for o in device_options):
        raise InvalidInputError("device_options must be a list of strings (extra NVRTC/nvcc flags)")
    if name is not None and not isinstance(name, str):
        raise InvalidInputError(f"name must be a string (a label for the cache entry), not {type(name).__name__}")
    for what, text in [("name", name), *(("device_options", o) for o in device_options)]:
        config.check_text(text, what)
    pipeline_name, pipeline_pass = None, None
    if ir_module.is_relax(mod):
        pipeline_name, pipeline_pass = relax_pipeline_of(relax_pipeline)
    elif relax_pipeline is not None:
        raise InvalidInputError("relax_pipeline= applies to modules with Relax functions; this one has none")
    options = BuildOptions.make(pass_config, device_options, relax_pipeline=pipeline_name, label=name,
                                origin=caller_origin(),      # kept with the entry: `cache ls`, the record, a miss
                                # None: the compiler's major version .0, found when first needed (Executable.options)
                                cuda_floor=settings.cuda_floor if spec.is_cuda else None, cpu_level=level)
    return Executable(mod, spec, settings, options, InProcess(pass_context.caller_context(), pipeline_pass))
