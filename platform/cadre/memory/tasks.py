"""Celery tasks for memory: enrich, dedup, organize, purge, re-embed, retention.

Each task takes the id of its `MemoryTask` record, marks it in progress / completed / failed
(attempts and error visible at /api/v1/memory-tasks/), calls one service, and is idempotent: a
completed record is never run twice, and the services themselves tolerate a repeat. Failures
are retried with exponential backoff and jitter; the record says `failed` only once the last
retry failed.
"""

from __future__ import annotations

import logging

from celery import shared_task
from django.db import transaction
from django.utils import timezone

from cadre.memory import embeddings, reembed, schedule, services
from cadre.memory.models import Memory, MemoryTask
from cadre.tenancy.models import Organization

logger = logging.getLogger(__name__)

RETRY = {
    "bind": True,
    "autoretry_for": (Exception,),
    "retry_backoff": 2,
    "retry_backoff_max": 300,
    "retry_jitter": True,
    "max_retries": 5,
    "acks_late": True,
}

# Celery beat entries (defined in schedule.py so settings.py can import them without Django).
BEAT_SCHEDULE = schedule.BEAT_SCHEDULE


def _begin(task_id: int) -> MemoryTask | None:
    with transaction.atomic():
        record = MemoryTask.objects.select_for_update().filter(pk=task_id).first()
        if record is None or record.status == MemoryTask.Status.COMPLETED:
            return None
        record.status = MemoryTask.Status.IN_PROGRESS
        record.attempts += 1
        record.updated_at = timezone.now()
        record.save(update_fields=["status", "attempts", "updated_at"])
    return record


def _finish(record: MemoryTask, result: dict) -> None:
    record.status = MemoryTask.Status.COMPLETED
    record.result = result
    record.error = ""
    record.updated_at = timezone.now()
    record.save(update_fields=["status", "result", "error", "updated_at"])


def _fail(task, record: MemoryTask, error: Exception) -> None:
    final = task.request.retries >= (task.max_retries or 0) or task.request.is_eager
    record.status = MemoryTask.Status.FAILED if final else MemoryTask.Status.WAITING
    record.error = f"{type(error).__name__}: {error}"[:2000]
    record.updated_at = timezone.now()
    record.save(update_fields=["status", "error", "updated_at"])


def run_recorded(task, task_id: int, work) -> dict | None:
    """`work(record)` for the MemoryTask `task_id`, the record marked in progress, then
    completed with the result or failed (waiting while `task` has retries left); None when the
    record is gone or already completed."""
    record = _begin(task_id)
    if record is None:
        return None
    try:
        result = work(record)
    except Exception as error:
        _fail(task, record, error)
        raise
    _finish(record, result or {})
    return result


def _memory(record: MemoryTask) -> Memory | None:
    return Memory.objects.filter(pk=record.memory_id).select_related("organization").first()


@shared_task(name="cadre.memory.tasks.memory_enrich", **RETRY)
def memory_enrich(self, task_id: int) -> dict | None:
    """Embed the memory under the active model, then queue its dedup."""

    def work(record: MemoryTask) -> dict:
        memory = _memory(record)
        if memory is None or memory.status == Memory.Status.DELETED:
            return {"skipped": "memory gone or deleted"}
        model = embeddings.active_model(memory.organization_id)
        written = embeddings.embed_memories([memory], model)
        # A re-embed of the organization in progress must not miss memories written while it
        # runs. (A failure here is not the memory's: the re-embed picks it up before switching.)
        for building in embeddings.building_models(memory.organization_id):
            try:
                embeddings.embed_memories([memory], building)
            except Exception:
                logger.warning(
                    "embedding memory %s under building model %s failed",
                    memory.pk,
                    building.pk,
                    exc_info=True,
                )
        with transaction.atomic():
            services.enqueue(
                MemoryTask.Kind.DEDUP,
                organization=memory.organization,
                memory=memory,
                key=f"dedup:{memory.pk}:v{memory.version}",
            )
        return {"model": model.pk, "embedded": written}

    return run_recorded(self, task_id, work)


@shared_task(name="cadre.memory.tasks.memory_dedup", **RETRY)
def memory_dedup(self, task_id: int) -> dict | None:
    """Near-duplicate + judge stages, then organization for what is still active."""

    def work(record: MemoryTask) -> dict:
        memory = _memory(record)
        if memory is None:
            return {"skipped": "memory gone"}
        outcome = services.memory_dedup(memory=memory)
        memory.refresh_from_db(fields=["status", "kind"])
        if memory.status == Memory.Status.ACTIVE and memory.kind == "tool_trajectory":
            with transaction.atomic():
                services.enqueue(
                    MemoryTask.Kind.ORGANIZE,
                    organization=memory.organization,
                    memory=memory,
                    key=f"organize:{memory.pk}:v{memory.version}",
                )
        return outcome

    return run_recorded(self, task_id, work)


@shared_task(name="cadre.memory.tasks.memory_organize", **RETRY)
def memory_organize(self, task_id: int) -> dict | None:
    def work(record: MemoryTask) -> dict:
        memory = _memory(record)
        if memory is None or memory.status != Memory.Status.ACTIVE:
            return {"skipped": "memory not active"}
        return services.memory_organize(memory=memory)

    return run_recorded(self, task_id, work)


@shared_task(name="cadre.memory.tasks.memory_purge", **RETRY)
def memory_purge(self, task_id: int) -> dict | None:
    """Redact the deleted memories' run copies in batches, then purge their content. While a
    memory is deferred (more sessions to redact, or a run in progress) the record stays
    `waiting` with its progress in `result`, and the task sends itself again."""
    record = _begin(task_id)
    if record is None:
        return None
    try:
        ids = [int(pk) for pk in record.params.get("memory_ids", [])]
        result = services.memory_purge(
            organization=record.organization, memory_ids=ids, reason="purge after delete"
        )
    except Exception as error:
        _fail(self, record, error)
        raise
    done = dict(record.result or {})
    done["purged"] = sorted(set(done.get("purged", [])) | set(result["purged"]))
    done["embeddings_removed"] = done.get("embeddings_removed", 0) + result["embeddings_removed"]
    done["deferred"] = result["deferred"]
    if not result["deferred"]:
        _finish(record, done)
        return done
    record.status = MemoryTask.Status.WAITING
    record.result = done
    record.updated_at = timezone.now()
    record.save(update_fields=["status", "result", "updated_at"])
    if result["retry_in"] and self.request.is_eager:
        # In process (tests, CELERY_TASK_ALWAYS_EAGER) there is no later: the retention
        # sweep resumes deletions that are still waiting after STALE_DELETION.
        return done
    memory_purge.apply_async((task_id,), countdown=result["retry_in"] or 0)
    return done


@shared_task(name="cadre.memory.tasks.memory_reembed", **RETRY)
def memory_reembed(self, task_id: int) -> dict | None:
    """Embed every memory under a new model (resumable) and switch to it when complete, unless
    the organization holds the switch for a person (see memory.reembed.reembed_task_run)."""

    def work(record: MemoryTask) -> dict:
        return reembed.reembed_task_run(record)

    return run_recorded(self, task_id, work)


@shared_task(
    name="cadre.memory.tasks.memory_retention_sweep",
    bind=True,
    autoretry_for=(Exception,),
    retry_backoff=2,
    retry_backoff_max=300,
    retry_jitter=True,
    max_retries=3,
)
def memory_retention_sweep(self) -> dict:
    """Beat job: purge expired memories (each purge audited per organization, ids only)."""
    result = services.memory_retention_sweep()
    now = timezone.now()
    for organization_id, count in result["purged_by_organization"].items():
        # A visible record per organization of what the sweep did (ids are in the audit log).
        MemoryTask.objects.create(
            organization=Organization.objects.get(pk=int(organization_id)),
            kind=MemoryTask.Kind.PURGE,
            status=MemoryTask.Status.COMPLETED,
            attempts=1,
            idempotency_key=f"retention:{organization_id}:{now.isoformat()}",
            params={"origin": "retention"},
            result={"purged": count},
        )
    return result
