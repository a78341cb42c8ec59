"""The host C compiled in pieces by zig processes running side by side (split.py), in the
background while the device code builds.

There are as many pieces as usable cores (fewer for a small source): each piece costs a zig process
and a read of the headers (some 40 ms), so more pieces than cores only add work. A library's
layout (not its behaviour) therefore follows the number of cores of the machine that built it. If
the pieces fail to compile, the whole file is compiled as one before any error is reported, so a
gap in the splitter can cost time but never a build.
"""
from __future__ import annotations

import logging
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Sequence

from ...errors import BuildTimeoutError, CompileError
from ...toolchain.zig_cc import cc1_batch, compile_batch, object_cache, zig
from ...toolchain.deadline import Deadline
from . import mathlib, split

log = logging.getLogger("jitflow")
#: a piece of this many bytes of C takes about a tenth of a second at -O2; smaller ones would
#: spend as much on starting zig and reading the headers as they save.
MIN_PIECE_BYTES = 64_000
#: at most this many pieces, whatever the machine.
MAX_PIECES = 32
#: a function of more C than this (explicitly unrolled tuning candidates make megabytes) is compiled
#: with LARGE_FUNCTION_FLAGS: clang's machine instruction scheduler builds a dependence graph over
#: each basic block, and an unrolled candidate's body is one block of tens of thousands of
#: instructions (a 508 KB function: 9.0 of its 15.3 s of CPU at -O2 in that scheduler). The flags
#: keep the scheduler, which the code needs (without it that candidate ran 1.56x LLVM's build of it,
#: with it 1.13x), and bound its graph: past 50 memory operations in a region its dependences are
#: kept coarser (-dag-maps-huge-region, LLVM's own compile-time guard, whose default is 1000). The
#: post-RA scheduler and the SLP vectorizer are left out (the C host writes vectors as vector
#: types already; on code written lane by lane the SLP vectorizer's time grows faster than the
#: code's). docs/tuning.md has the figures.
LARGE_FUNCTION_BYTES = 200_000
LARGE_FUNCTION_FLAGS = ("-fno-slp-vectorize", "-mllvm", "-dag-maps-huge-region=50",
                        "-mllvm", "-enable-post-misched=false")
#: what one call of mathlib.py's inline math counts for against LARGE_FUNCTION_BYTES: each inlines some
#: forty instructions, and the SLP vectorizer's time on a block of them grows much faster than their
#: number (a softmax candidate's 30 KB function of 512 inline expf calls: 14.9 s at -O2, 8.8 s of it in
#: the SLP vectorizer and 4.0 s sinking what it made; 0.7 s for 128 calls, 2.1 s for 256; 2.0 s for all
#: 512 with LARGE_FUNCTION_FLAGS)
MATH_CALL_BYTES = 1_000
#: a source of more C than this is not compiled in build_all's shared processes (compile_batch.py):
#: it would hold up the others, and its own process is a small part of its time
BATCH_MAX_BYTES = MIN_PIECE_BYTES


def flags_for(text: str) -> tuple[str, ...]:
    """The flags a host C piece is compiled with beyond zig's own: LARGE_FUNCTION_FLAGS where one of
    its functions is larger than LARGE_FUNCTION_BYTES, its inline math calls counted MATH_CALL_BYTES each."""
    def math_bytes(code: str) -> int:
        return MATH_CALL_BYTES * mathlib.call_count(code)

    if len(text) + math_bytes(text) <= LARGE_FUNCTION_BYTES \
            or split.largest_function(text, math_bytes) <= LARGE_FUNCTION_BYTES:
        return ()
    return LARGE_FUNCTION_FLAGS


def piece_count(size: int, cores: int | None = None) -> int:
    """How many pieces a host C source of `size` bytes is split into on a machine with `cores`."""
    cores = usable_cores() if cores is None else cores
    return max(1, min(MAX_PIECES, cores, -(-size // MIN_PIECE_BYTES)))


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


class HostCompile:
    """Compiles `source` (the kept host.c) into objects in `folder`, in the background.

    `on_progress` receives a short description of what is running, for the progress line; `jobs` is
    how many zig processes run at once (default: the usable cores), `pieces` how many pieces the
    source is split into (default: piece_count for `jobs`), `cpu` zig's -mcpu (None: the baseline).
    `share_entries` (CPU kernel libraries): a source that is not split compiles its entry functions
    apart, into the object they share with every library of their signatures (object_cache.py).
    `deadline`: a zig process still running then is killed, and wait() raises BuildTimeoutError
    (the file is not compiled again whole).
    """

    def __init__(self, source: Path, text: str, folder: Path, include_dirs: Sequence[str], host: str,
                 zig_cache: Path, local_cache: Path, on_progress: Callable[[str], None] | None = None,
                 jobs: int | None = None, pieces: int | None = None, cpu: str | None = None,
                 share_entries: bool = False, deadline: Deadline | None = None) -> None:
        self.source, self.folder, self.host, self.cpu = source, folder, host, cpu
        self.deadline = deadline
        self.share_entries = share_entries
        self.include_dirs, self.zig_cache, self.local_cache = list(include_dirs), zig_cache, local_cache
        self.on_progress = on_progress
        self._member = compile_batch.current()      # build_all's batches: the compile may be shared
        jobs = jobs or usable_cores()
        self.pieces: list[Path] = [source]
        self.done = 0
        self._lock = threading.Lock()
        self._launch = threading.Condition(self._lock)   # told as each piece's compiler is started
        self._unstarted: int | None = None               # pieces whose compiler is not started yet
        self._cancelled = False
        self._running: set[zig.Job] = set()
        self._text = text
        self._extra: dict[Path, tuple[str, ...]] = {}   # flags beyond zig's, by piece (made beside the caller)
        self._futures: list[Future[Path]] = []
        self._pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="jitflow-zig")
        # the split runs beside the caller (which packs the weights meanwhile), then the pieces compile
        count = piece_count(len(text), jobs) if pieces is None else pieces
        self._started = self._pool.submit(self._start, text, count)

    def _start(self, text: str, count: int) -> None:
        texts = split.split(text, count)
        entries = split.split_entries(text) if self.share_entries and len(texts) == 1 else None
        if entries is not None:          # the entry functions' object is shared (object_cache.py)
            texts = [entries[1]]
        pieces = [self.source] if len(texts) == 1 and entries is None else self._write_pieces(texts)
        for piece, piece_text in zip(pieces, texts):
            self._extra[piece] = flags_for(piece_text)
        if self._member is not None and (len(pieces) != 1 or self._extra.get(pieces[0])
                                         or len(texts[0]) > BATCH_MAX_BYTES):
            self._member.decline()       # only a source compiled whole, with zig's flags alone, is shared
        with self._lock:
            self.pieces = pieces
            self._unstarted = len(pieces)
            if not self._cancelled:
                self._futures = [self._pool.submit(self._compile, piece) for piece in pieces]
                if entries is not None:
                    self._futures.append(self._pool.submit(self._shared, entries[0]))
        self._report()

    def _shared(self, text: str) -> Path:
        self._wait_started()            # its Python work would hold the interpreter from their start
        out = self.folder / "host_entries.o"
        object_cache.copy_object(text, out, self.include_dirs, self.host, self.zig_cache, self.cpu, self.deadline)
        return out

    def _write_pieces(self, pieces: list[str]) -> list[Path]:
        paths = []
        for n, text in enumerate(pieces):
            path = self.folder / f"host_{n}.c"
            path.write_text(text)
            paths.append(path)
        return paths

    def started(self) -> None:
        """Wait until the pieces are cut and their compilers started: Python work the caller does
        meanwhile would hold the interpreter from the split and the compilers' start (the compilers
        themselves need none)."""
        try:
            self._started.result()
        except Exception:       # noqa: BLE001 - wait() raises it, with the whole file's context
            return
        self._wait_started()

    def _wait_started(self) -> None:
        """Wait until each piece's compiler is started (or given up: cancelled, failed, or compiled in
        build_all's shared process)."""
        with self._launch:
            self._launch.wait_for(lambda: self._cancelled or (self._unstarted is not None and self._unstarted <= 0))

    def _one_started(self) -> None:
        with self._launch:
            if self._unstarted is not None:
                self._unstarted -= 1
            self._launch.notify_all()

    def describe(self) -> str:
        """What is compiling, for the progress line."""
        total = len(self.pieces)
        return "compiling the host C" if total == 1 else f"compiling the host C in {total} pieces ({self.done} done)"

    def _report(self) -> None:
        if self.on_progress:
            self.on_progress(self.describe())

    def _compile(self, source: Path) -> Path:
        out = self.folder / (source.stem + ".o")
        if self._member is not None and self._member.open:
            self._one_started()          # waiting for the batch is not starting a compiler
            if self._shared_compile(source, out):
                return out
        try:
            with self._lock:
                if self._cancelled:
                    raise CompileError("zig cc", "cancelled", "the build failed elsewhere", source)
                extra = self._extra.get(source, ())
                job = zig.compile_object(source, out, self.include_dirs, self.host, self.zig_cache,
                                         self.local_cache, self.cpu, **({"extra": extra} if extra else {}),
                                         deadline=self.deadline)
                self._running.add(job)
        finally:
            self._one_started()
        try:
            job.wait(self.deadline)
        finally:
            with self._lock:
                self._running.discard(job)
        with self._lock:
            self.done += 1
        self._report()
        return out

    def _shared_compile(self, source: Path, out: Path) -> bool:
        """Compile `source` with the other builds of the batch (compile_batch.py); False: compile it
        alone after all."""
        assert self._member is not None
        outcome = self._member.compile(source, out, self.include_dirs, self.host, self.zig_cache, self.cpu,
                                       self.deadline)
        if outcome == cc1_batch.TIMED_OUT:
            assert self._member.request is not None
            raise cc1_batch.timeout_error(self._member.request)
        if outcome != cc1_batch.BUILT:
            return False
        with self._lock:
            self.done += 1
        self._report()
        return True

    def wait(self) -> list[Path]:
        """The objects, once all are compiled; CompileError (with the whole file's log) on failure."""
        try:
            self._started.result()
            try:
                objects = [f.result() for f in self._futures]
            except BuildTimeoutError as exc:
                self.cancel()                    # the other pieces are past it too
                raise exc.with_source(self.source) from None   # the pieces go: name the whole file
            except CompileError as exc:
                if self.pieces == [self.source]:
                    raise
                log.debug("jitflow: the host C pieces failed (%s); compiling the file whole", exc.log[-500:])
                for path in self.folder.glob("host_*.o"):
                    path.unlink()
                self._extra[self.source] = flags_for(self._text)
                objects = [self._compile(self.source)]
            return objects
        finally:
            self._pool.shutdown(wait=True)
            for piece in self.pieces:
                if piece != self.source:
                    piece.unlink(missing_ok=True)

    def cancel(self) -> None:
        """Stop every zig process (the build failed elsewhere)."""
        with self._lock:
            self._cancelled = True
            self._launch.notify_all()
            running = list(self._running)
            futures = list(self._futures)
        for f in [self._started, *futures]:
            f.cancel()
        for job in running:
            job.kill()                  # their threads reap them
        self._pool.shutdown(wait=True)
        for piece in self.pieces:
            if piece != self.source:
                piece.unlink(missing_ok=True)
