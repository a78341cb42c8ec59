"""Signed bundles: who packed a bundle, said by an Ed25519 signature over its manifest.

The manifest holds every file's sha256, so one signature covers the whole bundle. `pack --sign
KEYFILE` puts it in the member SIGNATURE, right after the manifest:

    {"format": "jitflow.bundle-signature", "version": 1, "algorithm": "ed25519",
     "public_key": "ssh-ed25519 AAAA...", "fingerprint": "SHA256:...", "signature": "<base64>"}

over the bytes CONTEXT + the manifest's bytes. `unpack --trust PUBKEY` (or JITFLOW_TRUSTED_KEYS)
verifies it with each trusted key, before the manifest is parsed and before anything is installed;
the public key the bundle names is never used to verify, only to say who signed it.

Keys are the ones a user makes with a standard tool: `ssh-keygen -t ed25519 -N '' -f KEY` (the
OpenSSH private key KEY, and KEY.pub) or `openssl genpkey -algorithm ed25519 -out key.pem` (PEM;
`openssl pkey -in key.pem -pubout -out key.pub.pem` its public half). The cryptography is the
`cryptography` package's (the `sign` extra), imported only when a bundle is signed or verified.
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any, NamedTuple, Sequence

from ...errors import BundleError, InvalidInputError, ToolMissingError, UntrustedBundleError
from ...formats import bounded_json

SIGNATURE = "manifest.sig"
KIND = "jitflow.bundle-signature"
VERSION = 1
#: what the signature covers before the manifest's bytes: a signature made for anything else never passes
CONTEXT = b"jitflow.bundle-signature/1\0"
#: a signature member is about 300 bytes, a key file a few hundred
MAX_BYTES = 64 << 10
_INSTALL = "signed bundles need the cryptography package: pip install 'jitflow[sign]'"
_MAKE = ("make one with `ssh-keygen -t ed25519 -N '' -f bundle-key` (or `openssl genpkey -algorithm ed25519 "
         "-out bundle-key.pem`)")


class TrustedKey(NamedTuple):
    """A public key given with --trust (or JITFLOW_TRUSTED_KEYS): the file and its fingerprint."""

    path: Path
    fingerprint: str
    key: Any            # cryptography's Ed25519PublicKey


class Origin(NamedTuple):
    """What a bundle says of who packed it: `verified` when a trusted key's signature holds; `signer`
    the fingerprint it names (None: unsigned)."""

    verified: bool
    signer: str | None
    text: str

    def to_json(self) -> dict[str, Any]:
        return {"verified": self.verified, "signer": self.signer, "text": self.text}


def _crypto() -> Any:
    try:
        from cryptography.hazmat.primitives import serialization
    except ImportError:
        raise ToolMissingError(_INSTALL) from None
    return serialization


def _read(path: Path, what: str) -> bytes:
    """A key file's bytes: a regular file (a link to one is followed: secrets are often mounted so), bounded."""
    try:
        with open(path, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise InvalidInputError(f"the {what} {path} is not a regular file")
            data = f.read(MAX_BYTES + 1)
    except OSError as exc:
        raise InvalidInputError(f"cannot read the {what} {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_BYTES:
        raise InvalidInputError(f"the {what} {path} is larger than {MAX_BYTES} bytes: not a key file")
    return data


def fingerprint(public_key: Any) -> str:
    """The key's fingerprint as `ssh-keygen -l` prints it: SHA256:<base64 of the sha256 of its OpenSSH blob>."""
    serialization = _crypto()
    line = public_key.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    blob = base64.b64decode(line.split()[1])
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def _ed25519(key: Any, path: Path, what: str) -> Any:
    from cryptography.hazmat.primitives.asymmetric import ed25519

    wanted = ed25519.Ed25519PrivateKey if what == "signing key" else ed25519.Ed25519PublicKey
    if not isinstance(key, wanted):
        raise InvalidInputError(f"the {what} {path} is a {type(key).__name__.replace('_', '')}, and bundles are "
                                f"signed with Ed25519: {_MAKE}")
    return key


def private_key(path: str | os.PathLike) -> Any:
    """The Ed25519 private key in `path` (OpenSSH or PEM, without a passphrase); InvalidInputError saying
    what is wrong with it."""
    serialization, path = _crypto(), Path(path)
    data = _read(path, "signing key")
    try:
        if b"BEGIN OPENSSH PRIVATE KEY" in data:
            key = serialization.load_ssh_private_key(data, password=None)
        else:
            key = serialization.load_pem_private_key(data, password=None)
    except TypeError:
        raise InvalidInputError(f"the signing key {path} is protected by a passphrase: give a key without one "
                                f"(keep it as a CI secret instead), or {_MAKE}") from None
    except Exception:  # noqa: BLE001 - cryptography's refusals of bytes that are not a key are of several types
        hint = " (that is a public key: sign with its private half)" if b"PUBLIC KEY" in data or \
            data.startswith(b"ssh-") else ""
        raise InvalidInputError(f"the signing key {path} is not a private key in OpenSSH or PEM form{hint}; "
                                f"{_MAKE}") from None
    return _ed25519(key, path, "signing key")


def public_key(path: str | os.PathLike) -> TrustedKey:
    """The Ed25519 public key in `path` (an OpenSSH .pub line or PEM); InvalidInputError saying what is wrong."""
    serialization, path = _crypto(), Path(path)
    data = _read(path, "trusted key").strip()
    if b"PRIVATE KEY" in data:
        raise InvalidInputError(f"the trusted key {path} is a private key: give its public half (the .pub file "
                                "ssh-keygen wrote, or `openssl pkey -in KEY -pubout`), and keep the private key "
                                "where bundles are packed")
    try:
        if data.startswith(b"ssh-"):
            key = serialization.load_ssh_public_key(data.splitlines()[0])
        else:
            key = serialization.load_pem_public_key(data)
    except Exception:  # noqa: BLE001 - as above
        raise InvalidInputError(f"the trusted key {path} is not a public key in OpenSSH (.pub) or PEM form") from None
    key = _ed25519(key, path, "trusted key")
    return TrustedKey(path, fingerprint(key), key)


def trusted_keys(paths: Sequence[str | os.PathLike]) -> list[TrustedKey]:
    """The public keys in `paths`, each read and checked (InvalidInputError naming a bad one)."""
    return [public_key(p) for p in paths]


def sign(manifest: bytes, key: Any) -> bytes:
    """The signature member's bytes for a manifest, signed with the private key `key` (private_key())."""
    serialization = _crypto()
    public = key.public_key()
    doc = {"format": KIND, "version": VERSION, "algorithm": "ed25519",
           "public_key": public.public_bytes(serialization.Encoding.OpenSSH,
                                             serialization.PublicFormat.OpenSSH).decode(),
           "fingerprint": fingerprint(public),
           "signature": base64.b64encode(key.sign(CONTEXT + manifest)).decode()}
    return json.dumps(doc, indent=1, sort_keys=True).encode()


def _parse(data: bytes) -> tuple[bytes, str]:
    """(the signature's bytes, the fingerprint it names) of a signature member; BundleError when it is not one."""
    try:
        doc = bounded_json.loads(data, MAX_BYTES, 4, "the signature")
    except bounded_json.BadJSON as exc:
        raise BundleError(f"its signature ({SIGNATURE}) is unreadable: {exc}") from None
    if not isinstance(doc, dict) or doc.get("format") != KIND or doc.get("version") != VERSION \
            or doc.get("algorithm") != "ed25519":
        raise BundleError(f"its {SIGNATURE} is not an Ed25519 bundle signature of a version this jitflow reads")
    named = doc.get("fingerprint")
    try:
        signature = base64.b64decode(str(doc.get("signature")), validate=True)
    except ValueError:
        signature = b""
    if len(signature) != 64:
        raise BundleError(f"its {SIGNATURE} holds no Ed25519 signature (64 bytes in base64)")
    return signature, named[:60] if isinstance(named, str) else "an unnamed key"


def _keys_text(trusted: Sequence[TrustedKey]) -> str:
    return ", ".join(f"{k.fingerprint} ({k.path.name})" for k in trusted)


def origin(manifest: bytes, signature: bytes | None, trusted: Sequence[TrustedKey]) -> Origin:
    """Who packed the bundle whose manifest and signature member (None: none) these are. With trusted
    keys, an UntrustedBundleError unless one of them verifies the signature over these bytes."""
    signed = _parse(signature) if signature is not None else None
    if not trusted:
        if signed is None:
            return Origin(False, None, "the bundle was not verified for its origin: it is unsigned (to verify it, "
                                       "pack it with --sign KEY and unpack it with --trust KEY.pub)")
        return Origin(False, signed[1], f"the bundle was not verified for its origin: it is signed by {signed[1]}, "
                                        "and no key is trusted (give --trust KEY.pub or set JITFLOW_TRUSTED_KEYS)")
    fix = (f"nothing was installed. Fix: pack it again with `jitflow cache pack ... --sign KEY` where KEY's public "
           f"half is trusted ({_keys_text(trusted)})")
    if signed is None:
        raise UntrustedBundleError(f"it is unsigned, and only bundles signed by a trusted key are accepted; {fix}")
    from cryptography.exceptions import InvalidSignature

    for key in trusted:
        try:
            key.key.verify(signed[0], CONTEXT + manifest)
        except InvalidSignature:
            continue
        return Origin(True, key.fingerprint, f"the bundle was verified for its origin: signed by {key.fingerprint} "
                                             f"({key.path.name})")
    if any(k.fingerprint == signed[1] for k in trusted):
        raise UntrustedBundleError(f"its signature by {signed[1]} does not hold: the manifest changed since it was "
                                   "signed (damaged or altered); nothing was installed. Fix: pack and sign it again "
                                   "from a sound cache, and check how it was copied")
    raise UntrustedBundleError(f"it is signed by {signed[1]}, which is not a trusted key; {fix}, or trust the key "
                               "that signed it (--trust its .pub) if you trust who packed it")
