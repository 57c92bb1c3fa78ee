"""Feishu's event encryption: AES-256-CBC, key = SHA-256(encrypt key), IV = first 16 bytes."""

from __future__ import annotations

import base64
import hashlib
import os

from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes


class DecryptError(ValueError):
    pass


def _key(encrypt_key: str) -> bytes:
    return hashlib.sha256(encrypt_key.encode()).digest()


def decrypt(encrypt_key: str, ciphertext_b64: str) -> bytes:
    try:
        raw = base64.b64decode(ciphertext_b64, validate=True)
    except (ValueError, TypeError):
        raise DecryptError("ciphertext is not base64") from None
    if len(raw) < 32 or len(raw) % 16:
        raise DecryptError("ciphertext has a wrong length")
    decryptor = Cipher(algorithms.AES(_key(encrypt_key)), modes.CBC(raw[:16])).decryptor()
    padded = decryptor.update(raw[16:]) + decryptor.finalize()
    unpadder = padding.PKCS7(128).unpadder()
    try:
        return unpadder.update(padded) + unpadder.finalize()
    except ValueError:
        raise DecryptError("bad padding (wrong encrypt key?)") from None


def encrypt(encrypt_key: str, plaintext: bytes, iv: bytes | None = None) -> str:
    """The inverse, as Feishu does it (used by the long-connection bridge and by tests)."""
    iv = iv or os.urandom(16)
    padder = padding.PKCS7(128).padder()
    padded = padder.update(plaintext) + padder.finalize()
    encryptor = Cipher(algorithms.AES(_key(encrypt_key)), modes.CBC(iv)).encryptor()
    return base64.b64encode(iv + encryptor.update(padded) + encryptor.finalize()).decode()


def signature(timestamp: str, nonce: str, encrypt_key: str, body: bytes) -> str:
    """X-Lark-Signature: sha256_hex(timestamp + nonce + encrypt_key + raw body)."""
    return hashlib.sha256((timestamp + nonce + encrypt_key).encode() + body).hexdigest()
