"""Export jobs: requesting an export (audited, queued), writing its bundle in the worker and
storing it in the "exports" storage, expiring it."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterable
from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from cadre.errors import InvalidInput, NotPermitted
from cadre.governance import audit
from cadre.governance.export.bundle import (
    StoredBundle,
    exports_storage,
    remove_bundle,
    store_bundle,
    write_bundle,
)
from cadre.governance.export.formats import FORMATS
from cadre.governance.export.rows import export_rows, iso
from cadre.governance.models import AuditChainHead, AuditEvent, AuditExport
from cadre.queues import enqueue
from cadre.tenancy.actors import system_actor

FILTER_FIELDS = ("action", "actor_type", "actor_id", "target_type", "target_id", "trace_id")


def export_key(export: AuditExport) -> str:
    """Where the bundle's files are in the "exports" storage (AuditExport.bundle_path)."""
    return f"exports/{export.organization.slug}/{export.pk}"


def _clean_filters(filters: dict | None) -> dict:
    filters = dict(filters or {})
    unknown = sorted(set(filters) - set(FILTER_FIELDS))
    if unknown:
        raise InvalidInput(
            _("unknown filter %(unknown)r") % {"unknown": unknown[0]},
            details={"filters": [_("Allowed: %(fields)s.") % {"fields": ", ".join(FILTER_FIELDS)}]},
        )
    clean = {}
    for name, value in filters.items():
        if not isinstance(value, str) or not value or len(value) > 200:
            raise InvalidInput(
                _("filter %(name)r must be a non-empty string") % {"name": name},
                details={
                    "filters": [
                        _("%(name)s: a non-empty string of at most 200 characters") % {"name": name}
                    ]
                },
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
            _("formats must be a non-empty list of jsonl, csv, ocsf"),
            details={"formats": [_("Choose from %(formats)s.") % {"formats": ", ".join(FORMATS)}]},
        )
    if since and until and since >= until:
        raise InvalidInput(_("since must be before until"), details={"since": [_("after until")]})
    if not mask and not actor.has("policy.manage"):
        # Unmasked free text is what the masking policy exists to keep in; only those who
        # govern that policy may take it out.
        raise NotPermitted(_("An unmasked export needs the 'policy.manage' permission."))
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

    transaction.on_commit(lambda: enqueue("cadre.governance.tasks.audit_export_run", export.pk))
    return export


def audit_export_run(*, export_id: int) -> AuditExport:
    """Write the bundle of one export. Idempotent: a completed export is returned as is, a
    running one whose worker died is written again from scratch (same range, same rows)."""
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
    # Written on this machine's disk (CADRE_DATA_DIR, scratch space: not /tmp, which may be
    # memory), then copied to the "exports" storage, which every machine reads: the download
    # may be served by another one.
    scratch = Path(settings.DATA_DIR) / "tmp"
    scratch.mkdir(parents=True, exist_ok=True)
    directory = Path(tempfile.mkdtemp(prefix=f"export-{export.pk}-", dir=scratch)) / str(export.pk)

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
                    "since": iso(export.since) if export.since else None,
                    "until": iso(export.until) if export.until else None,
                },
                "filters": export.filters,
            },
            on_progress=progress,
        )
        stored = store_bundle(directory, export_key(export))
    except Exception as error:
        AuditExport.objects.filter(pk=export.pk).update(
            status=AuditExport.Status.FAILED, error=str(error)[:2000], finished_at=timezone.now()
        )
        raise
    finally:
        shutil.rmtree(directory.parent, ignore_errors=True)
    with transaction.atomic():
        AuditExport.objects.filter(pk=export.pk).update(
            status=AuditExport.Status.COMPLETED,
            rows_written=result.rows,
            bundle_path=stored.key,
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


def stored_bundle(export: AuditExport) -> StoredBundle | None:
    """The finished bundle in the "exports" storage, or None (not finished, expired, or
    removed from the storage)."""
    if export.status != AuditExport.Status.COMPLETED or not export.bundle_path:
        return None
    bundle = StoredBundle(key=export.bundle_path, storage=exports_storage())
    return bundle if bundle.exists() else None


def audit_exports_expire(now=None) -> int:
    """Delete the bundles finished more than AUDIT_EXPORT_RETENTION_DAYS ago from the storage
    and mark their jobs expired (audited). Returns how many expired."""
    now = now or timezone.now()
    cutoff = now - timedelta(days=settings.AUDIT_EXPORT_RETENTION_DAYS)
    overdue = AuditExport.objects.filter(
        status=AuditExport.Status.COMPLETED, finished_at__lt=cutoff
    ).select_related("organization")
    expired = 0
    for export in overdue.iterator():
        if export.bundle_path:
            remove_bundle(StoredBundle(key=export.bundle_path, storage=exports_storage()))
        with transaction.atomic():
            changed = AuditExport.objects.filter(
                pk=export.pk, status=AuditExport.Status.COMPLETED
            ).update(status=AuditExport.Status.EXPIRED, bundle_path="")
            if not changed:
                continue
            audit.record(
                actor=system_actor(export.organization, label="audit export expiry"),
                action="audit.export_expired",
                target=("auditexport", export.pk),
                organization=export.organization,
                changes={"retention_days": settings.AUDIT_EXPORT_RETENTION_DAYS},
            )
        expired += 1
    return expired
