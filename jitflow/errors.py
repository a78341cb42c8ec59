"""The one error hierarchy of jitflow: every failure a user can meet is a JitflowError."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence


class JitflowError(Exception):
    """Base class of every error jitflow raises on purpose."""


class InvalidInputError(JitflowError, ValueError):
    """An argument is not something jitflow can build: wrong type, empty module, bad option."""


class TargetError(InvalidInputError):
    """The target, the arch list or the host triple is not supported or is misspelled."""


class ScheduleError(JitflowError):
    """The module cannot be lowered for the target as scheduled (e.g. loops not bound to threads)."""


class LoweringError(JitflowError):
    """TVM failed to lower the module; TVM's own message is kept."""


class ToolMissingError(JitflowError):
    """A tool or Python package the build needs is not installed."""


#: characters of a compiler's command a message quotes; the whole command is kept beside the source
COMMAND_CHARS = 400


class CompileError(JitflowError):
    """A compiler (zig cc, NVRTC, nvfatbin, nvcc) failed.

    Carries the command (or API call), the compiler's log and the path of the kept source. The
    message quotes the command's first COMMAND_CHARS characters (a CPU level's flags run to
    kilobytes); where the sources were kept, the whole command is in `command_path` beside them.
    """

    def __init__(self, tool: str, command: Sequence[str] | str, log: str,
                 source_path: Path | str | None = None) -> None:
        self.tool = tool
        self.command = command if isinstance(command, str) else " ".join(str(c) for c in command)
        self.log = log
        self.source_path = Path(source_path) if source_path else None
        self.command_path: Path | None = None
        super().__init__(self._text())

    def _headline(self) -> str:
        return f"{self.tool} failed."

    def _command_text(self) -> str:
        if len(self.command) <= COMMAND_CHARS:
            return self.command
        whole = f"the whole command in {self.command_path}" if self.command_path else "cut here"
        return f"{self.command[:COMMAND_CHARS]} ... ({len(self.command)} characters; {whole})"

    def _text(self) -> str:
        lines = [self._headline(), f"  command: {self._command_text()}"]
        if self.source_path:
            lines.append(f"  source kept at: {self.source_path}")
        lines.append("  log:")
        lines.extend("    " + ln for ln in (self.log.strip() or "(empty)").splitlines()[-60:])
        return "\n".join(lines)

    def with_source(self, source_path: Path | str | None, command_path: Path | str | None = None) -> CompileError:
        """The same error (same class and details) pointing at the source where it is kept now (and the
        file holding the whole command), the build folder being gone; None when it could not be kept."""
        new = type(self).__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.source_path = Path(source_path) if source_path else None
        new.command_path = Path(command_path) if command_path else None
        new.args = (new._text(),)
        return new


class BuildTimeoutError(CompileError):
    """A build ran past its time limit (build_all's or Executable.build's `timeout_s`): the compiler
    running then was killed, and nothing was stored. Carries what CompileError carries. The message's
    first line says what ran out of time, at which limit, where its source is kept and how to raise
    the limit; the command and the log follow."""

    def __init__(self, tool: str, command: Sequence[str] | str, log: str, source_path: Path | str | None = None,
                 timeout_s: float | None = None, killed: bool = True) -> None:
        self.timeout_s = timeout_s
        self.killed = killed
        super().__init__(tool, command, log, source_path)

    def _headline(self) -> str:
        limit = f"{self.timeout_s:g} s" if self.timeout_s is not None else "its time limit"
        if self.killed:
            what = f"{self.tool} was killed at the build's time limit of {limit}"
        else:
            what = (f"{self.tool} ran past the build's time limit of {limit} (it cannot be interrupted: the build "
                    "stopped when it ended)")
        where = f"; source kept at {self.source_path}" if self.source_path else ""
        return (f"{what}{where}; to allow more, raise timeout_s (Builder(timeout_s=...), build_all(timeout_s=...), "
                "exe.build(timeout_s=...); None: no limit).")


class BuildProcessDiedError(JitflowError):
    """The process that built an item of build_all died before it answered: killed by a signal (the
    OOM killer's SIGKILL, a crash of TVM or a compiler inside it: SIGSEGV, SIGABRT) or exited. The
    other items go on; nothing was stored for this one."""

    def __init__(self, what: str, exitcode: int | None) -> None:
        import signal

        if exitcode is not None and exitcode < 0:
            try:
                name = signal.Signals(-exitcode).name
            except ValueError:
                name = f"signal {-exitcode}"
            how = f"was killed by {name} (signal {-exitcode})"
        else:
            how = f"exited with status {exitcode}" if exitcode is not None else "ended"
        self.exitcode = exitcode
        super().__init__(f"the process building {what} {how} before it finished: out of memory (the kernel's OOM "
                         "killer sends SIGKILL) or a crash in TVM or a compiler; the other items went on. Build it "
                         "alone (exe.build()) to see the crash, or give the workers more memory")


class HostCodeError(CompileError):
    """The module's host code uses a construct that the C host cannot express.

    TVM's C code generator or clang rejected it even after jitflow's prelude and IR rewriting, or
    jitflow's IR pass found it could not rewrite it. Names the construct and the TIR functions that
    use it, and what to do (`advice`: by default, rewrite it or build with TVM's LLVM host; for what
    that host refuses too, how to change the schedule); keeps the failing tool's command and log
    when a tool failed.
    """

    def __init__(self, construct: str, functions: Sequence[str], tool: str = "jitflow's C host IR pass",
                 command: Sequence[str] | str = "", log: str = "", source_path: Path | str | None = None,
                 advice: str | None = None) -> None:
        self.construct = construct
        self.functions = list(functions)
        self.advice = advice or ("Rewrite that construct, or build this module with TVM's LLVM host "
                                 "(tvm.compile(mod, 'llvm')); please report it to jitflow with the module.")
        super().__init__(tool, command, log, source_path)

    def _text(self) -> str:
        where = ", ".join(repr(f) for f in self.functions) or "(function not identified)"
        head = f"the C host cannot build {self.construct} in TIR function {where}. {self.advice}"
        return f"{head}\n{super()._text()}" if self.log.strip() else head


class FunctionNotFoundError(JitflowError, LookupError):
    """The module has no function of that name; the message lists the ones it has."""

    def __init__(self, name: str, available: Sequence[str], note: str = "") -> None:
        self.name = name
        self.available = list(available)
        names = ", ".join(repr(n) for n in self.available) or "(none)"
        tail = f"; {note}" if note else f"; functions: {names}"
        super().__init__(f"no function named {name!r} in the module{tail}")

    def __str__(self) -> str:  # LookupError would quote the message
        return self.args[0]


class CacheError(JitflowError):
    """The cache directory cannot be used (not writable, unsafe ownership or permissions)."""


class UntrustedFolderError(CacheError):
    """A folder that would hold code to load can be changed by another user: jitflow refuses it.

    Carries the folder and the reason (which folder on the way, its owner and mode).
    """

    def __init__(self, folder: Path | str, problem: str, fix: str | None = None, remedy: str | None = None) -> None:
        self.folder = Path(folder)
        self.problem = problem
        fix = fix or "or choose a folder of your own"
        remedy = remedy or "make every folder on the way owned by you (or root) and not writable by others (chmod go-w)"
        super().__init__(
            f"refusing the folder {self.folder}: {problem}; another user could replace what jitflow "
            f"loads from it. Fix: {remedy}, {fix}")


class CacheMissError(CacheError):
    """A read-only cache (JITFLOW_CACHE=readonly, cache="readonly") has no usable entry for a key:
    nothing is built. Carries the key, the module's label, the target, why the entry was not used
    (`reason`), the `kind` of miss (MISS_KINDS) with a `fix` that fits it, where the module was
    compiled (`origin`, file:line), and for `other-inputs` the key inputs that differ from the cache's
    entry for the same module and target (`differences`, each 'name: here X, in the cache Y')."""

    #: missing: no entry (or no cache folder); unreadable: this user may not read a folder or file on
    #: the way; untrusted: one is another user's, or writable by others; damaged: the entry fails its
    #: checks; other-inputs: the cache has this module and target under other key inputs;
    #: uncacheable: the module cannot be cached at all
    MISS_KINDS = ("missing", "unreadable", "untrusted", "damaged", "other-inputs", "uncacheable")
    _HEADS = {"unreadable": "cannot be read by this user", "untrusted": "is not trusted",
              "damaged": "has a damaged entry"}

    def __init__(self, key: str, label: str, target: str, cache_dir: Path | str, reason: str | None = None,
                 kind: str = "missing", fix: str | None = None, differences: Sequence[str] = (),
                 origin: str | None = None) -> None:
        self.key, self.label, self.target, self.reason = key, label, target, reason
        self.cache_dir = Path(cache_dir)
        self.kind, self.differences, self.origin = kind, list(differences), origin
        self.fix = fix or (
            "run the workload where building is allowed with JITFLOW_RECORD=record.jsonl, then `jitflow cache "
            f"pack bundle.tar --manifest record.jsonl` there and `jitflow cache unpack bundle.tar --cache-dir "
            f"{self.cache_dir}` here (docs/deploy.md); or set JITFLOW_CACHE=1 to build")
        head = self._HEADS.get(kind, "has no entry")
        where = f", compiled at {origin}" if origin else ""
        why = f": {reason}" if reason else ""
        super().__init__(
            f"the read-only cache {self.cache_dir} {head} for key {key} (module {label}, target {target}{where})"
            f"{why}; nothing is built in read-only mode. Fix: {self.fix}")


class RecordError(JitflowError):
    """The record of obtained keys (JITFLOW_RECORD, record=) cannot be written: the message names the
    file and why. Raised rather than losing the line, since a record with holes packs a bundle with holes."""


class EntryRefusedError(CacheError):
    """An entry that came from elsewhere (the shared tier, a build farm worker, a bundle), or one about
    to leave the cache for elsewhere, failed the cache's checks (metadata, key, format, the library's
    size and sha256, its file names): nothing was installed or sent."""


class BundleError(InvalidInputError):
    """A cache bundle (`jitflow cache pack`/`unpack`) cannot be made or read as asked: a key that is
    not in the cache, a record line that names no key, or a bundle that failed a check (a damaged,
    extra, missing or foreign member, a link, a path leaving the cache, a format this jitflow cannot
    read). An unpack refused this way installed nothing."""


class LibraryFormatError(JitflowError):
    """A library or one of its embedded blobs is malformed."""


class LoadError(JitflowError):
    """A built library could not be loaded by the TVM runtime."""


class RemoteCacheError(JitflowError):
    """The shared cache tier failed a request (unreachable, slow, full, refusing, misconfigured).

    jitflow never lets it fail a build: it logs one warning and goes on with the local cache.
    """


class RemoteEntryError(RemoteCacheError):
    """A shared-tier entry failed its checks (signature, sha256, format): it is refused and rebuilt."""


class KeyMismatchError(JitflowError):
    """A build farm worker computed another cache key than the caller for the same request: something
    the key covers differs between the two processes (tool versions, registrations, environment).
    The worker refuses to build, and the caller builds the item itself."""

    def __init__(self, caller_key: str, worker_key: str, differences: Sequence[str] = ()) -> None:
        self.caller_key, self.worker_key, self.differences = caller_key, worker_key, list(differences)
        where = "; ".join(self.differences) or "inputs the request does not carry"
        super().__init__(f"the worker's key {worker_key[:12]} is not the caller's {caller_key[:12]} ({where}): "
                         "give the workers the same jitflow, TVM and zig versions and the same registrations, "
                         "or build these items here")


class UntrustedBundleError(BundleError):
    """A bundle refused for its origin where keys are trusted (`unpack --trust`, JITFLOW_TRUSTED_KEYS): it is
    unsigned, signed by a key that is not trusted, or its manifest changed since it was signed. Nothing
    was installed."""


class EntryNotFoundError(CacheError, LookupError):
    """No cache entry has that label or key prefix (jitflow.load_entry): the message lists the entries there are."""
