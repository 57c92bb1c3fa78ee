"""Signed digests of the audit chain heads, kept outside the database: what a database writer
cannot forge.

The hash chain alone is unkeyed: whoever can write the table (its owner, a superuser) can edit
an event and recompute every later hash, and the chain verifies again. So every few minutes
(beat: `governance-audit-digest`) `audit.digest_write` checks each organization's chain from its
last digest to its head and appends a digest of the head — organization, position, hash, time —
signed with the instance's Ed25519 key (cadre.signing, which lives outside the database) to an
append-only log, one JSON object per line (settings.AUDIT_DIGEST_LOG, under CADRE_DATA_DIR by
default). `audit_verify` and every export check the chain against them: a chain recomputed after
a digest was signed no longer has that digest's hash at that position.

What is signed is the canonical JSON (sorted keys, no spaces) of the line without `signature`.
"""

from __future__ import annotations

import fcntl
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.utils import timezone

from cadre import signing

FORMAT = "cadre-audit-digest"
VERSION = 1


def log_path() -> Path:
    return Path(settings.AUDIT_DIGEST_LOG)


def canonical(digest: dict) -> bytes:
    """The exact bytes a digest's signature covers: every field but `signature`."""
    payload = {key: value for key, value in digest.items() if key != "signature"}
    return json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()


def signed(*, organization_id: int, sequence: int, hash: str) -> dict:
    """A new digest of a chain head, signed with the instance key."""
    digest = {
        "format": FORMAT,
        "version": VERSION,
        "organization": organization_id,
        "sequence": sequence,
        "hash": hash,
        "signed_at": timezone.now().isoformat(),
        "key_id": signing.key_id(),
    }
    digest["signature"] = signing.sign(canonical(digest))
    return digest


def is_valid(digest: dict, public_key) -> bool:
    """True when `digest` is a well-formed digest signed by `public_key`."""
    if not isinstance(digest, dict) or digest.get("format") != FORMAT:
        return False
    if not isinstance(digest.get("sequence"), int) or not isinstance(digest.get("hash"), str):
        return False
    return signing.verify(canonical(digest), str(digest.get("signature", "")), public_key)


def append(digest: dict, path: Path | None = None) -> None:
    """Append one digest line to the log (O_APPEND, under an exclusive lock, fsynced)."""
    path = path or log_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(digest, sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, line.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)


def read_lines(
    organization_id: int | None = None, path: Path | None = None
) -> list[tuple[int, str]]:
    """(line number, text) of the log's lines for one organization (all when None); a line
    that is not a JSON object is kept (with organization None) so that checks report it."""
    path = path or log_path()
    if not path.exists():
        return []
    found = []
    with open(path, encoding="utf-8", errors="replace") as handle:
        for number, text in enumerate(handle, start=1):
            text = text.strip()
            if not text:
                continue
            try:
                organization = json.loads(text).get("organization")
            except (ValueError, AttributeError):
                organization = None
            if organization_id is None or organization in (organization_id, None):
                found.append((number, text))
    return found


@dataclass
class Anchors:
    """The digests of one organization, checked against a trusted public key."""

    trusted: dict[int, dict] = field(default_factory=dict)  # position -> latest digest there
    other_key: int = 0  # signed by another key (before a key rotation): not used
    invalid: list[int] = field(default_factory=list)  # line numbers that do not verify

    @property
    def last(self) -> dict | None:
        return self.trusted[max(self.trusted)] if self.trusted else None

    def summary(self) -> dict:
        last = self.last
        return {
            "trusted": len(self.trusted),
            "other_key": self.other_key,
            "invalid": list(self.invalid),
            "last": (
                {"sequence": last["sequence"], "signed_at": last["signed_at"]} if last else None
            ),
        }


def anchors_from_lines(lines: list[tuple[int, str]], public_key, organization_id: int) -> Anchors:
    """Check each line's signature with `public_key` (the trusted one, never the line's)."""
    anchors = Anchors()
    trusted_id = signing.key_id(public_key)
    for number, text in lines:
        try:
            digest = json.loads(text)
        except ValueError:
            anchors.invalid.append(number)
            continue
        if not isinstance(digest, dict) or digest.get("organization") != organization_id:
            anchors.invalid.append(number)
            continue
        if digest.get("key_id") != trusted_id:
            # Signed by another key (before a key rotation): it cannot be checked with the
            # trusted one, so it anchors nothing; counted, not failed.
            anchors.other_key += 1
            continue
        if not is_valid(digest, public_key):
            anchors.invalid.append(number)
            continue
        anchors.trusted[digest["sequence"]] = digest
    return anchors


def anchors(organization_id: int, public_key=None) -> Anchors:
    """The organization's digests in the instance's log, checked with the instance key."""
    key = public_key or signing.existing_public_key()
    if key is None:  # no instance key on this machine: nothing was ever signed here
        return Anchors()
    return anchors_from_lines(read_lines(organization_id), key, organization_id)
