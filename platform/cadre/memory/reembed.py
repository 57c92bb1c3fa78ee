"""Re-embedding every memory under a new embedding model, resumably, then switching to it;
and what the console shows of it (the active model, coverage, starting a re-embed).

Shared by `manage.py memory_reembed` (with a tqdm progress bar) and the `memory_reembed` Celery
task. Resumable because only memories still missing a vector under the model are embedded
(`embeddings.missing_embeddings`); the switch (`embeddings.activate`) happens only when none is
missing, atomically, so search never runs against a half-built model. Memories written while a
re-embed runs are embedded under every `building` model by the enrich task as well.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.db import transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from cadre.errors import Conflict
from cadre.governance import audit
from cadre.memory import embeddings
from cadre.memory.models import EmbeddingModel, MemoryEmbedding, MemoryTask
from cadre.memory.services.common import enqueue

ACTIVATE_ATTEMPTS = 5
OPEN = (MemoryTask.Status.WAITING, MemoryTask.Status.IN_PROGRESS)


def reembed(
    model_id: str,
    *,
    activate: bool = True,
    batch_size: int = 256,
    on_start: Callable[[int], None] | None = None,
    on_progress: Callable[[int], None] | None = None,
    limit: int | None = None,
) -> dict:
    """Embed what is missing under `model_id`; activate it when complete (if asked).

    `limit` stops after that many memories (to test or spread the work); a later call resumes.
    """
    model = EmbeddingModel.objects.get(pk=model_id)
    embeddings.ensure_index(model)
    done = 0
    activated = False
    for _attempt in range(ACTIVATE_ATTEMPTS):
        missing = embeddings.missing_embeddings(model)
        total = missing.count()
        if on_start is not None:
            on_start(total)
        while limit is None or done < limit:
            size = batch_size if limit is None else min(batch_size, limit - done)
            batch = list(embeddings.missing_embeddings(model)[:size])
            if not batch:
                break
            embeddings.embed_memories(batch, model, batch_size=size)
            done += len(batch)
            if on_progress is not None:
                on_progress(len(batch))
        if limit is not None and done >= limit:
            break
        if not activate:
            break
        try:
            embeddings.activate(model)
            activated = True
            break
        except embeddings.EmbeddingModelIncomplete:
            continue  # memories were written meanwhile: embed those too, then try again
    remaining = embeddings.missing_embeddings(model).count()
    model.refresh_from_db()
    return {
        "model_id": model.pk,
        "embedded": done,
        "remaining": remaining,
        "activated": activated,
        "status": model.status,
    }


# --- the console's view of it ------------------------------------------------------------


@dataclass(frozen=True)
class EmbeddingStatus:
    active: EmbeddingModel | None
    configured_id: str  # the model the environment names (a re-embed moves search to it)
    target: EmbeddingModel | None  # the configured model, once registered (a re-embed fills it)
    total: int  # the organization's memories that must carry a vector
    embedded: int  # of those, how many have one under `target`
    task: MemoryTask | None  # the latest re-embed of the organization

    @property
    def coverage(self) -> float:
        return self.embedded / self.total if self.total else 1.0

    @property
    def running(self) -> bool:
        return self.task is not None and self.task.status in OPEN


def embedding_status(organization) -> EmbeddingStatus:
    """The embedding model search uses and the share of the organization's memories embedded
    under the configured model — the one a re-embed fills; none while it is not registered
    yet. Nothing is registered or probed here."""
    active = EmbeddingModel.objects.filter(status=EmbeddingModel.Status.ACTIVE).first()
    configured_id = embeddings.configured().model_id
    target = EmbeddingModel.objects.filter(pk=configured_id).first()
    memories = embeddings.embeddable_memories().filter(organization=organization)
    total = memories.count()
    embedded = 0
    if target is not None:
        embedded = memories.filter(
            Exists(MemoryEmbedding.objects.filter(memory=OuterRef("pk"), model=target))
        ).count()
    task = (
        MemoryTask.objects.filter(organization=organization, kind=MemoryTask.Kind.REEMBED)
        .order_by("-created_at", "-pk")
        .first()
    )
    return EmbeddingStatus(active, configured_id, target, total, embedded, task)


@transaction.atomic
def reembed_start(*, actor) -> MemoryTask:
    """Queue a re-embed under the configured model (registered on first use), which becomes
    the active one when every memory has its vector. One at a time per organization."""
    actor.require("memory.manage")
    running = (
        MemoryTask.objects.select_for_update()
        .filter(organization=actor.organization, kind=MemoryTask.Kind.REEMBED, status__in=OPEN)
        .first()
    )
    if running is not None:
        raise Conflict("A re-embed is already running.", code="reembed_running")
    model = embeddings.configured_model()
    task = enqueue(
        MemoryTask.Kind.REEMBED,
        organization=actor.organization,
        memory=None,
        key=f"reembed:{actor.organization.pk}:{model.pk}:{timezone.now().isoformat()}",
        params={"model_id": model.pk},
    )
    audit.record(
        actor=actor,
        action="memory.reembed_start",
        target=task,
        after={"model": model.pk, "dimension": model.dimension},
    )
    return task
