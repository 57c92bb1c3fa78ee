"""Signed digests of the audit chain heads, kept outside the database: what a database writer
cannot forge.

The hash chain alone is unkeyed: whoever can write the table (its owner, a superuser) can edit
an event and recompute every later hash, and the chain verifies again. So every few minutes
(beat: `governance-audit-digest`) `audit.digest_write` checks each organization's chain from its
last digest to its head and writes a digest of the head — organization, position, hash, time —
signed with the instance's Ed25519 key (cadre.signing, which lives outside the database) as a
new object in the "audit_anchors" storage (an S3 bucket or prefix on several machines, files
under CADRE_DATA_DIR on one), written once and never overwritten or deleted: key
`org-<organization>/<day>/<time>-<position>-<hash>.json`. `audit_verify` and every export check
the chain against them: a chain recomputed after a digest was signed no longer has that
digest's hash at that position. Digests of earlier releases, lines of settings.AUDIT_DIGEST_LOG,
are still read.

What is signed is the canonical JSON (sorted keys, no spaces) of the digest without `signature`.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import Storage, storages
from django.utils import timezone

from cadre import object_storage, signing

FORMAT = "cadre-audit-digest"
VERSION = 1
READERS = 16  # concurrent reads of digest objects


def log_path() -> Path:
    """The digest log of earlier releases (read, never written)."""
    return Path(settings.AUDIT_DIGEST_LOG)


def storage() -> Storage:
    return storages["audit_anchors"]


def location() -> str:
    """Where the digests are, for messages."""
    return f"{object_storage.describe(storage())} (and {log_path()}, if present)"


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


def key(digest: dict) -> str:
    """The object name of a digest: by organization, then day, then time, so names sort by
    time and the last one is found by listing one day."""
    signed_at = datetime.fromisoformat(digest["signed_at"]).astimezone(UTC)
    return (
        f"org-{digest['organization']}/{signed_at:%Y-%m-%d}/{signed_at:%H%M%S.%f}Z-"
        f"{digest['sequence']:012d}-{digest['hash']}.json"
    )


def write(digest: dict) -> str:
    """Store one digest as a new object; returns its name. Raises object_storage.AlreadyWritten
    (nothing written) when that name exists: a digest is never overwritten."""
    name = key(digest)
    data = json.dumps(digest, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    content = ContentFile(data.encode("utf-8"))
    content.content_type = "application/json"
    saved = storage().save(name, content)
    if saved != name:  # a storage that renamed instead of refusing: not write-once
        raise object_storage.AlreadyWritten(name)
    return saved


def _legacy_lines(organization_id: int | None) -> list[tuple[str, str]]:
    path = log_path()
    if not path.exists():
        return []
    found = []
    with open(path, encoding="utf-8", errors="replace") as handle:
        for number, text in enumerate(handle, start=1):
            text = text.strip()
            if text and _belongs(text, organization_id):
                found.append((f"{path.name} line {number}", text))
    return found


def _belongs(text: str, organization_id: int | None) -> bool:
    """A line that is not a JSON object is kept (organization None) so that checks report it."""
    try:
        organization = json.loads(text).get("organization")
    except (ValueError, AttributeError):
        organization = None
    return organization_id is None or organization in (organization_id, None)


def _organization_folders(organization_id: int | None) -> list[str]:
    if organization_id is not None:
        return [f"org-{organization_id}"]
    try:
        folders, _files = storage().listdir("")
    except FileNotFoundError:
        return []
    return sorted(folder for folder in folders if folder.startswith("org-"))


def _read(anchors: Storage, name: str) -> str:
    """One digest object's text (one GET on S3)."""
    data = b"".join(object_storage.iter_chunks(anchors, name))
    return data.decode("utf-8", errors="replace").strip()


def read_lines(organization_id: int | None = None) -> list[tuple[str, str]]:
    """(where, text) of the digests of one organization (all when None): the old log's lines,
    then every object, oldest first. `where` names the line or the object in messages."""
    found = _legacy_lines(organization_id)
    anchors = storage()
    paths = []
    for folder in _organization_folders(organization_id):
        try:
            days, _files = anchors.listdir(folder)
        except FileNotFoundError:
            continue
        for day in sorted(days):
            try:
                _dirs, names = anchors.listdir(f"{folder}/{day}")
            except FileNotFoundError:
                continue
            paths.extend(f"{folder}/{day}/{name}" for name in sorted(names))
    # One GET per digest, a year of them ~100,000 per organization: read them concurrently.
    with ThreadPoolExecutor(max_workers=READERS) as pool:
        texts = list(pool.map(lambda path: _read(anchors, path), paths))
    pairs = zip(paths, texts, strict=True)
    found.extend((path, text) for path, text in pairs if _belongs(text, organization_id))
    return found


def any_written() -> bool:
    """True when the storage (or the old log) holds at least one digest, of any organization."""
    if log_path().exists() and log_path().stat().st_size:
        return True
    for folder in _organization_folders(None):
        try:
            days, names = storage().listdir(folder)
        except FileNotFoundError:
            continue
        if days or names:
            return True
    return False


@dataclass
class Anchors:
    """The digests of one organization, checked against a trusted public key."""

    trusted: dict[int, dict] = field(default_factory=dict)  # position -> latest digest there
    other_key: int = 0  # signed by another key (before a key rotation): not used
    invalid: list = field(default_factory=list)  # where digests that do not verify are

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


def anchors_from_lines(lines: list[tuple], public_key, organization_id: int) -> Anchors:
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
    """The organization's digests in the anchor storage, checked with the instance key."""
    key = public_key or signing.existing_public_key()
    if key is None:  # no instance key on this machine: nothing was ever signed here
        return Anchors()
    return anchors_from_lines(read_lines(organization_id), key, organization_id)


def latest(organization_id: int, public_key=None) -> dict | None:
    """The organization's last trusted digest, reading one object when the newest one verifies
    (the beat task asks every few minutes; a year of digests is ~100,000 objects)."""
    key_ = public_key or signing.existing_public_key()
    if key_ is None:
        return None
    anchors_storage = storage()
    folder = f"org-{organization_id}"
    newest = None
    if not log_path().exists():
        try:
            days, _files = anchors_storage.listdir(folder)
            if days:
                _dirs, names = anchors_storage.listdir(f"{folder}/{max(days)}")
                if names:
                    newest = f"{folder}/{max(days)}/{max(names)}"
        except FileNotFoundError:
            newest = None
    if newest is not None:
        text = _read(anchors_storage, newest)
        checked = anchors_from_lines([(newest, text)], key_, organization_id)
        if checked.last is not None:
            return checked.last
    return anchors(organization_id, key_).last
