"""The instance signing key: generated once with 0600, or taken from the environment."""

from __future__ import annotations

import hashlib
import stat
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from cadre import signing


def test_key_is_generated_once_with_owner_only_permissions():
    signature = signing.sign(b"payload")
    path = Path(settings.DATA_DIR) / signing.KEY_FILE_NAME
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    signing.forget_key()
    assert signing.verify(b"payload", signature)  # the same key was read back


def test_tampered_data_or_signature_fails():
    signature = signing.sign(b"payload")
    assert not signing.verify(b"payload!", signature)
    assert not signing.verify(b"payload", signature[:-4] + "AAA=")
    assert not signing.verify(b"payload", "not base64 at all!")


def test_verify_with_another_public_key_fails():
    signature = signing.sign(b"payload")
    other = Ed25519PrivateKey.generate().public_key()
    assert not signing.verify(b"payload", signature, other)
    assert signing.verify(b"payload", signature, signing.public_key_pem())


def test_key_id_is_sha256_of_the_raw_public_key():
    raw = signing.public_key().public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw
    )
    assert signing.key_id() == hashlib.sha256(raw).hexdigest()


def _pem(key) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


def test_key_from_environment_and_file(monkeypatch, tmp_path):
    key = Ed25519PrivateKey.generate()
    monkeypatch.setenv("CADRE_SIGNING_KEY", _pem(key))
    signing.forget_key()
    assert signing.verify(b"x", signing.sign(b"x"), key.public_key())
    assert not (Path(settings.DATA_DIR) / signing.KEY_FILE_NAME).exists()
    monkeypatch.delenv("CADRE_SIGNING_KEY")
    other = Ed25519PrivateKey.generate()
    (tmp_path / "key.pem").write_text(_pem(other))
    monkeypatch.setenv("CADRE_SIGNING_KEY_FILE", str(tmp_path / "key.pem"))
    assert signing.verify(b"x", signing.sign(b"x"), other.public_key())


def test_a_non_ed25519_key_is_refused_loudly(monkeypatch):
    from cryptography.hazmat.primitives.asymmetric import ec

    monkeypatch.setenv("CADRE_SIGNING_KEY", _pem(ec.generate_private_key(ec.SECP256R1())))
    signing.forget_key()
    with pytest.raises(ImproperlyConfigured, match="Ed25519"):
        signing.sign(b"x")
