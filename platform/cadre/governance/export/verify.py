"""Offline verification of a bundle: the signature, each file's hashes, the chain row by row."""

from __future__ import annotations

import hashlib
import json
import shutil
import tarfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from cadre import signing
from cadre.governance import audit
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
    key_id: str = ""

    def fail(self, problem: Problem) -> None:
        self.ok = False
        self.problems.append(problem)


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


def verify_bundle(path: Path | str, *, public_key_pem: str | None = None) -> VerifyReport:
    """Check a bundle offline: signature, every file's SHA-256 and line count, and the hash
    chain row by row in audit.jsonl (each event's own hash when the export is unmasked)."""
    root, cleanup = _open_bundle(Path(path))
    try:
        return _verify_directory(root, public_key_pem)
    finally:
        cleanup()


def _verify_directory(root: Path, public_key_pem: str | None) -> VerifyReport:
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
    embedded_key = (manifest.get("signing") or {}).get("public_key_pem", "")
    key = public_key_pem or embedded_key
    report.key_id = (manifest.get("signing") or {}).get("key_id", "")
    signature = signature_path.read_text(encoding="ascii", errors="replace").strip()
    try:
        valid = bool(key) and signing.verify(data, signature, key)
    except ValueError:
        valid = False
    if not valid:
        report.fail(
            Problem(
                MANIFEST,
                "signature does not verify: the manifest was altered or signed by another key",
            )
        )
    if public_key_pem and embedded_key and public_key_pem.strip() != embedded_key.strip():
        report.fail(Problem(MANIFEST, "signed by a key other than the one given"))
    report.rows = int(manifest.get("rows") or 0)
    for entry in manifest.get("files", []):
        _verify_file(root, entry, manifest, report)
    return report


def _verify_file(root: Path, entry: dict, manifest: dict, report: VerifyReport) -> None:
    name = entry["name"]
    path = root / name
    if not path.exists():
        report.fail(Problem(name, "file is missing"))
        return
    sha, block, blocks = hashlib.sha256(), hashlib.sha256(), []
    size = lines = 0
    chain = _ChainCheck(name, manifest, report) if entry["format"] == "jsonl" else None
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

    def __init__(self, name: str, manifest: dict, report: VerifyReport):
        self.name, self.report = name, report
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
        self.previous = row

    def _hash_matches(self, row: dict) -> bool:
        try:
            fields = {name: row[name] for name in audit._HASHED_FIELDS}
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
