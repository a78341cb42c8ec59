"""Signed bundles through the real CLI: `jitflow cache pack --sign KEY` with keys made here by
`ssh-keygen -t ed25519` and `openssl genpkey -algorithm ed25519`, and `jitflow cache unpack --trust
PUBKEY` (or JITFLOW_TRUSTED_KEYS) accepting only a bundle a trusted key signed: an unsigned bundle, one
signed by another key and one whose manifest changed by one byte are refused whole, and the cache they
were unpacked into is left exactly as it was.

Two CPU kernels are built once for the module; each test packs and unpacks into folders of its own.
"""
from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import shutil
import struct
import subprocess
import tarfile
from pathlib import Path

import pytest
from cli_run import build_entries, cache_env, jf, no_traceback

pytestmark = pytest.mark.skipif(not (shutil.which("ssh-keygen") and shutil.which("openssl")),
                                reason="ssh-keygen and openssl make the keys")

BUILD = """
    import jitflow, kernels
    exes = [jitflow.compile(kernels.axpb(821.0), "c"), jitflow.compile(kernels.axpb(822.0), "c")]
    for exe in exes:
        exe.build()
    print(*(exe.key for exe in exes))
"""


def _run(*command: str) -> None:
    subprocess.run(command, check=True, capture_output=True)


def _ssh_key(folder: Path, name: str) -> tuple[Path, Path]:
    _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(folder / name))
    return folder / name, folder / f"{name}.pub"


def _openssl_key(folder: Path, name: str) -> tuple[Path, Path]:
    private, public = folder / f"{name}.pem", folder / f"{name}.pub.pem"
    _run("openssl", "genpkey", "-algorithm", "ed25519", "-out", str(private))
    _run("openssl", "pkey", "-in", str(private), "-pubout", "-out", str(public))
    return private, public


@pytest.fixture(scope="module")
def keys(tmp_path_factory) -> dict[str, tuple[Path, Path]]:
    """(private, public) key files: two made by ssh-keygen, one by openssl."""
    folder = tmp_path_factory.mktemp("keys")
    return {"ci": _ssh_key(folder, "ci"), "other": _ssh_key(folder, "other"), "pem": _openssl_key(folder, "pem")}


@pytest.fixture(scope="module")
def built(tmp_path_factory, zig_cache):
    """(env, keys) of a cache of two CPU entries built once for these tests."""
    cache = tmp_path_factory.mktemp("signing") / "cache"
    env = cache_env(cache, zig_cache)
    return env, build_entries(env, BUILD)


def _pack(built, out: Path, key: Path | None = None, only: str | None = None) -> Path:
    env, keys = built
    proc = jf("cache", "pack", str(out), *(["--sign", str(key)] if key else []),
              *(f"--key={k}" for k in ([only] if only else keys)), env=env)
    assert proc.returncode == 0, proc.stderr
    return out


def _fingerprint(public: Path) -> str:
    """The key's fingerprint as `ssh-keygen -l` prints it, taken without jitflow: by ssh-keygen for an OpenSSH
    key; for a PEM one, from its 32 raw bytes (the end of `openssl pkey -outform DER`) as OpenSSH's blob."""
    if public.suffix == ".pub":
        return subprocess.run(["ssh-keygen", "-l", "-f", str(public)], check=True, capture_output=True,
                              text=True).stdout.split()[1]
    der = subprocess.run(["openssl", "pkey", "-pubin", "-in", str(public), "-outform", "DER"], check=True,
                         capture_output=True).stdout
    blob = struct.pack(">I", 11) + b"ssh-ed25519" + struct.pack(">I", 32) + der[-32:]
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def _state(cache: Path) -> tuple[dict, list[str]]:
    """What an unpack installs: every file under the entries (mode, size, time) and every path of the cache."""
    entries = cache / "v1" / "entries"
    files = {str(p.relative_to(cache)): (p.lstat().st_mode, p.lstat().st_size, p.lstat().st_mtime_ns)
             for p in entries.rglob("*")}
    return files, sorted(str(p.relative_to(cache)) for p in cache.rglob("*"))


@pytest.mark.parametrize("kind", ["ci", "pem"])
def test_a_signed_bundle_unpacks_with_its_key_trusted(kind, keys, built, tmp_path):
    private, public = keys[kind]
    bundle = tmp_path / "signed.tar"
    proc = jf("cache", "pack", str(bundle), "--sign", str(private), "--json", env=built[0])
    assert proc.returncode == 0 and json.loads(proc.stdout)["signer"] == _fingerprint(public), proc.stderr
    with tarfile.open(bundle) as tar:
        assert tar.getnames()[:2] == ["manifest.json", "manifest.sig"]
    dest = tmp_path / "cache"
    proc = jf("cache", "unpack", str(bundle), "--cache-dir", str(dest), "--trust", str(keys["other"][1]),
              "--trust", str(public))
    assert proc.returncode == 0, proc.stderr
    assert f"the bundle was verified for its origin: signed by {_fingerprint(public)} ({public.name})" in proc.stdout
    assert sorted(p.name for p in (dest / "v1" / "entries").glob("*/*")) == sorted(built[1])
    # through the variable, as a serving image would set it
    again = jf("cache", "unpack", str(bundle), "--cache-dir", str(tmp_path / "env"), "--json",
               env={"JITFLOW_TRUSTED_KEYS": os.pathsep.join([str(keys["other"][1]), str(public)])})
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["origin"] == {"verified": True, "signer": _fingerprint(public),
                                                  "text": json.loads(again.stdout)["origin"]["text"]}


def _flip_manifest_byte(bundle: Path, out: Path) -> Path:
    """The bundle with one hexadecimal digit of its manifest changed (still JSON, still a manifest)."""
    with tarfile.open(bundle) as tar:
        members = [(m, tar.extractfile(m).read()) for m in tar.getmembers()]
    head = bytearray(members[0][1])
    at = head.index(b'"sha256": "') + len(b'"sha256": "')
    head[at] = ord("0") if head[at] != ord("0") else ord("1")
    members[0] = (members[0][0], bytes(head))
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
        for member, data in members:
            tar.addfile(member, io.BytesIO(data))
    return out


@pytest.mark.parametrize("case", ["another key", "unsigned", "manifest changed", "unsigned, trusted by variable"])
def test_an_untrusted_bundle_is_refused_whole(case, keys, built, tmp_path):
    """Each refusal names why, exits 2, and leaves the cache it was unpacked into as it was: a cache
    holding one entry already, from an earlier bundle."""
    dest = tmp_path / "cache"
    first = _pack(built, tmp_path / "first.tar", keys["ci"][0], only=built[1][0])
    assert jf("cache", "unpack", str(first), "--cache-dir", str(dest), "--trust", str(keys["ci"][1])).returncode == 0
    trusted, env = ["--trust", str(keys["ci"][1])], {}
    if case == "another key":
        bundle, why = _pack(built, tmp_path / "b.tar", keys["other"][0]), \
            f"it is signed by {_fingerprint(keys['other'][1])}, which is not a trusted key"
    elif case.startswith("unsigned"):
        bundle, why = _pack(built, tmp_path / "b.tar"), "it is unsigned"
        if case.endswith("variable"):
            trusted, env = [], {"JITFLOW_TRUSTED_KEYS": str(keys["ci"][1])}
    else:
        bundle = _flip_manifest_byte(_pack(built, tmp_path / "b.tar", keys["ci"][0]), tmp_path / "flipped.tar")
        why = f"its signature by {_fingerprint(keys['ci'][1])} does not hold: the manifest changed since it was signed"
    before = _state(dest)
    proc = jf("cache", "unpack", str(bundle), "--cache-dir", str(dest), *trusted, env=env)
    assert proc.returncode == 2 and no_traceback(proc), proc.stderr
    assert why in proc.stderr and "nothing was installed" in proc.stderr, proc.stderr
    assert _state(dest) == before


def test_without_trust_a_bundle_unpacks_and_says_it_was_not_verified(keys, built, tmp_path):
    unsigned, signed = _pack(built, tmp_path / "u.tar"), _pack(built, tmp_path / "s.tar", keys["ci"][0])
    proc = jf("cache", "unpack", str(unsigned), "--cache-dir", str(tmp_path / "a"))
    assert proc.returncode == 0 and "the bundle was not verified for its origin: it is unsigned" in proc.stdout
    proc = jf("cache", "unpack", str(signed), "--cache-dir", str(tmp_path / "b"), "--json")
    assert proc.returncode == 0
    assert json.loads(proc.stdout)["origin"]["verified"] is False
    assert json.loads(proc.stdout)["origin"]["signer"] == _fingerprint(keys["ci"][1])


def test_keys_that_cannot_sign_or_verify_are_refused_with_the_fix(keys, built, tmp_path):
    env, _ = built
    rsa = tmp_path / "rsa"
    _run("ssh-keygen", "-q", "-t", "rsa", "-b", "2048", "-N", "", "-f", str(rsa))
    locked = tmp_path / "locked"
    _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "a passphrase", "-f", str(locked))
    for key, said in ((keys["ci"][1], "not a private key"), (rsa, "bundles are signed with Ed25519"),
                      (locked, "protected by a passphrase"), (tmp_path / "none", "cannot read the signing key")):
        proc = jf("cache", "pack", str(tmp_path / "x.tar"), "--sign", str(key), env=env)
        assert proc.returncode == 2 and said in proc.stderr and no_traceback(proc), proc.stderr
        assert not (tmp_path / "x.tar").exists()
    bundle = _pack(built, tmp_path / "s.tar", keys["ci"][0])
    for key, said in ((keys["ci"][0], "is a private key: give its public half"),
                      (Path(str(rsa) + ".pub"), "bundles are signed with Ed25519")):
        proc = jf("cache", "unpack", str(bundle), "--cache-dir", str(tmp_path / "c"), "--trust", str(key))
        assert proc.returncode == 2 and said in proc.stderr and no_traceback(proc), proc.stderr
