"""WeCom callback crypto (WXBizMsgCrypt), on `cryptography`, compared in constant time.

AES key = base64decode(EncodingAESKey + "="), IV = key[:16], AES-256-CBC, PKCS#7 padded to
32-byte blocks; plaintext = 16 random bytes + 4-byte big-endian length + message + receive id
(the corp id). msg_signature = sha1 of the sorted token, timestamp, nonce and ciphertext.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import struct

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from connectors.base import constant_time_equal

BLOCK = 32


class WeComCryptoError(ValueError):
    pass


def aes_key(encoding_aes_key: str) -> bytes:
    try:
        key = base64.b64decode(encoding_aes_key + "=", validate=True)
    except (binascii.Error, ValueError):
        raise WeComCryptoError("EncodingAESKey is not base64") from None
    if len(key) != 32:
        raise WeComCryptoError("EncodingAESKey must decode to 32 bytes (43 characters)")
    return key


def signature(token: str, timestamp: str, nonce: str, encrypted: str) -> str:
    joined = "".join(sorted([token, timestamp, nonce, encrypted])).encode()
    return hashlib.sha1(joined).hexdigest()  # noqa: S324 - WeCom's protocol, not our choice


def check_signature(token: str, timestamp: str, nonce: str, encrypted: str, given: str) -> bool:
    return constant_time_equal(signature(token, timestamp, nonce, encrypted), given.lower())


def decrypt(encoding_aes_key: str, encrypted: str, receive_id: str) -> bytes:
    key = aes_key(encoding_aes_key)
    try:
        raw = base64.b64decode(encrypted, validate=True)
    except (binascii.Error, ValueError):
        raise WeComCryptoError("ciphertext is not base64") from None
    if not raw or len(raw) % 16:
        raise WeComCryptoError("ciphertext has a wrong length")
    decryptor = Cipher(algorithms.AES(key), modes.CBC(key[:16])).decryptor()
    padded = decryptor.update(raw) + decryptor.finalize()
    pad = padded[-1]
    if not 1 <= pad <= BLOCK or padded[-pad:] != bytes([pad]) * pad:
        raise WeComCryptoError("bad padding (wrong EncodingAESKey?)")
    plain = padded[:-pad]
    if len(plain) < 20:
        raise WeComCryptoError("plaintext too short")
    (length,) = struct.unpack(">I", plain[16:20])
    message, tail = plain[20 : 20 + length], plain[20 + length :]
    if len(message) != length:
        raise WeComCryptoError("length field does not match")
    if not constant_time_equal(receive_id.encode(), tail):
        raise WeComCryptoError("receive id (corp id) does not match")
    return message


def encrypt(
    encoding_aes_key: str, message: bytes, receive_id: str, random_prefix: bytes | None = None
) -> str:
    key = aes_key(encoding_aes_key)
    body = (
        (random_prefix or os.urandom(16))
        + struct.pack(">I", len(message))
        + message
        + receive_id.encode()
    )
    pad = BLOCK - len(body) % BLOCK
    body += bytes([pad]) * pad
    encryptor = Cipher(algorithms.AES(key), modes.CBC(key[:16])).encryptor()
    return base64.b64encode(encryptor.update(body) + encryptor.finalize()).decode()
