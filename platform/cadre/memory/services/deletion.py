"""Deleting memories (by id, by filter), purging their content, and the retention sweep."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from opentelemetry import trace

from cadre.errors import InvalidInput, NotFound
from cadre.governance import audit
from cadre.memory import selectors
from cadre.memory.models import (
    Memory,
    MemoryEmbedding,
    MemoryTask,
    MemoryVersion,
)
from cadre.memory.services.common import (
    audit_view,
    enqueue,
    lock,
    require_modify,
    require_write,
    write_version,
)

tracer = trace.get_tracer(__name__)


# --- delete, purge, retention ----------------------------------------------------------------


def soft_delete(actor, memory: Memory, reason: str) -> Memory:
    old_status = memory.status
    now = timezone.now()
    memory.status = Memory.Status.DELETED
    memory.deleted_at = now
    memory.version += 1
    memory.updated_at = now
    memory.save(update_fields=["status", "deleted_at", "version", "updated_at"])
    write_version(
        memory,
        change=MemoryVersion.Change.DELETION,
        actor=actor,
        reason=reason,
        old_status=old_status,
        new_status=memory.status,
    )
    # Vectors go now, not at purge time: nothing may find a deleted memory by similarity.
    MemoryEmbedding.objects.filter(memory=memory).delete()
    return memory


def enqueue_purge(organization, ids: list[int], origin: str) -> MemoryTask | None:
    if not ids:
        return None
    return enqueue(
        MemoryTask.Kind.PURGE,
        organization=organization,
        memory=Memory.objects.get(pk=ids[0]) if len(ids) == 1 else None,
        key=f"purge:{origin}:{min(ids)}-{max(ids)}:{len(ids)}:{timezone.now().timestamp()}",
        params={"memory_ids": ids},
    )


@transaction.atomic
@tracer.start_as_current_span("memory.delete")
def memory_delete(*, actor, memory: Memory, reason: str = "") -> Memory:
    """Soft delete (hidden from search, get, list, export and context assembly at once; its
    vectors removed), then a purge task removes its content."""
    require_write(actor)
    memory = lock(memory)
    if memory.status == Memory.Status.DELETED:
        raise NotFound("Memory not found.")
    require_modify(actor, memory)
    before = audit_view(memory)
    soft_delete(actor, memory, reason or "deleted")
    audit.record(
        actor=actor,
        action="memory.delete",
        target=memory,
        before=before,
        after=audit_view(memory),
        reason="deleted by request" if not reason else "deleted",
    )
    enqueue_purge(memory.organization, [memory.pk], f"delete:{memory.pk}")
    return memory


@dataclass
class BulkDeleteResult:
    deleted: list[int]
    skipped: int
    task: MemoryTask | None


@transaction.atomic
@tracer.start_as_current_span("memory.delete_by_filter")
def memory_delete_by_filter(
    *,
    actor,
    scope_keys: list[str] | None = None,
    tags: list[str] | None = None,
    kinds: list[str] | None = None,
    since=None,
    until=None,
    conversation_id: str | None = None,
    reason: str = "",
) -> BulkDeleteResult:
    """Soft-delete every memory the actor may change that matches the filter (at least one
    criterion), in one transaction and one audit event listing the ids."""
    require_write(actor)
    if not any([scope_keys, tags, kinds, since, until, conversation_id]):
        raise InvalidInput(
            "Give at least one filter (scope, tags, kinds, since, until, conversation_id).",
            details={"filter": ["Required."]},
        )
    queryset = selectors.memory_list(
        actor,
        scope_keys=scope_keys,
        kinds=kinds,
        tags=tags,
        since=since,
        until=until,
        conversation_id=conversation_id,
        statuses=[Memory.Status.ACTIVE, Memory.Status.SUPERSEDED, Memory.Status.ARCHIVED],
    ).select_for_update()
    deleted, skipped = [], 0
    for memory in queryset.order_by("pk"):
        if not selectors.can_modify(actor, memory):
            skipped += 1
            continue
        soft_delete(actor, memory, reason or "deleted by filter")
        deleted.append(memory.pk)
    if deleted:
        audit.record(
            actor=actor,
            action="memory.delete_by_filter",
            target=("memory", "filter", f"{len(deleted)} memories"),
            changes={
                "memory_ids": deleted,
                "count": len(deleted),
                "skipped": skipped,
                "filter": {
                    "scope_keys": scope_keys or [],
                    "tags_count": len(tags or []),
                    "kinds": kinds or [],
                    "since": since,
                    "until": until,
                },
            },
            reason="delete by filter",
        )
    task = enqueue_purge(actor.organization, deleted, "filter")
    return BulkDeleteResult(deleted=deleted, skipped=skipped, task=task)


@transaction.atomic
@tracer.start_as_current_span("memory.purge")
def memory_purge(
    *, organization, memory_ids: list[int] | None = None, actor=None, reason: str = "purge"
) -> dict:
    """Remove the content of deleted memories for good: text, search document, attributes,
    tags, hash, history text and vectors. The row (id, scope, kind, dates) stays so records
    that point at it still resolve. Idempotent. Audited with ids, never content."""
    from cadre.tenancy.actors import system_actor

    actor = actor or system_actor(organization, label="memory purge")
    queryset = Memory.objects.select_for_update().filter(
        organization=organization, status=Memory.Status.DELETED, purged_at__isnull=True
    )
    if memory_ids is not None:
        queryset = queryset.filter(pk__in=memory_ids)
    rows = list(queryset.order_by("pk"))
    if not rows:
        return {"purged": [], "embeddings_removed": 0}
    ids = [row.pk for row in rows]
    embeddings_removed, _ = MemoryEmbedding.objects.filter(memory_id__in=ids).delete()
    MemoryVersion.objects.filter(memory_id__in=ids).update(
        old_content="", new_content="", old_attributes={}, new_attributes={}, reason="[purged]"
    )
    now = timezone.now()
    Memory.objects.filter(pk__in=ids).update(
        content="",
        search_text="",
        attributes={},
        tags=[],
        content_hash="",
        purged_at=now,
        updated_at=now,
        provenance=[],
        source_ref={},
    )
    audit.record(
        actor=actor,
        action="memory.purge",
        organization=organization,
        target=("memory", ids[0] if len(ids) == 1 else "batch", f"{len(ids)} memories"),
        changes={
            "memory_ids": ids,
            "count": len(ids),
            "embeddings_removed": embeddings_removed,
            "removed": [
                "content",
                "search_text",
                "attributes",
                "tags",
                "content_hash",
                "provenance",
                "source_ref",
                "history_text",
                "embeddings",
            ],
        },
        reason=reason,
    )
    return {"purged": ids, "embeddings_removed": embeddings_removed}


def memory_retention_sweep(*, now: datetime | None = None, batch: int = 500) -> dict:
    """Delete and purge every memory past its `expires_at`, per organization, in batches."""
    from cadre.tenancy.actors import system_actor

    now = now or timezone.now()
    totals: dict[str, int] = {}
    expired = Memory.objects.filter(expires_at__lte=now).filter(
        ~Q(status=Memory.Status.DELETED) | Q(purged_at__isnull=True)
    )
    organization_ids = list(expired.values_list("organization_id", flat=True).distinct())
    for organization_id in organization_ids:
        while True:
            with transaction.atomic():
                rows = list(
                    expired.filter(organization_id=organization_id)
                    .select_for_update(skip_locked=True)
                    .select_related("organization")
                    .order_by("pk")[:batch]
                )
                if not rows:
                    break
                organization = rows[0].organization
                actor = system_actor(organization, label="memory retention")
                for memory in rows:
                    if memory.status != Memory.Status.DELETED:
                        soft_delete(actor, memory, "retention: expired")
                result = memory_purge(
                    organization=organization,
                    memory_ids=[row.pk for row in rows],
                    actor=actor,
                    reason="retention: expired",
                )
                totals[str(organization_id)] = totals.get(str(organization_id), 0) + len(
                    result["purged"]
                )
                if len(rows) < batch:
                    break
    return {"purged_by_organization": totals, "purged": sum(totals.values())}
