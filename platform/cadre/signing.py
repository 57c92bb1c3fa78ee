"""The instance's Ed25519 signing key: signs Hub skill versions, audit export manifests and the
audit chain's digests (cadre.governance.audit_digest). It lives outside the database, so a
database writer cannot sign anything; its public half is published at /api/v1/audit/public-key/.

The key comes from CADRE_SIGNING_KEY / CADRE_SIGNING_KEY_FILE (a PKCS#8 PEM private key) or,
with neither set, is generated once into DATA_DIR/signing_ed25519.pem (mode 0600) — fine for a
single node; a cluster must share one key through the environment. The key id is the SHA-256
(hex) of the raw public key, so a verifier can tell which key signed without trusting names.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import threading
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from cadre.env import env_secret

KEY_FILE_NAME = "signing_ed25519.pem"

_lock = threading.Lock()
_cached: tuple[str, Ed25519PrivateKey] | None = None


def _load_pem(pem: str, source: str) -> Ed25519PrivateKey:
    try:
        key = serialization.load_pem_private_key(pem.encode(), password=None)
    except (ValueError, TypeError) as error:
        raise ImproperlyConfigured(f"{source}: not a readable PEM private key ({error})") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise ImproperlyConfigured(f"{source}: the key must be an Ed25519 private key")
    return key


def _private_pem(key: Ed25519PrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


def _generated_key(path: Path) -> Ed25519PrivateKey:
    if path.exists():
        return _load_pem(path.read_text(encoding="utf-8"), str(path))
    key = Ed25519PrivateKey.generate()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process won the race: use its key
        return _load_pem(path.read_text(encoding="utf-8"), str(path))
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(_private_pem(key))
    return key


def private_key() -> Ed25519PrivateKey:
    """The instance key (loaded once per process and configuration)."""
    global _cached
    configured = env_secret("CADRE_SIGNING_KEY")
    source = configured or str(Path(settings.DATA_DIR) / KEY_FILE_NAME)
    with _lock:
        if _cached is None or _cached[0] != source:
            if configured:
                key = _load_pem(configured, "CADRE_SIGNING_KEY")
            elif settings.CLUSTER:  # each machine would sign with a key of its own
                raise ImproperlyConfigured(
                    "CADRE_SIGNING_KEY: required with CADRE_CLUSTER on (one key for every machine)"
                )
            else:
                key = _generated_key(Path(settings.DATA_DIR) / KEY_FILE_NAME)
            _cached = (source, key)
        return _cached[1]


def public_key() -> Ed25519PublicKey:
    return private_key().public_key()


def existing_public_key() -> Ed25519PublicKey | None:
    """The instance's public key if this machine has the instance key (configured or already
    generated), else None — never generates one (a verifier on another machine has none)."""
    configured = env_secret("CADRE_SIGNING_KEY")
    if configured or (Path(settings.DATA_DIR) / KEY_FILE_NAME).exists():
        return public_key()
    return None


def _raw_public(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def public_key_pem(key: Ed25519PublicKey | None = None) -> str:
    key = key or public_key()
    return key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ).decode()


def key_id(key: Ed25519PublicKey | str | None = None) -> str:
    """SHA-256 (hex) of the raw 32-byte public key (a key object or PEM; default the
    instance's): the key's fingerprint, computed, never taken from what a document says."""
    if isinstance(key, (str, bytes)):
        key = load_public_key(key)
    return hashlib.sha256(_raw_public(key or public_key())).hexdigest()


def published_key() -> dict:
    """What the instance publishes (/api/v1/audit/public-key/, the console's export page)."""
    key = public_key()
    return {"algorithm": "Ed25519", "key_id": key_id(key), "public_key_pem": public_key_pem(key)}


def sign(data: bytes) -> str:
    """Base64 Ed25519 signature of `data` with the instance key."""
    return base64.b64encode(private_key().sign(data)).decode()


def load_public_key(pem: str | bytes) -> Ed25519PublicKey:
    """An Ed25519 public key from PEM; ValueError when it is not one."""
    raw = pem.encode() if isinstance(pem, str) else pem
    try:
        key = serialization.load_pem_public_key(raw)
    except (ValueError, TypeError) as error:
        raise ValueError(f"not a PEM public key ({error})") from None
    if not isinstance(key, Ed25519PublicKey):
        raise ValueError("not an Ed25519 public key")
    return key


def verify(data: bytes, signature: str, public_key: Ed25519PublicKey | str | None = None) -> bool:
    """True when `signature` (base64) is a valid signature of `data`.

    `public_key` is a key object or PEM; by default the instance's own key.
    """
    if public_key is None:
        key = private_key().public_key()
    elif isinstance(public_key, (str, bytes)):
        key = load_public_key(public_key)
    else:
        key = public_key
    try:
        raw = base64.b64decode(signature, validate=True)
    except (binascii.Error, ValueError, TypeError):
        return False
    try:
        key.verify(raw, data)
    except InvalidSignature:
        return False
    return True


def forget_key() -> None:
    """Drop the cached key (tests that change the configuration)."""
    global _cached
    with _lock:
        _cached = None
