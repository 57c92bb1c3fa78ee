"""The WXBizMsgCrypt callback scheme that WeCom and DingTalk both publish, on `cryptography`.

AES key = base64decode(EncodingAESKey + "="), IV = key[:16], AES-256-CBC, PKCS#7 padded to
32-byte blocks; plaintext = 16 random bytes + 4-byte big-endian length + message + receive id
(WeCom: the corp id; DingTalk: the app's AppKey, a corp id or a suite key — the "owner key").
signature = sha1 hex of the sorted token, timestamp, nonce and ciphertext, compared in
constant time. A ciphertext that decrypts but names another receive id is refused: it was made
for another company's (or app's) callback.
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


class CallbackCryptoError(ValueError):
    pass


def aes_key(encoding_aes_key: str) -> bytes:
    try:
        key = base64.b64decode(encoding_aes_key + "=", validate=True)
    except (binascii.Error, ValueError):
        raise CallbackCryptoError("EncodingAESKey is not base64") from None
    if len(key) != 32:
        raise CallbackCryptoError("EncodingAESKey must decode to 32 bytes (43 characters)")
    return key


def signature(token: str, timestamp: str, nonce: str, encrypted: str) -> str:
    joined = "".join(sorted([token, timestamp, nonce, encrypted])).encode()
    return hashlib.sha1(joined).hexdigest()  # noqa: S324 - the platforms' protocol, not our choice


def check_signature(token: str, timestamp: str, nonce: str, encrypted: str, given: str) -> bool:
    return constant_time_equal(signature(token, timestamp, nonce, encrypted), given.lower())


def decrypt(encoding_aes_key: str, encrypted: str, receive_id: str) -> bytes:
    key = aes_key(encoding_aes_key)
    try:
        raw = base64.b64decode(encrypted, validate=True)
    except (binascii.Error, ValueError):
        raise CallbackCryptoError("ciphertext is not base64") from None
    if not raw or len(raw) % 16:
        raise CallbackCryptoError("ciphertext has a wrong length")
    decryptor = Cipher(algorithms.AES(key), modes.CBC(key[:16])).decryptor()
    padded = decryptor.update(raw) + decryptor.finalize()
    pad = padded[-1]
    if not 1 <= pad <= BLOCK or padded[-pad:] != bytes([pad]) * pad:
        raise CallbackCryptoError("bad padding (wrong EncodingAESKey?)")
    plain = padded[:-pad]
    if len(plain) < 20:
        raise CallbackCryptoError("plaintext too short")
    (length,) = struct.unpack(">I", plain[16:20])
    message, tail = plain[20 : 20 + length], plain[20 + length :]
    if len(message) != length:
        raise CallbackCryptoError("length field does not match")
    if not constant_time_equal(receive_id.encode(), tail):
        raise CallbackCryptoError("receive id (corp id / owner key) does not match")
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
