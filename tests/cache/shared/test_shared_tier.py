"""The shared cache tier: one build per cluster, signed entries checked, and never a failed build.

Every test that needs Redis runs a real redis-server (tests/redis_server.py) with cache/redis.conf;
"nodes" are processes or Executables with separate local caches sharing that one tier.
"""
from __future__ import annotations

import hashlib
import json
import logging
import queue
import signal
import socket
import subprocess
import threading
import time

import instruments
import kernels
import numpy as np
import pytest
import tvm
from conftest import ROOT, run_python, start_python
from redis_server import RedisServer, free_port, redis_missing, required_in_ci

import jitflow
from jitflow import logs
from jitflow.cache import door
from jitflow.cache.shared import backend
from jitflow.cache.shared import stats as remote_cache
from jitflow.cache.shared import tier as remote_tier
from jitflow.cache.wire import entry_format as remote_entry
from jitflow.config import RemoteSettings
from jitflow.errors import RemoteEntryError

SECRET = "test-signing-key"

# a node building or fetching axpb(scale); {context} is where it compiles and calls (instruments)
NODE = """
    import contextlib, json, sys, time
    import numpy as np, tvm, jitflow, kernels, instruments
    from jitflow.cache.shared import stats as remote_cache
    scale = {scale}
    {setup}
    with {context}:
        exe = jitflow.compile(kernels.axpb(scale), "c")
        a = np.arange(64, dtype="float32")
        c = tvm.runtime.tensor(np.zeros(64, "float32"))
        exe["main"](tvm.runtime.tensor(a), c)
    np.testing.assert_allclose(c.numpy(), a * scale + 1)
    print(exe.build_info.outcome, json.dumps(remote_cache.stats()), flush=True)
"""

# any lowering fails: a shared hit must not lower or compile
NO_LOWERING = "instruments.Refuse()"

# a barrier across processes, then a build slow enough that every racer arrives while it runs
BARRIER = """
    import os, pathlib
    barrier = pathlib.Path({barrier!r})
    (barrier / str(os.getpid())).touch()
    deadline = time.monotonic() + 120
    while len(list(barrier.iterdir())) < {n} and time.monotonic() < deadline:
        time.sleep(0.01)
"""
SLOW_BUILD = "instruments.sleep(1.5)"

# the builder says so, then hangs in its build (holding the cluster lock) until it is killed
HANG_IN_BUILD = 'instruments.sleep(600, say="building")'



def node_code(scale: float, setup: str = "", instrument: str | None = None) -> str:
    """A node building or fetching axpb(scale); `instrument` (an expression) watches its lowering."""
    import textwrap

    setup = textwrap.indent(textwrap.dedent(setup), "    ").strip()
    context = "contextlib.nullcontext()" if instrument is None else f"instruments.context({instrument})"
    return NODE.format(scale=scale, setup=setup, context=context)


def node_env(tmp_path, name: str, **extra: str) -> dict[str, str]:
    return {"JITFLOW_CACHE_DIR": str(tmp_path / name), **extra}


def run_kernel(scale: float, cache_dir) -> str:
    """Build or fetch axpb(scale) in this process with its own local cache; check it; the outcome."""
    exe = jitflow.compile(kernels.axpb(scale), "c", cache_dir=cache_dir)
    a = np.arange(64, dtype="float32")
    c = tvm.runtime.tensor(np.zeros(64, "float32"))
    exe["main"](tvm.runtime.tensor(a), c)
    np.testing.assert_allclose(c.numpy(), a * scale + 1)
    return exe.build_info.outcome


def local_entry(cache_root, key: str):
    return cache_root / "v1" / "entries" / key[:2] / key


def key_of(scale: float) -> str:
    return jitflow.compile(kernels.axpb(scale), "c").key


def tier_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "jitflow" and r.levelno == logging.WARNING and "shared cache tier" in r.getMessage()]


@pytest.fixture(autouse=True)
def fresh_tier_state(monkeypatch):
    """Each test starts as a new process would: no tiers opened, no warning given, zero counters."""
    remote_tier.forget_tiers()
    logs.forget_warnings()
    remote_cache.reset_stats()
    for name in ("JITFLOW_REMOTE_CACHE", "JITFLOW_REMOTE_CACHE_KEY", "JITFLOW_REMOTE_CACHE_UNSIGNED",
                 "JITFLOW_REMOTE_CACHE_MAX_BYTES", "JITFLOW_REMOTE_CACHE_TIMEOUT", "JITFLOW_REMOTE_CACHE_LOCK_TTL"):
        monkeypatch.delenv(name, raising=False)


def _need_redis() -> None:
    why = redis_missing()
    if why:
        if required_in_ci():
            pytest.fail(f"the shared-tier tests must run in CI: {why}")
        pytest.skip(why)


@pytest.fixture(scope="module")
def redis_server():
    _need_redis()
    server = RedisServer().start()
    yield server
    server.close()


@pytest.fixture
def tier(redis_server, cache_dir, monkeypatch):
    """An empty shared tier that jitflow (this process and its children) uses with the signing key."""
    redis_server.admin().flushall()
    monkeypatch.setenv("JITFLOW_REMOTE_CACHE", redis_server.url)
    monkeypatch.setenv("JITFLOW_REMOTE_CACHE_KEY", SECRET)
    return redis_server


# --- the entry format -------------------------------------------------------------------------

def test_entry_checks_refuse_every_kind_of_damage(tier, tmp_path):
    run_kernel(21.0, tmp_path / "a")
    key = key_of(21.0)
    entry = local_entry(tmp_path / "a", key)
    blob = door.entry_bytes(entry, key, secret=SECRET, max_bytes=1 << 20)
    meta, files = remote_entry.unpack(blob, key, SECRET)
    assert files["lib.so"] == (entry / "lib.so").read_bytes()
    assert files["src/host.c"] == (entry / "src" / "host.c").read_bytes()
    assert meta["so_sha256"] == hashlib.sha256(files["lib.so"]).hexdigest()

    flipped = bytearray(blob)
    library_at = 40 + int.from_bytes(blob[36:40], "big")  # magic, HMAC, header size, header
    assert blob[library_at:library_at + 4] == b"\x7fELF"
    flipped[library_at + 100] ^= 1
    with pytest.raises(RemoteEntryError, match="signature"):
        remote_entry.unpack(bytes(flipped), key, SECRET)
    with pytest.raises(RemoteEntryError, match="sha256"):  # unsigned readers still check each file
        remote_entry.unpack(bytes(flipped), key, None)
    with pytest.raises(RemoteEntryError, match="signature"):
        remote_entry.unpack(blob, key, "another key")
    with pytest.raises(RemoteEntryError, match="signature"):  # a valid entry moved to another key
        remote_entry.unpack(blob, key_of(22.0), SECRET)
    with pytest.raises(RemoteEntryError):
        remote_entry.unpack(blob[:-10], key, None)
    with pytest.raises(RemoteEntryError, match="not a jitflow"):
        remote_entry.unpack(b"garbage", key, SECRET)

    # a correctly signed entry that names a file outside its folder is still refused
    header = {"key": key, "format": 1, "meta": meta, "files": [["lib.so", len(files["lib.so"]),
                                                                 meta["so_sha256"]], ["src/../../x", 1, "0"]]}
    head = json.dumps(header).encode()
    body = len(head).to_bytes(4, "big") + head + files["lib.so"] + b"x"
    evil = remote_entry.MAGIC + remote_entry._mac(SECRET, key, body) + body
    with pytest.raises(RemoteEntryError, match="bad file name"):
        remote_entry.unpack(evil, key, SECRET)

    # over the size cap: the sources are left out first, then the entry altogether
    lib_only = len(files["lib.so"]) + 2000
    _, small = remote_entry.unpack(door.entry_bytes(entry, key, secret=SECRET, max_bytes=lib_only), key, SECRET)
    assert list(small) == ["lib.so"]
    assert door.entry_bytes(entry, key, secret=SECRET, max_bytes=1000) is None


def _unsigned_entry(key: str, head: bytes, payload: bytes = b"") -> bytes:
    body = len(head).to_bytes(4, "big") + head + payload
    return remote_entry.MAGIC + bytes(remote_entry.MAC_SIZE) + body


@pytest.mark.parametrize("header", ["a size of 1e400", "nested 100000 deep", "a meta field of the wrong type"])
def test_an_unsigned_entry_with_a_hostile_header_is_a_miss_with_one_warning(tier, tmp_path, monkeypatch, caplog,
                                                                             header):
    scale = {"a size of 1e400": 45.0, "nested 100000 deep": 46.0, "a meta field of the wrong type": 47.0}[header]
    key = key_of(scale)
    meta = {"key": key, "format": 1, "so_size": 3, "so_sha256": hashlib.sha256(b"abc").hexdigest()}
    files = [["lib.so", 3, meta["so_sha256"]]]
    if header == "a size of 1e400":
        head = json.dumps({"key": key, "format": 1, "meta": meta, "files": [["lib.so", 1e400, "0"]]}).encode()
    elif header == "nested 100000 deep":
        head = json.dumps({"key": key, "format": 1, "meta": meta, "files": files})[:-1].encode()
        head += b', "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    else:
        head = json.dumps({"key": key, "format": 1, "meta": dict(meta, created="yesterday"), "files": files}).encode()
    blob = _unsigned_entry(key, head, b"abc")
    with pytest.raises(RemoteEntryError, match="unreadable header"):
        remote_entry.unpack(blob, key, None)
    monkeypatch.delenv("JITFLOW_REMOTE_CACHE_KEY")
    monkeypatch.setenv("JITFLOW_REMOTE_CACHE_UNSIGNED", "1")
    tier.admin().set(f"jitflow:v1:entry:{key}", blob)
    caplog.set_level(logging.WARNING, "jitflow")
    assert run_kernel(scale, tmp_path / "a") == "built"
    refused = [r.getMessage() for r in caplog.records if "refused shared entry" in r.getMessage()]
    assert len(refused) == 1 and "unreadable header" in refused[0], refused
    assert remote_cache.stats()["refusals"] == 1


# --- sharing ----------------------------------------------------------------------------------

def test_two_nodes_share_one_build(tier, tmp_path):
    assert run_kernel(23.0, tmp_path / "node-a") == "built"
    key = key_of(23.0)
    assert tier.entry_names() == [f"jitflow:v1:entry:{key}".encode()]
    assert remote_cache.stats()["stored"] == 1

    out = run_python(node_code(23.0, instrument=NO_LOWERING), env=node_env(tmp_path, "node-b")).stdout.split(maxsplit=1)
    assert out[0] == "shared"
    assert json.loads(out[1])["hits"] == 1
    # node B's local copy went through the local cache's publish: same bytes, metadata, sources
    a, b = local_entry(tmp_path / "node-a", key), local_entry(tmp_path / "node-b", key)
    assert (b / "lib.so").read_bytes() == (a / "lib.so").read_bytes()
    meta = json.loads((b / "meta.json").read_text())
    assert meta["so_sha256"] == hashlib.sha256((b / "lib.so").read_bytes()).hexdigest() and meta["fetched"] > 0
    assert (b / "src" / "host.c").read_text() == (a / "src" / "host.c").read_text()
    assert (b / "last_used").exists()


def _resign_for_other_inputs(tier, key: str, folder) -> None:
    """Replace the entry by a correctly signed one whose metadata records other tool versions."""
    meta, files = remote_entry.unpack(tier.admin().get(f"jitflow:v1:entry:{key}"), key, SECRET)
    meta["key_inputs"]["versions"]["tvm"] = "0.0"
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    (folder / "meta.json").write_text(json.dumps(meta))
    tier.admin().set(f"jitflow:v1:entry:{key}", door.entry_bytes(folder, key, secret=SECRET, max_bytes=1 << 20))


@pytest.mark.parametrize("damage", ["flip a library byte", "sign with another key", "sign other inputs"])
def test_bad_shared_entry_is_refused_logged_and_rebuilt(tier, tmp_path, monkeypatch, caplog, damage):
    scale = {"flip a library byte": 24.0, "sign with another key": 25.0, "sign other inputs": 39.0}[damage]
    key = key_of(scale)
    if damage == "sign with another key":
        monkeypatch.setenv("JITFLOW_REMOTE_CACHE_KEY", "an intruder's key")
        assert run_kernel(scale, tmp_path / "a") == "built"
        monkeypatch.setenv("JITFLOW_REMOTE_CACHE_KEY", SECRET)
    else:
        assert run_kernel(scale, tmp_path / "a") == "built"
    if damage == "flip a library byte":
        blob = bytearray(tier.admin().get(f"jitflow:v1:entry:{key}"))
        blob[len(blob) // 2] ^= 0x40
        tier.admin().set(f"jitflow:v1:entry:{key}", bytes(blob))
    elif damage == "sign other inputs":
        _resign_for_other_inputs(tier, key, tmp_path / "forged")
    caplog.set_level(logging.WARNING, "jitflow")
    remote_cache.reset_stats()

    assert run_kernel(scale, tmp_path / "b") == "built"
    assert remote_cache.stats()["refusals"] == 1
    expected = key[:12] if damage == "sign other inputs" else "signature"  # the local cache says why
    assert any(expected in r.getMessage() for r in caplog.records), [r.getMessage() for r in caplog.records]
    # the rebuilt entry replaced the bad one: it passes the checks and the next node loads it
    remote_entry.unpack(tier.admin().get(f"jitflow:v1:entry:{key}"), key, SECRET)
    assert run_kernel(scale, tmp_path / "c") == "shared"


def test_unsigned_entries_need_an_explicit_opt_in(tier, tmp_path, monkeypatch, caplog):
    assert run_kernel(26.0, tmp_path / "a") == "built"
    remote_cache.reset_stats()
    monkeypatch.delenv("JITFLOW_REMOTE_CACHE_KEY")
    caplog.set_level(logging.WARNING, "jitflow")
    assert run_kernel(26.0, tmp_path / "b") == "built"  # no key, no opt-in: shared entries are not read
    assert any("JITFLOW_REMOTE_CACHE_KEY is not" in r.getMessage() for r in caplog.records)
    assert remote_cache.stats() == dict.fromkeys(remote_cache.COUNTERS, 0)

    monkeypatch.setenv("JITFLOW_REMOTE_CACHE_UNSIGNED", "1")
    assert run_kernel(27.0, tmp_path / "c") == "built"   # opted in: writes unsigned entries ...
    assert run_kernel(27.0, tmp_path / "d") == "shared"  # ... and reads them
    monkeypatch.setenv("JITFLOW_REMOTE_CACHE_KEY", SECRET)
    assert run_kernel(27.0, tmp_path / "e") == "built"   # a node with the key refuses unsigned ones
    assert remote_cache.stats()["refusals"] == 1


@pytest.mark.slow
def test_racing_nodes_build_once(tier, tmp_path):
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    setup = BARRIER.format(barrier=str(barrier), n=4)
    procs = [start_python(node_code(28.0, setup, SLOW_BUILD), env=node_env(tmp_path, f"node{i}")) for i in range(4)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        outcome, stats = out.split(maxsplit=1)
        results.append((outcome, json.loads(stats)))
    assert sorted(o for o, _ in results) == ["built", "shared", "shared", "shared"]
    assert sum(s["stored"] for _, s in results) == 1 and sum(s["hits"] for _, s in results) == 3


def _lines(stream) -> queue.Queue:
    """The stream's lines as they come, then "" at its end."""
    lines: queue.Queue = queue.Queue()

    def pump() -> None:
        for line in stream:
            lines.put(line)
        lines.put("")

    threading.Thread(target=pump, daemon=True).start()
    return lines


def _wait_for(lines: queue.Queue, text: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=deadline - time.monotonic())
        except queue.Empty:
            break
        if not line:
            break
        if text in line:
            return
        seen.append(line)
    raise AssertionError(f"no line with {text!r} within {timeout} s; saw: {''.join(seen[-20:])}")


@pytest.mark.slow
def test_killed_builder_frees_the_key_after_the_lock_expires(tier, tmp_path):
    ttl = {"JITFLOW_REMOTE_CACHE_LOCK_TTL": "1", "JITFLOW_LOG": "info"}
    builder = start_python(node_code(29.0, instrument=HANG_IN_BUILD), env=node_env(tmp_path, "a", **ttl))
    waiter = None
    try:
        _wait_for(_lines(builder.stdout), "building", 60)  # holds the cluster lock now
        waiter = start_python(node_code(29.0), env=node_env(tmp_path, "b", **ttl))
        _wait_for(_lines(waiter.stderr), "another node is building", 60)
        time.sleep(3)  # three lock lifetimes: only the builder's renewals keep the lock
        assert waiter.poll() is None, "the waiter built while the builder was alive"
        builder.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        out, _ = waiter.communicate(timeout=60)
        assert waiter.returncode == 0 and out.split()[0] == "built"
        assert time.monotonic() - killed < 30
    finally:
        for p in (builder, waiter):
            if p is not None and p.poll() is None:
                p.kill()
                p.communicate()


@pytest.mark.slow
@pytest.mark.parametrize("forged", ["lock only", "lock and a forged heartbeat", "lock and a stale heartbeat"])
def test_a_lock_set_by_anyone_blocks_a_build_no_longer_than_the_lock_ttl(tier, tmp_path, forged):
    """Anyone who can write to Redis can SET a lock with no expiry; without a fresh heartbeat signed
    with the shared key, a node waits at most the lock's TTL, then builds."""
    scale = {"lock only": 40.0, "lock and a forged heartbeat": 41.0, "lock and a stale heartbeat": 42.0}[forged]
    key = key_of(scale)
    admin = tier.admin()
    admin.set(f"jitflow:v1:lock:{key}", b"someone")                  # no expiry
    if forged == "lock and a forged heartbeat":
        admin.set(f"jitflow:v1:alive:{key}", remote_tier.heartbeat("a guessed key", key))
    elif forged == "lock and a stale heartbeat":   # a real one, replayed long after its builder died
        admin.set(f"jitflow:v1:alive:{key}", remote_tier.heartbeat(SECRET, key, time.time() - 3600))
    start = time.monotonic()
    proc = run_python(node_code(scale), env=node_env(tmp_path, "a", JITFLOW_REMOTE_CACHE_LOCK_TTL="1"), timeout=60)
    assert proc.stdout.split()[0] == "built" and time.monotonic() - start < 30
    assert "no sign of a live builder" in proc.stderr


def test_a_live_builders_heartbeat_is_signed_and_fresh(tier):
    key = key_of(43.0)
    now = time.time()
    beat = remote_tier.heartbeat(SECRET, key, now)
    assert remote_tier.heartbeat_time(beat, SECRET, key) == pytest.approx(now, abs=0.001)
    for wrong in (remote_tier.heartbeat_time(beat, "another key", key), remote_tier.heartbeat_time(beat, SECRET,
                  key_of(44.0)), remote_tier.heartbeat_time(b"garbage", SECRET, key),
                  remote_tier.heartbeat_time(b"nan " + beat.split(b" ")[1], SECRET, key)):
        assert wrong is None


def _waited(secret, beats, ttl=10.0, step=0.5):
    """How long LockWatch lets a node wait when, at each poll (every `step` s from 0), it reads beats(t)."""
    watch, t = remote_tier.LockWatch(secret, "k" * 64, ttl, 0.0), 0.0
    while watch.still_waiting(beats(t), t):
        t += step
        assert t < 100 * ttl, "waits for ever"
    return t


def test_only_fresh_signed_heartbeats_extend_the_wait_and_a_replay_never_does():
    key = "k" * 64
    genuine = lambda t: remote_tier.heartbeat(SECRET, key, t)   # noqa: E731 - a builder beating as it goes
    assert _waited(SECRET, lambda t: None) == 10.5                       # nobody vouches: the TTL
    assert _waited(SECRET, lambda t: genuine(t) if t < 30 else None) == 40.0   # last beat at 29.5 s
    replay = genuine(0.0)                                                 # captured once, replayed for ever
    assert _waited(SECRET, lambda t: replay) == 10.5
    assert _waited(SECRET, lambda t: remote_tier.heartbeat(SECRET, key, t + 60)) == 10.5   # dated far ahead
    # without a key anyone can write a heartbeat, so none counts: never longer than the TTL
    assert _waited(None, lambda t: remote_tier.heartbeat(None, key, t)) == 10.5


@pytest.mark.slow
def test_forged_heartbeats_kept_fresh_delay_an_unsigned_build_no_longer_than_the_ttl(tier, tmp_path, monkeypatch):
    """Without a key anyone can write a heartbeat: a node that believed them would wait for ever."""
    key, admin = key_of(52.0), tier.admin()
    monkeypatch.delenv("JITFLOW_REMOTE_CACHE_KEY")
    admin.set(f"jitflow:v1:lock:{key}", b"someone")                  # no expiry
    stop = threading.Event()

    def keep_beating() -> None:
        while not stop.wait(0.1):
            admin.set(f"jitflow:v1:alive:{key}", remote_tier.heartbeat(None, key))

    beater = threading.Thread(target=keep_beating, daemon=True)
    beater.start()
    try:
        env = node_env(tmp_path, "a", JITFLOW_REMOTE_CACHE_LOCK_TTL="1", JITFLOW_REMOTE_CACHE_UNSIGNED="1")
        proc = run_python(node_code(52.0), env=env, timeout=60)
    finally:
        stop.set()
        beater.join()
    assert proc.stdout.split()[0] == "built" and "no sign of a live builder" in proc.stderr


# --- the tier never fails a build -------------------------------------------------------------

def test_redis_stopped_mid_run_builds_go_on_locally(cache_dir, tmp_path, monkeypatch, caplog):
    _need_redis()
    server = RedisServer().start()
    try:
        monkeypatch.setenv("JITFLOW_REMOTE_CACHE", server.url)
        monkeypatch.setenv("JITFLOW_REMOTE_CACHE_KEY", SECRET)
        caplog.set_level(logging.WARNING, "jitflow")
        assert run_kernel(30.0, tmp_path / "a") == "built"
        assert len(server.entry_names()) == 1

        # the server goes away while this node holds the cluster lock, as its lowering starts
        with instruments.context(instruments.Before(server.stop)):
            assert run_kernel(31.0, tmp_path / "a") == "built"
        start = time.monotonic()
        assert run_kernel(32.0, tmp_path / "b") == "built"
        assert run_kernel(30.0, tmp_path / "c") == "built"
        assert time.monotonic() - start < 10
        assert len(tier_warnings(caplog)) == 1
        assert remote_cache.stats()["errors"] >= 1
    finally:
        server.close()


def test_a_tier_that_is_down_is_not_said_to_be_building_elsewhere(cache_dir, tmp_path, monkeypatch, caplog):
    """Nothing listens: the build goes on locally at once, and the log says the tier is unavailable,
    not that another node is building the key."""
    monkeypatch.setenv("JITFLOW_REMOTE_CACHE", f"redis://127.0.0.1:{free_port()}/0")
    monkeypatch.setenv("JITFLOW_REMOTE_CACHE_KEY", SECRET)
    caplog.set_level(logging.INFO, "jitflow")
    assert run_kernel(47.0, tmp_path / "a") == "built"
    said = [r.getMessage() for r in caplog.records]
    assert any("shared cache tier unavailable" in m for m in said), said
    assert not any("another node is building" in m for m in said), said


def test_a_malformed_tier_url_means_local_builds_and_one_warning(cache_dir, tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("JITFLOW_REMOTE_CACHE", "redis://jitflow:s3cret@127.0.0.1:99999/0")
    monkeypatch.setenv("JITFLOW_REMOTE_CACHE_KEY", SECRET)
    caplog.set_level(logging.WARNING, "jitflow")
    assert run_kernel(48.0, tmp_path / "a") == "built" and run_kernel(49.0, tmp_path / "a") == "built"
    (warning,) = tier_warnings(caplog)
    assert "port that is not a number from 1 to 65535" in warning and "s3cret" not in warning


def test_slow_tier_gives_up_after_the_timeout(cache_dir, tmp_path, monkeypatch, caplog):
    _need_redis()
    with socket.socket() as black_hole:  # accepts connections, never answers
        black_hole.bind(("127.0.0.1", 0))
        black_hole.listen(16)
        monkeypatch.setenv("JITFLOW_REMOTE_CACHE", f"redis://127.0.0.1:{black_hole.getsockname()[1]}/0")
        monkeypatch.setenv("JITFLOW_REMOTE_CACHE_KEY", SECRET)
        monkeypatch.setenv("JITFLOW_REMOTE_CACHE_TIMEOUT", "0.5")
        caplog.set_level(logging.WARNING, "jitflow")
        exe = jitflow.compile(kernels.axpb(33.0), "c", cache_dir=tmp_path / "a")
        exe.jit()
        assert exe.build_info.outcome == "built"
        assert 0.4 < exe.build_info.stages["shared tier"] < 3
        assert run_kernel(34.0, tmp_path / "a") == "built"  # the tier is left alone now: no new timeout
        assert len(tier_warnings(caplog)) == 1 and remote_cache.stats()["errors"] == 1


class TrickleServer:
    """Just enough of a Redis server: +OK to every command (HELLO aside), and to GET a value of `size` bytes sent
    `chunk` bytes at a time, `pause` seconds apart. Counts what it sent, and whether it got it all out."""

    def __init__(self, size: int, chunk: int, pause: float) -> None:
        self.size, self.chunk, self.pause = size, chunk, pause
        self.sent, self.finished, self.closed = 0, False, threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"redis://127.0.0.1:{self.listener.getsockname()[1]}/0"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _command(self, f) -> list[bytes] | None:
        line = f.readline()
        if not line.startswith(b"*"):
            return None
        args = []
        for _ in range(int(line[1:])):
            length = int(f.readline()[1:])
            args.append(f.read(length + 2)[:-2])
        return args

    def _serve(self, conn) -> None:
        with conn, conn.makefile("rb") as f:
            try:
                while (args := self._command(f)) is not None:
                    if args[0].upper() == b"HELLO":    # clients that speak RESP3 ask for it first
                        conn.sendall(b"%1\r\n+proto\r\n:3\r\n")
                        continue
                    if args[0].upper() != b"GET":
                        conn.sendall(b"+OK\r\n")
                        continue
                    conn.sendall(b"$%d\r\n" % self.size)
                    for _ in range(0, self.size, self.chunk):
                        if self.closed.wait(self.pause):
                            return
                        conn.sendall(b"x" * self.chunk)
                        self.sent += self.chunk
                    conn.sendall(b"\r\n")
                    self.finished = True
            except OSError:
                return

    def close(self) -> None:
        self.closed.set()
        self.listener.close()


@pytest.mark.parametrize("answer", ["one byte at a time", "a 64 MiB value"])
def test_a_trickling_or_flooding_tier_is_cut_off_per_request(cache_dir, tmp_path, monkeypatch, caplog, answer):
    """Each request has a deadline as a whole (not only each read) and a cap on the bytes it takes in."""
    _need_redis()   # the redis client package
    slow = answer == "one byte at a time"
    server = TrickleServer(size=100, chunk=1, pause=0.2) if slow else TrickleServer(64 << 20, 1 << 20, 0)
    try:
        monkeypatch.setenv("JITFLOW_REMOTE_CACHE", server.url)
        monkeypatch.setenv("JITFLOW_REMOTE_CACHE_KEY", SECRET)
        monkeypatch.setenv("JITFLOW_REMOTE_CACHE_TIMEOUT", "1")
        monkeypatch.setenv("JITFLOW_REMOTE_CACHE_MAX_BYTES", "1MiB")
        caplog.set_level(logging.WARNING, "jitflow")
        assert run_kernel(50.0 if slow else 51.0, tmp_path / "a") == "built"
        assert not server.finished and server.sent < (100 if slow else 16 << 20)
        (warning,) = tier_warnings(caplog)
        assert ("no complete answer within the timeout" if slow else "larger than 1114112 bytes") in warning
    finally:
        server.close()


def test_full_tier_refusing_writes_still_builds(tier, tmp_path, caplog):
    admin = tier.admin()
    admin.config_set("maxmemory-policy", "noeviction")
    admin.config_set("maxmemory", "1")
    try:
        caplog.set_level(logging.WARNING, "jitflow")
        assert run_kernel(35.0, tmp_path / "a") == "built"
        assert tier.entry_names() == []
        assert len(tier_warnings(caplog)) == 1 and "maxmemory" in tier_warnings(caplog)[0]
    finally:
        admin.config_set("maxmemory", "4gb")
        admin.config_set("maxmemory-policy", "allkeys-lru")


def test_entries_over_the_size_cap_are_not_sent(tier, tmp_path, monkeypatch):
    monkeypatch.setenv("JITFLOW_REMOTE_CACHE_MAX_BYTES", "1KiB")
    assert run_kernel(36.0, tmp_path / "a") == "built"
    assert tier.entry_names() == [] and remote_cache.stats()["too_large"] == 1
    # others are told not to wait for this key: they build at once
    assert tier.admin().get(f"jitflow:v1:nostore:{key_of(36.0)}") == b"too large"
    assert run_kernel(36.0, tmp_path / "b") == "built"


# --- another backend, health checks, deployment assets ---------------------------------------

class DictBackend(backend.RemoteBackend):
    """A shared tier in this process's memory, selected as JITFLOW_REMOTE_CACHE=module:Class."""

    data: dict[str, tuple[bytes, float]] = {}

    def _alive(self, name):
        value = self.data.get(name)
        return value if value and value[1] > time.monotonic() else None

    def get(self, name):
        value = self._alive(name)
        return value[0] if value else None

    def put(self, name, data, ttl=None):
        self.data[name] = (data, time.monotonic() + (ttl or 1e9))

    def acquire(self, name, token, ttl):
        if self._alive(name):
            return False
        self.put(name, token.encode(), ttl)
        return True

    def renew(self, name, token, ttl):
        if self.get(name) != token.encode():
            return False
        self.put(name, token.encode(), ttl)
        return True

    def release(self, name, token):
        if self.get(name) == token.encode():
            del self.data[name]


def test_backend_chosen_by_module_and_class(cache_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("JITFLOW_REMOTE_CACHE", f"{__name__}:DictBackend")
    monkeypatch.setenv("JITFLOW_REMOTE_CACHE_KEY", SECRET)
    assert run_kernel(37.0, tmp_path / "a") == "built"
    assert [n for n in DictBackend.data if ":entry:" in n] == [f"v1:entry:{key_of(37.0)}"]
    assert run_kernel(37.0, tmp_path / "b") == "shared"
    assert not any(":lock:" in n for n in DictBackend.data)  # released


def test_check_reports_reachable_authenticated_writable_signed(redis_server):
    results = backend.check(RemoteSettings(url=redis_server.url, secret=SECRET))
    assert all(r.ok for r in results), results
    text = " | ".join(r.detail for r in results)
    for word in ("reachable", "authenticated as jitflow", "read and write work", "signing key set"):
        assert word in text
    assert redis_server.password not in text

    wrong = redis_server.url.replace(redis_server.password, "wrong")
    results = backend.check(RemoteSettings(url=wrong, secret=SECRET))
    assert [r.ok for r in results] == [True, False, True] and "not authenticated" in results[1].detail

    results = backend.check(RemoteSettings(url=f"redis://127.0.0.1:{free_port()}/0", timeout=1))
    assert [r.ok for r in results] == [False, False]
    assert "not reachable" in results[0].detail and "no signing key" in results[1].detail and results[1].fix

    assert backend.check(RemoteSettings())[0].ok
    results = backend.check(RemoteSettings(url="nowhere.module:Nothing", secret=SECRET))
    assert not results[0].ok and "cannot load" in results[0].detail


def test_start_script_runs_a_tier_that_checks_out(tmp_path):
    _need_redis()
    port = free_port()
    proc = subprocess.Popen(["bash", str(ROOT / "cache" / "start.sh"), str(port)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        lines = _lines(proc.stdout)
        exports: dict[str, str] = {}
        ready, deadline = False, time.monotonic() + 20
        while not (ready and len(exports) == 2):
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            assert line, f"start.sh exited ({proc.wait()})"
            if line.startswith("export "):
                name, _, value = line[len("export "):].strip().partition("=")
                exports[name] = value
            ready = ready or "Ready to accept" in line
        settings = RemoteSettings(url=exports["JITFLOW_REMOTE_CACHE"], secret=exports["JITFLOW_REMOTE_CACHE_KEY"])
        results = backend.check(settings)
        assert all(r.ok for r in results), results
        assert any("allkeys-lru" in r.detail for r in results) or len(results) == 4
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_settings_parse_sizes_and_refuse_nonsense(monkeypatch):
    from jitflow.config import resolve_remote
    from jitflow.errors import InvalidInputError

    monkeypatch.setenv("JITFLOW_REMOTE_CACHE", "redis://127.0.0.1:1/0")
    monkeypatch.setenv("JITFLOW_REMOTE_CACHE_MAX_BYTES", "16MiB")
    monkeypatch.setenv("JITFLOW_REMOTE_CACHE_LOCK_TTL", "2.5")
    monkeypatch.setenv("JITFLOW_REMOTE_CACHE_KEY", SECRET)
    settings = resolve_remote()
    assert (settings.max_bytes, settings.lock_ttl, settings.timeout) == (16 << 20, 2.5, 2.0)
    assert SECRET not in repr(settings) and "redis://" not in repr(settings)
    monkeypatch.setenv("JITFLOW_REMOTE_CACHE_MAX_BYTES", "lots")
    with pytest.raises(InvalidInputError, match="JITFLOW_REMOTE_CACHE_MAX_BYTES"):
        jitflow.compile(kernels.axpb(38.0), "c")
