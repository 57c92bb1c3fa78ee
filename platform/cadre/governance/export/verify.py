"""Offline verification of a bundle: the signature against a trusted key, each file's hashes,
the chain row by row and against the signed chain-head digests."""

from __future__ import annotations

import hashlib
import json
import shutil
import tarfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from cadre import signing
from cadre.governance import audit, audit_digest
from cadre.governance.audit_models import AuditEvent
from cadre.governance.export.bundle import BLOCK_LINES, MANIFEST, SIGNATURE


@dataclass
class Problem:
    file: str
    message: str
    line: int | None = None  # 1-based line in the file (CSV: data rows, after the header)
    lines: tuple[int, int] | None = None  # the 1,000-line block when the line is not known

    def __str__(self) -> str:
        where = self.file
        if self.line is not None:
            where += f" line {self.line}"
        elif self.lines is not None:
            where += f" lines {self.lines[0]}-{self.lines[1]}"
        return f"{where}: {self.message}"


@dataclass
class VerifyReport:
    ok: bool = True
    rows: int = 0
    problems: list[Problem] = field(default_factory=list)
    key_id: str = ""  # computed from the trusted key that verified the signature; "" if none
    digests: int = 0  # signed chain-head digests the rows were checked against

    def fail(self, problem: Problem) -> None:
        self.ok = False
        self.problems.append(problem)


class UntrustedKey(ValueError):
    """No key to trust: the bundle's own key is never trusted by default."""


def trusted_key(
    *, public_key_pem: str | None = None, key_id: str | None = None, manifest: dict | None = None
) -> tuple[Ed25519PublicKey, str]:
    """The key a bundle must be signed with, and where it comes from.

    `public_key_pem` (the signer's published key) wins; else a pinned `key_id` (fingerprint),
    which the key named in the manifest must have — computed from that key, not read from the
    manifest; else the instance's own key when this machine has it. Raises UntrustedKey.
    """
    if public_key_pem:
        try:
            key = signing.load_public_key(public_key_pem)
        except ValueError as error:
            raise UntrustedKey(f"the given public key: {error}") from None
        if key_id and not signing.key_id(key).startswith(_pin(key_id)):
            raise UntrustedKey("the given public key does not have the pinned key id")
        return key, "the given public key"
    if key_id:
        embedded = ((manifest or {}).get("signing") or {}).get("public_key_pem") or ""
        try:
            key = signing.load_public_key(embedded)
        except ValueError:
            raise UntrustedKey("the manifest carries no readable public key to pin") from None
        if not signing.key_id(key).startswith(_pin(key_id)):
            raise UntrustedKey("the manifest's key does not have the pinned key id")
        return key, "the key with the pinned id"
    key = signing.existing_public_key()
    if key is None:
        raise UntrustedKey(
            "no trusted key on this machine: pass --public-key (the instance's key, from "
            "/api/v1/audit/public-key/) or --key-id (its fingerprint)"
        )
    return key, "this instance's key"


def _pin(key_id: str) -> str:
    pin = key_id.strip().lower()
    if len(pin) < 16 or any(ch not in "0123456789abcdef" for ch in pin):
        raise UntrustedKey("a pinned key id is the key's SHA-256 in hex (at least 16 digits)")
    return pin


def _open_bundle(path: Path) -> tuple[Path, Callable[[], None]]:
    """A directory to read: the bundle itself, or a tar extracted to a temporary directory."""
    if path.is_dir():
        return path, lambda: None
    import tempfile

    scratch = Path(tempfile.mkdtemp(prefix="cadre-export-verify-"))
    with tarfile.open(path) as archive:
        archive.extractall(scratch, filter="data")
    entries = [p for p in scratch.iterdir() if p.is_dir()]
    root = entries[0] if len(entries) == 1 and not (scratch / MANIFEST).exists() else scratch
    return root, lambda: shutil.rmtree(scratch, ignore_errors=True)


def verify_bundle(
    path: Path | str, *, public_key_pem: str | None = None, key_id: str | None = None
) -> VerifyReport:
    """Check a bundle offline: the signature against a trusted key (see `trusted_key`; the
    manifest's own key is never trusted by default), every file's SHA-256 and line count, the
    hash chain row by row in audit.jsonl (each event's own hash when the export is unmasked)
    and the rows against the signed chain-head digests it carries."""
    root, cleanup = _open_bundle(Path(path))
    try:
        return _verify_directory(root, public_key_pem, key_id)
    finally:
        cleanup()


def _verify_directory(root: Path, public_key_pem: str | None, key_id: str | None) -> VerifyReport:
    report = VerifyReport()
    manifest_path, signature_path = root / MANIFEST, root / SIGNATURE
    if not manifest_path.exists() or not signature_path.exists():
        report.fail(Problem(MANIFEST, "manifest.json or manifest.sig is missing"))
        return report
    data = manifest_path.read_bytes()
    try:
        manifest = json.loads(data)
    except ValueError:
        report.fail(Problem(MANIFEST, "not valid JSON"))
        return report
    if not isinstance(manifest, dict):
        report.fail(Problem(MANIFEST, "not a JSON object"))
        return report
    try:
        key, source = trusted_key(public_key_pem=public_key_pem, key_id=key_id, manifest=manifest)
    except UntrustedKey as error:
        report.fail(Problem(MANIFEST, f"signature not checked: {error}"))
        return report
    signature = signature_path.read_text(encoding="ascii", errors="replace").strip()
    if not signing.verify(data, signature, key):
        report.fail(
            Problem(
                MANIFEST,
                f"signature does not verify with {source}: the manifest was altered or signed "
                "by another key",
            )
        )
        return report  # nothing else in the bundle can be trusted
    report.key_id = signing.key_id(key)
    report.rows = int(manifest.get("rows") or 0)
    anchors = _bundle_anchors(root, manifest, key, report)
    for entry in manifest.get("files", []):
        _verify_file(root, entry, manifest, report, anchors)
    return report


def _bundle_anchors(root: Path, manifest: dict, key, report: VerifyReport) -> dict[int, dict]:
    """The bundle's digests (its file was checked against the manifest with the others) that
    verify with the trusted key, by position."""
    entry = next((e for e in manifest.get("files", []) if e.get("format") == "digests"), None)
    if entry is None or not (root / entry["name"]).exists():
        return {}
    organization = (manifest.get("organization") or {}).get("id")
    text = (root / entry["name"]).read_text(encoding="utf-8", errors="replace")
    lines = [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
    anchors = audit_digest.anchors_from_lines(lines, key, organization)
    for number in anchors.invalid:
        report.fail(Problem(entry["name"], "not a digest signed by the trusted key", line=number))
    report.digests = len(anchors.trusted)
    return anchors.trusted


def _verify_file(
    root: Path, entry: dict, manifest: dict, report: VerifyReport, anchors: dict[int, dict]
) -> None:
    name = entry["name"]
    path = root / name
    if not path.exists():
        report.fail(Problem(name, "file is missing"))
        return
    sha, block, blocks = hashlib.sha256(), hashlib.sha256(), []
    size = lines = 0
    chain = _ChainCheck(name, manifest, report, anchors) if entry["format"] == "jsonl" else None
    block_size = int(entry.get("block_lines") or BLOCK_LINES)
    with open(path, "rb") as handle:
        header = entry["format"] == "csv"
        for raw in handle:
            sha.update(raw)
            block.update(raw)
            size += len(raw)
            if header:
                header = False
                continue
            lines += 1
            if chain is not None:
                chain.line(lines, raw)
            if lines % block_size == 0:
                blocks.append(block.hexdigest())
                block = hashlib.sha256()
    if lines % block_size:
        blocks.append(block.hexdigest())
    if chain is not None:
        chain.finish(lines)
    if sha.hexdigest() != entry["sha256"] or size != entry["bytes"]:
        expected = entry.get("block_sha256") or []
        for index, digest in enumerate(blocks):
            if index >= len(expected) or digest != expected[index]:
                start = index * block_size + 1
                report.fail(
                    Problem(
                        name,
                        "content differs from the signed manifest",
                        lines=(start, start + block_size - 1),
                    )
                )
                break
        else:
            report.fail(Problem(name, "content differs from the signed manifest (truncated)"))
    if lines != entry["lines"]:
        report.fail(Problem(name, f"{lines} rows, the manifest says {entry['lines']}"))


class _ChainCheck:
    """Row-level continuity of audit.jsonl: sequence order, prev_hash links, and for unmasked
    exports each event's hash recomputed from its content."""

    def __init__(self, name: str, manifest: dict, report: VerifyReport, anchors: dict[int, dict]):
        self.name, self.report, self.anchors = name, report, anchors
        self.recompute = not manifest.get("masked", True)
        self.organization = (manifest.get("organization") or {}).get("id")
        self.first = (manifest.get("chain") or {}).get("first")
        self.last_expected = (manifest.get("chain") or {}).get("last")
        self.contiguous = bool((manifest.get("chain") or {}).get("contiguous"))
        self.previous: dict | None = None
        self.failures = 0

    def fail(self, line: int, message: str) -> None:
        self.failures += 1
        if self.failures <= 20:
            self.report.fail(Problem(self.name, message, line=line))

    def line(self, number: int, raw: bytes) -> None:
        try:
            row = json.loads(raw)
        except ValueError:
            self.fail(number, "not a JSON object")
            self.previous = None
            return
        previous = self.previous
        if previous is None and number == 1 and self.first:
            if (
                row.get("sequence") != self.first["sequence"]
                or row.get("hash") != self.first["hash"]
            ):
                self.fail(number, "first event differs from the manifest's chain start")
        elif previous is not None:
            if row.get("sequence", 0) <= previous.get("sequence", 0):
                self.fail(number, "sequence out of order (an event was moved or duplicated)")
            elif self.contiguous and row.get("sequence") != previous.get("sequence", 0) + 1:
                self.fail(
                    number,
                    f"sequence jumps from {previous.get('sequence')} to {row.get('sequence')}: "
                    "events were removed",
                )
            elif row.get("sequence") == previous.get("sequence", 0) + 1 and row.get(
                "prev_hash"
            ) != previous.get("hash"):
                self.fail(number, "prev_hash does not link to the previous event's hash")
        if self.recompute and not self._hash_matches(row):
            self.fail(number, "content does not match the event's hash (edited)")
        anchor = self.anchors.get(row.get("sequence"))
        if anchor is not None and anchor["hash"] != row.get("hash"):
            self.fail(
                number,
                f"hash differs from the digest signed at {anchor['signed_at']}: the chain was "
                "rewritten before it was exported",
            )
        self.previous = row

    def _hash_matches(self, row: dict) -> bool:
        try:
            fields = {name: row[name] for name in AuditEvent.CHAINED_FIELDS}
            created = datetime.fromisoformat(row["created_at"])
            return audit.event_hash(row["organization"], created, fields) == row["hash"]
        except (KeyError, TypeError, ValueError):
            return False

    def finish(self, lines: int) -> None:
        last = self.previous
        if self.last_expected and (
            last is None
            or last.get("sequence") != self.last_expected["sequence"]
            or last.get("hash") != self.last_expected["hash"]
        ):
            self.fail(lines, "last event differs from the manifest's chain end (truncated?)")
