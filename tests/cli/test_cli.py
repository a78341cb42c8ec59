"""The cache, doctor and warm commands through the real CLI: text, JSON, exit codes, messages.

One cache with a CPU entry for this machine and one for aarch64 is built once for the module;
tests that change a cache work on a copy of it.
"""
from __future__ import annotations

import json
import os
import re
import time

import pytest
from cli_run import build_entries, cache_env, copy_cache, entry_folder, jf, jf_process, no_traceback
from conftest import ROOT
from redis_server import RedisServer, redis_missing, required_in_ci

BUILD = """
    import jitflow, kernels
    exes = [jitflow.compile(kernels.axpb(801.0), "c"),
            jitflow.compile(kernels.axpb(802.0), "c", host="aarch64-linux-gnu")]
    assert all(r.ok for r in jitflow.build_all(exes, jobs=1))
    print(*(exe.key for exe in exes))
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory, zig_cache):
    """(env, cache folder, [x86-64 key, aarch64 key]) of a cache built once for these tests."""
    cache = tmp_path_factory.mktemp("cli") / "cache"
    env = cache_env(cache, zig_cache)
    keys = build_entries(env, BUILD)
    return env, cache, keys


@pytest.fixture
def scratch(built, tmp_path):
    """A copy of the built cache to prune or clear: (env, cache folder, keys)."""
    env, cache, keys = built
    copy = copy_cache(cache, tmp_path / "cache")
    return dict(env, JITFLOW_CACHE_DIR=str(copy)), copy, keys


def _age(cache, key, seconds_ago):
    entry, t = entry_folder(cache, key), time.time() - seconds_ago
    os.utime(entry / "last_used", (t, t))
    os.utime(entry, (t, t))   # published long ago: past the grace period


def test_version():
    out = jf_process("--version")
    assert out.returncode == 0 and re.fullmatch(r"jitflow \d+\.\d+\.\d+\S*\n", out.stdout)


def test_help_lists_every_command_and_the_exit_codes():
    out = jf("--help").stdout
    for command in ("build", "cache", "doctor", "inspect", "warm"):
        assert command in out
    assert "Exit status" in out


def test_cache_ls_shows_hosts_aligned_in_binary_units(built):
    env, _, (x86, arm) = built
    out = jf("cache", "ls", env=env)
    assert out.returncode == 0, out.stderr
    header, *rows = out.stdout.splitlines()
    assert header.split()[:4] == ["key", "module", "target", "host"]
    host = slice(header.index("host"), header.index("created"))       # a module may have spaces: "main at x.py:3"
    assert {r.split()[0]: r[host].split()[0] for r in rows} == {x86[:12]: "x86_64-linux-gnu",
                                                               arm[:12]: "aarch64-linux-gnu"}
    for name in ("module", "target", "host", "created"):   # columns start where their heading does
        assert {r[header.index(name) - 1] for r in rows} == {" "} and all(r[header.index(name)] != " " for r in rows)
    assert all(re.search(r"\d\.\d KiB ", r) for r in rows) and " KB " not in out.stdout


def test_cache_ls_json(built):
    env, cache, (x86, arm) = built
    d = json.loads(jf_process("cache", "ls", "--json", env=env).stdout)
    assert d["schema"] == "jitflow.cache-ls/1" and d["location"] == str(cache)
    by_key = {e["key"]: e for e in d["entries"]}
    assert set(by_key) == {x86, arm}
    e = by_key[arm]
    assert (e["host"], e["kind"], e["archs"], e["functions"], e["readable"]) == ("aarch64-linux-gnu", "c", [], ["main"],
                                                                                True)
    assert e["size"] == sum(f.stat().st_size for f in entry_folder(cache, arm).rglob("*") if f.is_file())
    assert e["path"] == str(entry_folder(cache, arm)) and e["last_used"] >= e["created"] > 0


def test_cache_info_counts_zig_and_shows_hosts_with_the_option_anywhere(built, tmp_path):
    env, cache, _ = built
    zig_cache = tmp_path / "zig"            # a zig cache of its own: the shared one grows as other tests build
    for name, size in (("o/1f/host.o", 3000), ("o/2e/host.o", 700), ("h/1f.txt", 64)):
        (zig_cache / name).parent.mkdir(parents=True, exist_ok=True)
        (zig_cache / name).write_bytes(b"z" * size)
    env = dict(env, JITFLOW_ZIG_CACHE_DIR=str(zig_cache))
    elsewhere = dict(env, JITFLOW_CACHE_DIR=str(cache.parent / "elsewhere"))   # the option wins over the variable
    after = jf("cache", "info", "--cache-dir", str(cache), env=elsewhere)
    before = jf("cache", "--cache-dir", str(cache), "info", env=elsewhere)
    assert after.returncode == before.returncode == 0 and after.stdout == before.stdout
    lines = dict(line.split(":", 1) for line in after.stdout.splitlines())
    assert lines["location"].strip() == str(cache) and lines["enabled"].strip() == "yes"
    assert lines["entries"].strip().startswith("2 (") and "KiB" in lines["entries"]
    assert "x86_64-linux-gnu 1" in lines["hosts"] and "aarch64-linux-gnu 1" in lines["hosts"]
    assert str(zig_cache) in lines["zig cache"] and "iB in" in lines["zig cache"]
    assert len({len(line) - len(line.split(":", 1)[1].lstrip()) for line in after.stdout.splitlines()}) == 1
    d = json.loads(jf("cache", "info", "--json", env=env).stdout)
    assert d["schema"] == "jitflow.cache-info/1" and d["entries"] == 2 and d["problem"] is None
    assert {h: v["entries"] for h, v in d["hosts"].items()} == {"x86_64-linux-gnu": 1, "aarch64-linux-gnu": 1}
    zig_bytes = 3000 + 700 + 64
    assert d["zig_cache"] == {"path": str(zig_cache), "size": zig_bytes}
    assert d["total_size"] == d["size"] + zig_bytes and d["cap"] == 4 << 30


def test_cache_ls_of_a_named_folder_that_does_not_exist_says_so(built, tmp_path):
    """A typo in --cache-dir or JITFLOW_CACHE_DIR is not an empty cache (it said `no entries in ...`,
    status 0, and stats, prune and clear reported zeros); info says so; the default folder before
    anything is built is an empty cache."""
    env = built[0]
    missing = tmp_path / "cahce"
    for args, extra in (((), {"JITFLOW_CACHE_DIR": str(missing)}), (("--cache-dir", str(missing)), {}),
                        (("--json", "--cache-dir", str(missing)), {})):
        out = jf("cache", "ls", *args, env={**env, **extra})
        assert (out.returncode, out.stdout) == (2, "")
        assert out.stderr == f"jitflow: error: {missing} does not exist: no cache is there (--cache-dir, else " \
                             "JITFLOW_CACHE_DIR, names the cache folder; a build creates it)\n"
    for command in (("stats",), ("stats", "--zero"), ("prune", "--max-size", "1"), ("clear", "--yes")):
        out = jf("cache", *command, "--cache-dir", str(missing), env=env)     # zeros before, or nothing done
        assert (out.returncode, out.stdout) == (2, "") and f"{missing} does not exist" in out.stderr, (command, out)
    info = jf("cache", "info", "--cache-dir", str(missing), env=env)
    assert f"location:  {missing} (does not exist: a build creates it)\n" in info.stdout, info.stdout
    assert json.loads(jf("cache", "info", "--json", "--cache-dir", str(missing), env=env).stdout)["exists"] is False
    assert not missing.exists()
    fresh = jf("cache", "ls", env=dict(env, JITFLOW_CACHE_DIR="", XDG_CACHE_HOME=str(tmp_path / "home-cache")))
    assert (fresh.returncode, fresh.stdout) == (0, f"no entries in {tmp_path / 'home-cache' / 'jitflow'}\n")


@pytest.mark.parametrize("args, usage", [(["cache", "ls", "--jsn"], "usage: jitflow cache ls [-h] [--json]"),
                                         (["cache", "--jsn", "ls"], "usage: jitflow cache ls "),
                                         (["inspect", "x.py:f", "--jsn"], "usage: jitflow inspect [-h]"),
                                         (["doctor", "--jsn"], "usage: jitflow doctor [-h]"),
                                         (["--jsn"], "usage: jitflow [-h] [--version] COMMAND")])
def test_an_unknown_argument_is_shown_with_its_commands_usage(args, usage):
    """As argparse does for a sub-command's other wrong arguments (it showed the top-level usage here)."""
    out = jf(*args)
    assert out.returncode == 2 and out.stdout == "" and out.stderr.startswith(usage)
    assert out.stderr.endswith(": error: unrecognized arguments: --jsn\n")


def test_a_cache_folder_that_is_a_file_fails_info_doctor_and_ls(tmp_path, zig_cache):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    env = cache_env(blocker, zig_cache)
    info = jf("cache", "info", env=env)
    assert info.returncode == 1 and f"enabled:   no: {blocker} is a file, not a folder" in info.stdout
    assert json.loads(jf("cache", "info", "--json", env=env).stdout)["problem"] == f"{blocker} is a file, not a folder"
    doctor = jf("doctor", "--cpu", env=env)
    assert doctor.returncode == 1 and f"[!!] cache directory: {blocker} is a file, not a folder" in doctor.stdout
    below = jf("cache", "ls", env=cache_env(blocker / "cache", zig_cache))
    assert below.returncode == 3 and no_traceback(below) and "is a file, not a folder" in below.stderr


def test_a_cache_folder_others_can_write_is_refused_by_the_admin_commands_and_explained(tmp_path, zig_cache):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    env = cache_env(shared, zig_cache)
    doctor = jf("doctor", "--cpu", env=env)
    assert doctor.returncode == 1
    assert (f"[!!] cache directory: not trusted: {shared} is writable by group or others (owner uid "
            in doctor.stdout) and "builds use a private temporary folder instead" in doctor.stdout
    info = jf("cache", "info", env=env)
    assert info.returncode == 1
    assert f"enabled:   no: not trusted: {shared} is writable by group or others" in info.stdout
    assert "builds use a per-user temporary cache instead" in info.stdout
    for action in (["ls"], ["prune", "--older-than", "1d"], ["clear", "--yes"]):
        refused = jf("cache", *action, env=env)
        assert refused.returncode == 3 and no_traceback(refused), action
        assert f"{shared} is writable by group or others" in refused.stderr and "chmod go-w" in refused.stderr
    assert list(shared.iterdir()) == []
    shared.chmod(0o700)
    assert jf("doctor", "--cpu", env=env).returncode == 0 and jf("cache", "ls", env=env).returncode == 0


def test_prune_dry_run_lists_what_would_go_and_removes_nothing(scratch):
    env, cache, (x86, arm) = scratch
    _age(cache, x86, 40 * 86400)
    _age(cache, arm, 86400)
    out = jf("cache", "prune", "--older-than", "30d", "--dry-run", env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("would remove 1 entry (") and "KiB):" in out.stdout
    header = out.stdout.splitlines()[1].split()
    assert header == ["key", "module", "target", "host", "size", "why"]
    documented = (ROOT / "docs" / "cli.md").read_text().split("## cache prune", 1)[1]
    assert [line.split() for line in documented.splitlines() if line.startswith("  key ")] == [header, header]
    (row,) = [line for line in out.stdout.splitlines() if x86[:12] in line]
    assert "unused for 40 days (over 30 days)" in row and arm[:12] not in out.stdout
    assert "would leave" in out.stdout.splitlines()[-1] and "in 1 entry" in out.stdout
    assert entry_folder(cache, x86).is_dir()
    d = json.loads(jf("cache", "prune", "--max-size", "0", "--dry-run", "--json", env=env).stdout)
    assert d["schema"] == "jitflow.cache-prune/1" and d["dry_run"] and d["kept"] == []
    assert [(e["key"], e["reason"]) for e in d["removed"]] == [(x86, "over-cap"), (arm, "over-cap")]
    assert d["size_after"] == 0 and entry_folder(cache, arm).is_dir()


def test_prune_lists_what_went_and_what_it_kept_and_why(scratch):
    from jitflow.cache.store.disk import Cache

    env, cache, (x86, arm) = scratch
    _age(cache, x86, 5 * 86400)
    entry_folder(cache, arm).touch()   # just published: within the grace period
    out = jf("cache", "prune", "--max-size", "0", env=env)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("removed 1 entry (")
    assert x86[:12] in lines[2] and "least recently used, with the cache over 0 B" in lines[2]
    assert lines[3] == "kept 1 entry that was due to go:"
    assert arm[:12] in lines[5] and re.search(r"published \d+ (s|min) ago: entries younger than 1 min are kept", lines[5])
    assert not entry_folder(cache, x86).exists() and entry_folder(cache, arm).is_dir()
    _age(cache, arm, 3600)
    with Cache(cache).lock(arm):     # another process is rebuilding it
        d = json.loads(jf("cache", "prune", "--max-size", "0", "--json", env=env).stdout)
    assert d["removed"] == [] and [(e["key"], e["reason"]) for e in d["kept"]] == [(arm, "building")]
    assert jf("cache", "prune", env=env).stdout.startswith("nothing to remove: ")


def test_cache_stats_writes_the_build_time_and_the_time_saved_at_one_precision(tmp_path, zig_cache):
    """Side by side at one precision ("10.84 s" beside "1 min" before: the seconds of one were dropped)."""
    from jitflow.cache.store import counters
    from jitflow.cache.store.location import open_cache
    from jitflow.config import resolve

    env = cache_env(tmp_path / "cache", zig_cache)
    (tmp_path / "cache").mkdir()
    assert jf("cache", "stats", "--zero", env=env).returncode == 0          # makes the cache's own folders
    root = open_cache(resolve(cache_dir=tmp_path / "cache")).configured.root
    counters.add(root, builds=2, build_seconds=10.84, hits=3, saved_seconds=75.3)
    lines = jf("cache", "stats", env=env).stdout.splitlines()
    assert "build time:       11 s" in lines and "build time saved: 1 min 15 s" in lines
    counters.zero(root)
    counters.add(root, builds=1, build_seconds=10.84, hits=1, saved_seconds=3.2)
    lines = jf("cache", "stats", env=env).stdout.splitlines()
    assert "build time:       10.84 s" in lines and "build time saved: 3.20 s" in lines


def test_clear_asks_unless_yes(scratch):
    env, cache, _ = scratch
    refused = jf_process("cache", "clear", env=env)   # no terminal, no --yes
    assert refused.returncode == 2 and "--yes" in refused.stderr
    assert "entries:   2 (" in jf("cache", "info", env=env).stdout
    cleared = jf_process("cache", "clear", "--yes", "--cache-dir", str(cache))
    assert cleared.returncode == 0 and cleared.stdout.startswith("removed 2 entries (")
    assert jf("cache", "ls", env=env).stdout == f"no entries in {cache}\n"


def test_doctor_passes_here_and_fails_without_the_tvm_compiler(built):
    env = built[0]
    ok = jf("doctor", "--cpu", env=env)
    assert ok.returncode == 0, ok.stdout
    assert "[ok] zig:" in ok.stdout and "[ok] cache directory" in ok.stdout
    # a TVM without its compiler is chosen when TVM is imported: a process of its own
    broken = jf_process("doctor", "--cpu", env=dict(env, TVM_USE_RUNTIME_LIB="1"))
    assert broken.returncode == 1
    assert "[!!] TVM compiler" in broken.stdout and "fix:" in broken.stdout
    assert broken.stdout.splitlines()[-1] == "1 required check failed"
    d = json.loads(jf_process("doctor", "--cpu", "--json", env=dict(env, TVM_USE_RUNTIME_LIB="1")).stdout)
    assert d["schema"] == "jitflow.doctor/1" and not d["ok"] and d["failed"] == 1
    (tvm_compiler,) = [c for c in d["checks"] if c["name"] == "TVM compiler"]
    assert tvm_compiler["ok"] is False and tvm_compiler["required"] and tvm_compiler["fix"]


def test_doctor_reports_a_bad_setting_as_a_failed_check(built):
    out = jf("doctor", "--cpu", env=dict(built[0], JITFLOW_CACHE="maybe"))
    assert out.returncode == 1 and no_traceback(out)
    assert "[!!] settings: JITFLOW_CACHE='maybe' is not a boolean" in out.stdout


@pytest.fixture(scope="module")
def redis_url():
    missing = redis_missing()
    if missing:
        if required_in_ci():
            pytest.fail(missing)
        pytest.skip(missing)
    server = RedisServer().start()
    yield server.url
    server.close()


def test_doctor_says_the_shared_tier_once(built, redis_url):
    env = dict(built[0], JITFLOW_REMOTE_CACHE=redis_url, JITFLOW_REMOTE_CACHE_KEY="k")
    out = jf("doctor", "--cpu", env=env)
    assert out.returncode == 0, out.stdout
    where = [line for line in out.stdout.splitlines() if "127.0.0.1" in line]
    assert len(where) == 1 and where[0].startswith("shared cache (Redis at ")
    assert "  [ok] reachable" in out.stdout and "  [ok] read and write work" in out.stdout
    assert len(out.stdout.splitlines()) == len(set(out.stdout.splitlines()))
    d = json.loads(jf("doctor", "--cpu", "--json", env=env).stdout)
    assert d["ok"] and sum(c["name"] == "shared cache" for c in d["checks"]) >= 3
    info = jf("cache", "info", env=env).stdout
    password = redis_url.split("@")[0].rsplit(":", 1)[1]
    assert "shared:" in info and redis_url.split("@")[1] in info and password not in info


@pytest.mark.parametrize("host, says", [("arm64-apple-darwin", "did you mean 'aarch64-linux-gnu'?"),
                                        ("riscv64-linux-gnu", "unsupported host 'riscv64-linux-gnu'")])
def test_warm_for_an_unknown_host_is_a_clean_usage_error(host, says):
    out = jf("warm", "--host", host)
    assert out.returncode == 2 and no_traceback(out) and says in out.stderr


@pytest.mark.parametrize("host", ["arm64-linux-gnu", "arm64"])
def test_warm_for_an_alias_of_aarch64(built, host):
    out = jf("warm", "--host", host, env=built[0])
    assert out.returncode == 0 and out.stdout.startswith("warmed zig for aarch64-linux-gnu in ")


@pytest.mark.parametrize("option, value, says", [
    ("--max-size", "9" * 401, "--max-size '999"), ("--older-than", "9" * 401 + "s", "--older-than '999")])
def test_prune_with_a_huge_number_is_a_usage_error(built, option, value, says):
    out = jf("cache", "prune", option, value, "--dry-run", env=built[0])
    assert out.returncode == 2 and no_traceback(out), out.stderr
    assert says in out.stderr and "is too large" in out.stderr


def test_admin_commands_list_an_entry_with_wrong_typed_metadata_with_a_note(scratch):
    env, cache, keys = scratch
    meta_path = entry_folder(cache, keys[0]) / "meta.json"
    meta_path.write_text(json.dumps(dict(json.loads(meta_path.read_text()), created="yesterday", functions=5)))
    for args in (["ls"], ["ls", "--json"], ["info"], ["prune", "--dry-run"]):
        out = jf("cache", *args, env=env)
        assert out.returncode == 0 and no_traceback(out), (args, out.stderr)
        assert f"note: entry {keys[0][:12]} is refused (metadata field 'created'" in out.stderr, args
    (row,) = [e for e in json.loads(jf("cache", "ls", "--json", env=env).stdout)["entries"] if e["key"] == keys[0]]
    assert not row["readable"] and "created" in row["problem"]


@pytest.mark.parametrize("url, says", [
    ("redis://jitflow:s3cret@127.0.0.1:99999/0", "a port that is not a number from 1 to 65535"),
    ("redis://jitflow:s3cret@[zz::1/0", "a host that is not a valid address")])
def test_doctor_and_cache_info_say_what_is_wrong_with_the_shared_tiers_url(built, url, says):
    env = dict(built[0], JITFLOW_REMOTE_CACHE=url, JITFLOW_REMOTE_CACHE_KEY="k")
    doctor = jf("doctor", "--cpu", env=env)
    assert doctor.returncode == 0 and no_traceback(doctor), doctor.stderr
    assert f"[--] JITFLOW_REMOTE_CACHE has {says}" in doctor.stdout and "s3cret" not in doctor.stdout
    info = jf("cache", "info", env=env)
    assert info.returncode == 0 and no_traceback(info), info.stderr
    assert f"shared:    off: JITFLOW_REMOTE_CACHE has {says}" in info.stdout and "s3cret" not in info.stdout
    shared = json.loads(jf("cache", "info", "--json", env=env).stdout)["shared"]
    assert shared["url"] is None and says in shared["problem"]
    assert set(shared["counters"]) == {"hits", "misses", "refusals", "stored", "too_large", "errors"}
    shown = info.stdout.rsplit(" (", 1)[1].removesuffix(", on this machine)\n").split(", ")
    assert sorted(shown) == sorted(f"{name.replace('_', ' ')} {n}" for name, n in shared["counters"].items())


def test_every_command_and_cache_action_has_a_description():
    import argparse

    from jitflow.cli.main import parser

    def commands(p: argparse.ArgumentParser, path: str):
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    yield f"{path} {name}", child
                    yield from commands(child, f"{path} {name}")

    found = dict(commands(parser(), "jitflow"))
    assert {"jitflow cache ls", "jitflow cache clear", "jitflow build"} <= set(found)
    assert [name for name, p in found.items() if not p.description] == []
    shown = jf("cache", "clear", "--help").stdout
    assert "Remove every entry of the cache" in shown


def test_docs_list_every_option_for_b_of_a_diff():
    from jitflow.cli.inspect import B_FLAGS

    text = (ROOT / "docs" / "cli.md").read_text()
    assert [f"--b-{flag[2:]}" for flag in B_FLAGS if f"`--b-{flag[2:]}" not in text] == []
