"""What a version's signature covers, and the install-side check of signature + fingerprint.

Kept free of Django so `cadre skill install` can verify a download with only the instance's
public key (served at /api/v1/hub/signing-key) and `cryptography`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Iterable

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from hub.bundles import fingerprint as compute_fingerprint


class IntegrityError(Exception):
    """A download whose bytes, fingerprint or signature do not match what was published."""


def signed_payload(
    *, package: str, version: str, fingerprint: str, files: Iterable[tuple[str, str, int]]
) -> bytes:
    """Canonical JSON of what the signature vouches for: name, version, fingerprint, files."""
    document = {
        "package": package,
        "version": version,
        "fingerprint": fingerprint,
        "files": [
            {"path": path, "sha256": sha256, "size": size}
            for path, sha256, size in sorted(files, key=lambda entry: entry[0])
        ],
    }
    return json.dumps(document, sort_keys=True, separators=(",", ":")).encode("utf-8")


def key_id_of(public_key_pem: str) -> str:
    key = serialization.load_pem_public_key(public_key_pem.encode())
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()


def verify_files(
    *,
    package: str,
    version: str,
    files: dict[str, bytes],
    fingerprint: str,
    signature: str,
    public_key_pem: str,
) -> None:
    """Raise IntegrityError unless the files hash to `fingerprint` and the signature holds."""
    entries = [
        (path, hashlib.sha256(content).hexdigest(), len(content)) for path, content in files.items()
    ]
    actual = compute_fingerprint((path, digest) for path, digest, _ in entries)
    if actual != fingerprint:
        raise IntegrityError(
            f"{package}@{version}: the files hash to fingerprint {actual}, "
            f"but {fingerprint} was published. Refusing to install."
        )
    key = serialization.load_pem_public_key(public_key_pem.encode())
    if not isinstance(key, Ed25519PublicKey):
        raise IntegrityError("The registry's signing key is not an Ed25519 key.")
    payload = signed_payload(
        package=package, version=version, fingerprint=fingerprint, files=entries
    )
    try:
        key.verify(base64.b64decode(signature, validate=True), payload)
    except (InvalidSignature, binascii.Error, ValueError):
        raise IntegrityError(
            f"{package}@{version}: the signature does not match the files. Refusing to install."
        ) from None
