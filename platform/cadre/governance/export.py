"""Audit export: a time range of the audit log as JSONL / CSV / OCSF, in a signed bundle.

Rows are streamed in keyset pages (`sequence > last` on the organization's unique
(organization, sequence) index), so memory stays bounded whatever the range and no long
transaction holds a snapshot open while progress is reported. Free text (labels, reason and
every string inside `changes`) passes through the masking engine unless the export is made
with `mask=False`.

A bundle is a directory `DATA_DIR/exports/<org>/<export id>/` (downloaded as a tar streamed
on the fly):

    audit.jsonl          one event per line: the audit columns + hash and prev_hash
    audit.csv            the same columns, `changes` as JSON text
    audit.ocsf.jsonl     OCSF 1.1 "API Activity" (class 6003) events, one per line
    manifest.json        rows, range, filters, chain heads, SHA-256 and block hashes per file
    manifest.sig         base64 Ed25519 signature of manifest.json's exact bytes

`verify_bundle` (and `manage.py audit_export_verify`) checks all of it offline.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import shutil
import tarfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from cadre import signing
from cadre.errors import InvalidInput, NotPermitted
from cadre.governance import audit
from cadre.governance.models import AuditChainHead, AuditEvent, AuditExport

FORMATS = ("jsonl", "csv", "ocsf")
FILE_NAMES = {"jsonl": "audit.jsonl", "csv": "audit.csv", "ocsf": "audit.ocsf.jsonl"}
MANIFEST, SIGNATURE = "manifest.json", "manifest.sig"
BUNDLE_FORMAT = "cadre-audit-export"
PAGE_SIZE = 5000
BLOCK_LINES = 1000  # block hashes pinpoint tampering in a file to a 1,000-line block
PROGRESS_EVERY = 20_000
FILTER_FIELDS = ("action", "actor_type", "actor_id", "target_type", "target_id", "trace_id")

COLUMNS = (
    "id",
    "organization",
    AuditEvent.CHAINED_FIELDS[0],
    "created_at",
    *AuditEvent.CHAINED_FIELDS[1:],
    "hash",
)
_DB_COLUMNS = tuple("organization_id" if name == "organization" else name for name in COLUMNS)
_FREE_TEXT = ("actor_label", "target_label", "reason", "user_agent")


# --- masking of free text ---------------------------------------------------------------------


class _RuleRecognizer:
    """An organization rule seen as a recognizer (the engine's `entity` / `scan` interface)."""

    def __init__(self, rule):
        self.rule, self.entity = rule, rule.entity_type

    def scan(self, text: str, lowered: str):
        return self.rule.scan(text)


class TextMasker:
    """Masks free text for export: redaction (irreversible), results cached per distinct value
    because labels and reasons repeat heavily across an audit log."""

    def __init__(self, organization, *, cache_size: int = 50_000):
        from cadre.governance.masking.engine import MaskingEngine, get_engine
        from cadre.governance.masking.policy import MaskingPolicy
        from cadre.governance.masking.rules import rules_for

        # The organization's own rules are read once per export, not once per value.
        own = [_RuleRecognizer(rule) for rule in rules_for(organization)]
        engine = MaskingEngine([*get_engine().recognizers, *own])
        policy = MaskingPolicy(default="redact")

        @lru_cache(maxsize=cache_size)
        def mask_text(text: str) -> str:
            return engine.mask(text, policy=policy).text

        self._mask_text = mask_text
        self._mask_uncached = lambda text: engine.mask(text, policy=policy).text

    def text(self, value: str) -> str:
        if not value:
            return value
        # Short values (labels, statuses) repeat and are cached; long free text rarely does.
        if len(value) <= 200:
            return self._mask_text(value)
        return self._mask_uncached(value)

    def tree(self, value):
        kind = type(value)
        if kind is str:
            return self.text(value)
        if kind is dict:
            return {key: self.tree(item) for key, item in value.items()}
        if kind is list:
            return [self.tree(item) for item in value]
        return value


# --- rows ---------------------------------------------------------------------------------


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat()


def export_rows(
    organization,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    filters: dict | None = None,
    max_sequence: int | None = None,
    page_size: int = PAGE_SIZE,
) -> Iterator[dict]:
    """The events in range, oldest first, as plain dicts — page by page, never all at once."""
    queryset = AuditEvent.objects.filter(organization=organization)
    if since is not None:
        queryset = queryset.filter(created_at__gte=since)
    if until is not None:
        queryset = queryset.filter(created_at__lt=until)
    if max_sequence is not None:
        queryset = queryset.filter(sequence__lte=max_sequence)
    for name, value in (filters or {}).items():
        if name == "action" and str(value).endswith("."):
            queryset = queryset.filter(action__startswith=value)
        else:
            queryset = queryset.filter(**{name: value})
    last = 0
    while True:
        page = list(
            queryset.filter(sequence__gt=last)
            .order_by("sequence")
            .values_list(*_DB_COLUMNS)[:page_size]
        )
        for values in page:
            row = dict(zip(COLUMNS, values, strict=True))
            row["created_at"] = _iso(row["created_at"])
            yield row
        if len(page) < page_size:
            return
        last = page[-1][2]


def masked(row: dict, masker: TextMasker) -> dict:
    """The row with its free text masked (in place: rows are the export's own dicts)."""
    for name in _FREE_TEXT:
        value = row[name]
        if value:
            row[name] = masker.text(value)
    if row["changes"]:
        row["changes"] = masker.tree(row["changes"])
    return row


# --- writers ------------------------------------------------------------------------------

_ACTIVITY = {"create": 1, "read": 2, "view": 2, "update": 3, "delete": 4}
_ACTIVITY_NAMES = {1: "Create", 2: "Read", 3: "Update", 4: "Delete", 99: "Other"}
_OCSF_USER_TYPE = {"member": "User", "api_key": "Service", "agent": "Service", "system": "System"}
_DENIALS = ("denied", "deny", "rejected", "failed", "refused")


def ocsf_event(row: dict) -> dict:
    """One audit event as an OCSF 1.1 API Activity [6003] event (mapping in docs/governance.md)."""
    verb = row["action"].rsplit(".", 1)[-1]
    activity_id = next((code for word, code in _ACTIVITY.items() if verb.startswith(word)), 99)
    failed = any(word in row["action"] for word in _DENIALS)
    created = datetime.fromisoformat(row["created_at"])
    event = {
        "class_uid": 6003,
        "class_name": "API Activity",
        "category_uid": 6,
        "category_name": "Application Activity",
        "activity_id": activity_id,
        "activity_name": _ACTIVITY_NAMES[activity_id],
        "type_uid": 6003 * 100 + activity_id,
        "time": int(created.timestamp() * 1000),
        "severity_id": 1,
        "severity": "Informational",
        "status_id": 2 if failed else 1,
        "status": "Failure" if failed else "Success",
        "message": row["reason"],
        "metadata": {
            "version": "1.1.0",
            "product": {"name": "Cadre", "vendor_name": "Cadre"},
            "uid": str(row["id"]),
            "sequence": row["sequence"],
            "correlation_uid": row["trace_id"],
            "log_name": "audit",
            "original_time": row["created_at"],
            "tenant_uid": str(row["organization"]),
        },
        "actor": {
            "user": {
                "uid": row["actor_id"],
                "name": row["actor_label"],
                "type": _OCSF_USER_TYPE.get(row["actor_type"], "Other"),
            }
        },
        "api": {"operation": row["action"], "request": {"uid": row["request_id"]}},
        "resources": (
            [{"type": row["target_type"], "uid": row["target_id"], "name": row["target_label"]}]
            if row["target_type"]
            else []
        ),
        "unmapped": {
            "changes": row["changes"],
            "hash": row["hash"],
            "prev_hash": row["prev_hash"],
        },
    }
    if row["ip"] or row["user_agent"]:
        event["src_endpoint"] = {"ip": row["ip"]} if row["ip"] else {}
        if row["user_agent"]:
            event["http_request"] = {"user_agent": row["user_agent"]}
    return event


def _json_line(value: dict) -> bytes:
    return (json.dumps(value, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def _csv_line(row: dict) -> bytes:
    buffer = io.StringIO()
    values = [
        json.dumps(row[name], ensure_ascii=False, separators=(",", ":"))
        if name == "changes"
        else ("" if row[name] is None else row[name])
        for name in COLUMNS
    ]
    csv.writer(buffer, lineterminator="\n").writerow(values)
    return buffer.getvalue().encode("utf-8")


class HashedWriter:
    """Writes lines to a file while keeping its SHA-256, line count and 1,000-line block hashes."""

    def __init__(self, path: Path, name: str, fmt: str):
        self.name, self.format = name, fmt
        self.handle = open(path, "wb", buffering=1 << 20)  # noqa: SIM115 - closed in close()
        self.sha = hashlib.sha256()
        self.block = hashlib.sha256()
        self.blocks: list[str] = []
        self.lines = 0
        self.size = 0

    def write(self, data: bytes) -> None:
        self.handle.write(data)
        self.sha.update(data)
        self.block.update(data)
        self.size += len(data)
        self.lines += 1
        if self.lines % BLOCK_LINES == 0:
            self.blocks.append(self.block.hexdigest())
            self.block = hashlib.sha256()

    def close(self) -> dict:
        self.handle.close()
        if self.lines % BLOCK_LINES:
            self.blocks.append(self.block.hexdigest())
        return {
            "name": self.name,
            "format": self.format,
            "lines": self.lines,
            "bytes": self.size,
            "sha256": self.sha.hexdigest(),
            "block_lines": BLOCK_LINES,
            "block_sha256": self.blocks,
        }


@dataclass
class BundleResult:
    rows: int
    manifest: dict
    directory: Path


def write_bundle(
    directory: Path,
    rows: Iterable[dict],
    *,
    formats: Iterable[str],
    organization,
    mask: bool = True,
    description: dict | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> BundleResult:
    """Write the files, the manifest and its signature into `directory` (created)."""
    formats = [fmt for fmt in FORMATS if fmt in set(formats)]
    directory.mkdir(parents=True, exist_ok=True)
    writers: dict[str, HashedWriter] = {}
    if "csv" in formats:
        writers["csv"] = HashedWriter(directory / FILE_NAMES["csv"], FILE_NAMES["csv"], "csv")
        writers["csv"].write(",".join(COLUMNS).encode() + b"\n")
        writers["csv"].lines = 0  # the header is not a row
        writers["csv"].block = hashlib.sha256(b",".join(c.encode() for c in COLUMNS) + b"\n")
    for fmt in ("jsonl", "ocsf"):
        if fmt in formats:
            writers[fmt] = HashedWriter(directory / FILE_NAMES[fmt], FILE_NAMES[fmt], fmt)
    masker = TextMasker(organization) if mask else None
    count, first, last = 0, None, None
    contiguous = True
    try:
        for row in rows:
            if first is None:
                first = row
            elif row["sequence"] != last["sequence"] + 1:
                contiguous = False
            last = row
            out = masked(row, masker) if masker is not None else row
            if "jsonl" in writers:
                writers["jsonl"].write(_json_line(out))
            if "csv" in writers:
                writers["csv"].write(_csv_line(out))
            if "ocsf" in writers:
                writers["ocsf"].write(_json_line(ocsf_event(out)))
            count += 1
            if on_progress is not None and count % PROGRESS_EVERY == 0:
                on_progress(count)
    finally:
        files = [writers[fmt].close() for fmt in formats]
    head = AuditChainHead.objects.filter(organization=organization).first()
    manifest = {
        "format": BUNDLE_FORMAT,
        "version": 1,
        "generated_at": _iso(timezone.now()),
        "organization": {"id": organization.pk, "slug": organization.slug},
        **(description or {}),
        "masked": mask,
        "rows": count,
        "chain": {
            "first": (
                {
                    "sequence": first["sequence"],
                    "prev_hash": first["prev_hash"],
                    "hash": first["hash"],
                }
                if first
                else None
            ),
            "last": {"sequence": last["sequence"], "hash": last["hash"]} if last else None,
            "contiguous": contiguous,
            "head_at_export": (
                {"sequence": head.sequence, "hash": head.hash} if head is not None else None
            ),
        },
        "files": files,
        "signing": {
            "algorithm": "Ed25519",
            "key_id": signing.key_id(),
            "public_key_pem": signing.public_key_pem(),
        },
    }
    data = json.dumps(manifest, ensure_ascii=False, indent=2, sort_keys=True).encode("utf-8")
    (directory / MANIFEST).write_bytes(data)
    (directory / SIGNATURE).write_text(signing.sign(data) + "\n", encoding="ascii")
    if on_progress is not None:
        on_progress(count)
    return BundleResult(rows=count, manifest=manifest, directory=directory)


def tar_stream(directory: Path, *, chunk_size: int = 1 << 20) -> Iterator[bytes]:
    """The bundle's files as an uncompressed tar, generated on the fly (for the download):
    each file's header, its bytes in chunks, padding — no second copy on disk."""
    for path in sorted(directory.iterdir()):
        if not path.is_file():
            continue
        info = tarfile.TarInfo(f"{directory.name}/{path.name}")
        stat = path.stat()
        info.size, info.mtime, info.mode = stat.st_size, int(stat.st_mtime), 0o644
        yield info.tobuf(format=tarfile.PAX_FORMAT)
        with open(path, "rb") as handle:
            while chunk := handle.read(chunk_size):
                yield chunk
        if stat.st_size % tarfile.BLOCKSIZE:
            yield b"\0" * (tarfile.BLOCKSIZE - stat.st_size % tarfile.BLOCKSIZE)
    yield b"\0" * (2 * tarfile.BLOCKSIZE)


def tar_bundle(directory: Path, target: Path) -> Path:
    """Write the streamed tar to a file (offline copies, tests)."""
    with open(target, "wb") as handle:
        for chunk in tar_stream(directory):
            handle.write(chunk)
    return target


# --- services -----------------------------------------------------------------------------


def export_directory(export: AuditExport) -> Path:
    return Path(settings.DATA_DIR) / "exports" / export.organization.slug / str(export.pk)


def _clean_filters(filters: dict | None) -> dict:
    filters = dict(filters or {})
    unknown = sorted(set(filters) - set(FILTER_FIELDS))
    if unknown:
        raise InvalidInput(
            f"unknown filter {unknown[0]!r}",
            details={"filters": [f"Allowed: {', '.join(FILTER_FIELDS)}."]},
        )
    clean = {}
    for name, value in filters.items():
        if not isinstance(value, str) or not value or len(value) > 200:
            raise InvalidInput(
                f"filter {name!r} must be a non-empty string",
                details={"filters": [f"{name}: a non-empty string of at most 200 characters"]},
            )
        clean[name] = value
    return clean


@transaction.atomic
def audit_export_create(
    *,
    actor,
    formats: Iterable[str] = ("jsonl",),
    since: datetime | None = None,
    until: datetime | None = None,
    filters: dict | None = None,
    mask: bool = True,
) -> AuditExport:
    """Queue an export job (the Celery task `audit_export_run` writes it)."""
    actor.require("audit.export")
    formats = list(dict.fromkeys(formats))
    if not formats or any(fmt not in FORMATS for fmt in formats):
        raise InvalidInput(
            "formats must be a non-empty list of jsonl, csv, ocsf",
            details={"formats": [f"Choose from {', '.join(FORMATS)}."]},
        )
    if since and until and since >= until:
        raise InvalidInput("since must be before until", details={"since": ["after until"]})
    if not mask and not actor.has("policy.manage"):
        # Unmasked free text is what the masking policy exists to keep in; only those who
        # govern that policy may take it out.
        raise NotPermitted("An unmasked export needs the 'policy.manage' permission.")
    export = AuditExport.objects.create(
        organization=actor.organization,
        requested_by=actor.member,
        formats=formats,
        since=since,
        until=until or timezone.now(),
        filters=_clean_filters(filters),
        mask=mask,
    )
    audit.record(
        actor=actor,
        action="audit.export_requested",
        target=export,
        changes={
            "formats": formats,
            "since": since.isoformat() if since else None,
            "until": export.until.isoformat(),
            "filters": export.filters,
            "mask": mask,
        },
    )
    from cadre.governance.tasks import audit_export_run

    transaction.on_commit(lambda: audit_export_run.delay(export.pk))
    return export


def audit_export_run(*, export_id: int) -> AuditExport:
    """Write the bundle of one export. Idempotent: a completed export is returned as is, a
    running one whose worker died is written again from scratch (same range, same rows)."""
    from cadre.tenancy.actors import system_actor

    export = AuditExport.objects.select_related("organization").get(pk=export_id)
    if export.status == AuditExport.Status.COMPLETED:
        return export
    organization = export.organization
    # Events committed before now are sealed into the chain first: the export holds the chain.
    audit.seal(organization=organization)
    head = AuditChainHead.objects.filter(organization=organization).first()
    max_sequence = head.sequence if head is not None else 0
    base = AuditEvent.objects.filter(organization=organization, sequence__lte=max_sequence)
    if export.since:
        base = base.filter(created_at__gte=export.since)
    if export.until:
        base = base.filter(created_at__lt=export.until)
    total = base.filter(**_orm_filters(export.filters)).count()
    AuditExport.objects.filter(pk=export.pk).update(
        status=AuditExport.Status.RUNNING,
        started_at=timezone.now(),
        total_rows=total,
        rows_written=0,
        error="",
    )
    directory = export_directory(export)
    if directory.exists():
        shutil.rmtree(directory)

    def progress(rows: int) -> None:
        AuditExport.objects.filter(pk=export.pk).update(rows_written=rows)

    try:
        result = write_bundle(
            directory,
            export_rows(
                organization,
                since=export.since,
                until=export.until,
                filters=export.filters,
                max_sequence=max_sequence,
            ),
            formats=export.formats,
            organization=organization,
            mask=export.mask,
            description={
                "export_id": export.pk,
                "range": {
                    "since": _iso(export.since) if export.since else None,
                    "until": _iso(export.until) if export.until else None,
                },
                "filters": export.filters,
            },
            on_progress=progress,
        )
    except Exception as error:
        AuditExport.objects.filter(pk=export.pk).update(
            status=AuditExport.Status.FAILED, error=str(error)[:2000], finished_at=timezone.now()
        )
        raise
    with transaction.atomic():
        AuditExport.objects.filter(pk=export.pk).update(
            status=AuditExport.Status.COMPLETED,
            rows_written=result.rows,
            bundle_path=str(directory.relative_to(settings.DATA_DIR)),
            manifest={k: v for k, v in result.manifest.items() if k != "files"}
            | {
                "files": [
                    {k: v for k, v in f.items() if k != "block_sha256"}
                    for f in result.manifest["files"]
                ]
            },
            finished_at=timezone.now(),
        )
        audit.record(
            actor=system_actor(organization, label="audit export"),
            action="audit.export_completed",
            target=("auditexport", export.pk),
            organization=organization,
            changes={
                "rows": result.rows,
                "files": {f["name"]: f["sha256"] for f in result.manifest["files"]},
            },
        )
    export.refresh_from_db()
    return export


def _orm_filters(filters: dict) -> dict:
    clean = {}
    for name, value in (filters or {}).items():
        if name == "action" and str(value).endswith("."):
            clean["action__startswith"] = value
        else:
            clean[name] = value
    return clean


def bundle_directory(export: AuditExport) -> Path | None:
    """The finished bundle's directory, or None (not finished, or removed from disk)."""
    if export.status != AuditExport.Status.COMPLETED or not export.bundle_path:
        return None
    path = Path(settings.DATA_DIR) / export.bundle_path
    return path if (path / MANIFEST).exists() else None


# --- verification (offline) ---------------------------------------------------------------


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


def remove_bundle(directory: Path) -> None:
    if directory.exists():
        shutil.rmtree(directory)


def stream_events_jsonl(organization, *, since=None, mask: bool = True, out=None) -> int:
    """Write events as JSON lines to `out` (stdout for a SIEM collector); returns the count."""
    import sys

    out = out or sys.stdout
    masker = TextMasker(organization) if mask else None
    count = 0
    for row in export_rows(organization, since=since):
        row = masked(row, masker) if masker is not None else row
        out.write(json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n")
        count += 1
    if hasattr(out, "flush"):
        out.flush()
    return count
