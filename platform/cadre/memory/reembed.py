"""Re-embedding an organization's memories under a new embedding model, resumably, then
switching its search to it; and what the console shows of it (the active model, coverage,
starting a re-embed).

Everything here is one organization's: its re-embed walks its memories only, its switch
changes its search only and is audited in it (another organization's model, vectors, search
and audit trail are untouched). Shared by `manage.py memory_reembed` (the instance operator's,
run organization by organization, with a tqdm progress bar) and the `memory_reembed` Celery
task. Resumable because only memories still missing a vector under the model are embedded
(`embeddings.missing_embeddings`); the switch (`embeddings.activate`) happens only when none is
missing, atomically, so search never runs against a half-built model. Memories written while a
re-embed runs are embedded under the organization's `building` models by the enrich task too.

An organization may hold the switch for a person (`cadre.memory.activation`): its re-embed then
fills the vectors without activating, the apps above memory are told (evaluation replays the
retrieval suite old vs new and reports recall@k), and `embedding_activate` switches when an
admin asks — refused by a registered gate unless its check passes or is overridden.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.db import transaction
from django.db.models import Exists, F, OuterRef
from django.utils import timezone
from django.utils.translation import gettext as _

from cadre.errors import Conflict, InvalidInput, NotFound
from cadre.governance import audit
from cadre.memory import activation, embeddings, turns
from cadre.memory.models import (
    EmbeddingModel,
    MemoryEmbedding,
    MemoryTask,
    OrganizationEmbeddingModel,
)
from cadre.memory.services.common import enqueue
from cadre.tenancy.actors import system_actor

ACTIVATE_ATTEMPTS = 5
OPEN = (MemoryTask.Status.WAITING, MemoryTask.Status.IN_PROGRESS)


def reembed(
    model_id: str,
    organization,
    *,
    activate: bool = True,
    actor=None,
    batch_size: int = 256,
    on_start: Callable[[int], None] | None = None,
    on_progress: Callable[[int], None] | None = None,
    limit: int | None = None,
) -> dict:
    """Embed what `organization`'s memories miss under `model_id`; make it the organization's
    active model when complete (if asked), audited in the organization as `actor` (default: the
    platform itself).

    `limit` stops after that many memories (to test or spread the work); a later call resumes.
    """
    model = EmbeddingModel.objects.get(pk=model_id)
    embeddings.ensure_index(model)
    if embeddings.current_model(organization) != model:
        embeddings.mark_building(model, organization)
    done = 0
    activated = False
    for _attempt in range(ACTIVATE_ATTEMPTS):
        missing = embeddings.missing_embeddings(model, organization)
        total = missing.count()
        if on_start is not None:
            on_start(total)
        while limit is None or done < limit:
            size = batch_size if limit is None else min(batch_size, limit - done)
            batch = list(embeddings.missing_embeddings(model, organization)[:size])
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
            _switch(organization, model, actor=actor)
            activated = True
            break
        except embeddings.EmbeddingModelIncomplete:
            continue  # memories were written meanwhile: embed those too, then try again
    remaining = embeddings.missing_embeddings(model, organization).count()
    use = OrganizationEmbeddingModel.objects.filter(organization=organization, model=model).first()
    return {
        "model_id": model.pk,
        "embedded": done,
        "remaining": remaining,
        "activated": activated,
        "status": use.status if use is not None else "",
    }


def refresh_turn_vectors(
    model_id: str,
    organization,
    *,
    batch_size: int = 256,
    after_id: int = 0,
    on_progress: Callable[[int], None] | None = None,
) -> dict:
    """Recompute in place `organization`'s conversation-turn vectors under `model_id`: after
    an upgrade that changed how a turn is embedded (turns.VIEWS), the vectors already stored
    keep the old views until this runs (a re-embed only fills missing ones). Each batch's new
    vectors replace the old ones in one transaction, so search never finds a turn without one;
    resumable with `after_id` (the last memory id done is returned).

    A turn whose views changed while its batch was embedded (a neighbour deleted, edited or
    written) is skipped: that change dropped its vector and queued its re-embedding, and the
    UPDATE only touches a row that still exists, so no vector gets back a removed turn's words.
    """
    model = EmbeddingModel.objects.get(pk=model_id)
    provider = embeddings.provider_for(model)
    done = skipped = 0
    last = after_id
    while True:
        batch = [
            memory
            for memory in embeddings.embeddable_memories(organization)
            .filter(pk__gt=last, conversation_id__gt="", attributes__has_key="turn")
            .filter(Exists(MemoryEmbedding.objects.filter(memory=OuterRef("pk"), model=model)))
            .order_by("pk")[:batch_size]
        ]
        if not batch:
            break
        last = batch[-1].pk
        memories = [memory for memory in batch if turns.turn_position(memory) is not None]
        views = embeddings.embedding_views(memories)
        vectors = embeddings.embed_views(provider, views) if memories else []
        with transaction.atomic():
            # The turns as they stand now (an edit of the turn itself counts as a change too).
            fresh = embeddings.embeddable_memories(organization).in_bulk(
                [memory.pk for memory in memories]
            )
            now = embeddings.embedding_views([fresh.get(memory.pk, memory) for memory in memories])
            for memory, before, current, vector in zip(memories, views, now, vectors, strict=True):
                if memory.pk not in fresh or before != current:
                    skipped += 1
                    continue
                done += MemoryEmbedding.objects.filter(memory=memory, model=model).update(
                    embedding=vector
                )
        if on_progress is not None:
            on_progress(len(batch))
    return {"model_id": model.pk, "refreshed": done, "skipped": skipped, "last_id": last}


@transaction.atomic
def _switch(organization, model: EmbeddingModel, *, actor=None) -> None:
    """A completed re-embed switches the organization's search, audited in it (nothing when
    the model is already its active one)."""
    previous = embeddings.current_model(organization)
    embeddings.activate(model, organization)
    if previous == model:
        return
    audit.record(
        actor=actor or system_actor(organization, label="re-embed"),
        action="memory.embedding_activate",
        target=("embedding_model", model.pk, str(model)),
        before={"active": previous.pk if previous else None},
        after={"active": model.pk},
        organization=organization,
    )


def reembed_task_run(record: MemoryTask) -> dict:
    """The `memory_reembed` task's work: re-embed under the task's model; activate it unless
    the task's organization holds the switch — then, once every vector is there, tell the
    apps above memory (their answers are kept under `checks`)."""
    held = activation.activation_held(record.organization)
    result = reembed(record.params["model_id"], record.organization, activate=not held)
    result["held"] = held
    if held and result["remaining"] == 0:
        model = EmbeddingModel.objects.get(pk=record.params["model_id"])
        result["checks"] = [
            answer for answer in activation.REEMBED_FILLED.notify(record, model) if answer
        ]
    return result


def embedding_models(organization):
    """The embedding models `organization` has used or is filling, with its own status of
    each (another organization's re-embeds and switches are not among them)."""
    return (
        OrganizationEmbeddingModel.objects.filter(organization=organization)
        .select_related("model")
        .order_by(F("activated_at").desc(nulls_last=True), "model_id")
    )


def embedding_activate(
    *, actor, model_id: str, override_gate: str = ""
) -> OrganizationEmbeddingModel:
    """Switch the actor's organization's search to `model_id` now (`model.manage`: changing
    the model is model management, not a memory write): refused while one of its memories
    lacks a vector (409 `reembed_incomplete`) or by a registered gate (evaluation's
    `embedding_activate`: 409 `evaluation_gate` unless overridden with a reason); a model its
    re-embeds never filled is unknown to it (404). The gate's override, the switch and its
    audit event commit together or not at all; no other organization's search changes."""
    actor.require("model.manage")
    organization = actor.organization
    use = embedding_models(organization).filter(model_id=model_id).first()
    if use is None:
        raise NotFound(_("No such embedding model."))
    model = use.model
    if use.status == OrganizationEmbeddingModel.Status.ACTIVE:
        raise InvalidInput(
            _("%(pk)s is already the active model.") % {"pk": model.pk}, code="already_active"
        )
    embeddings.ensure_index(model)  # outside the transaction: built CONCURRENTLY
    with transaction.atomic():
        previous = embeddings.current_model(organization)
        activation.activation_check(actor=actor, model=model, override_reason=override_gate)
        try:
            use = embeddings.activate(model, organization)
        except embeddings.EmbeddingModelIncomplete as error:
            raise Conflict(str(error), code="reembed_incomplete") from None
        audit.record(
            actor=actor,
            action="memory.embedding_activate",
            target=("embedding_model", model.pk, str(model)),
            before={"active": previous.pk if previous else None},
            after={"active": model.pk},
            reason=(override_gate or "").strip()[:500],
        )
    return use


# --- the console's view of it ------------------------------------------------------------


@dataclass(frozen=True)
class EmbeddingStatus:
    active: EmbeddingModel | None
    configured_id: str  # the model the environment names (a re-embed moves search to it)
    # the configured model, once a re-embed of the organization fills it (another
    # organization's re-embed of the same model is not this one's to switch to)
    target: EmbeddingModel | None
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
    """The embedding model the organization's search uses and the share of its memories
    embedded under the configured model — the one a re-embed fills; none while no re-embed of
    the organization has used it. Nothing is registered or probed here."""
    active = embeddings.current_model(organization)
    configured_id = embeddings.configured().model_id
    target = EmbeddingModel.objects.filter(
        pk=configured_id, uses__organization=organization
    ).first()
    memories = embeddings.embeddable_memories(organization)
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
    """Queue a re-embed of the actor's organization under the configured model (registered on
    first use), which becomes its active one when every memory of it has its vector (unless
    the organization holds the switch for a person). One at a time per organization;
    `model.manage`, as switching is."""
    actor.require("model.manage")
    running = (
        MemoryTask.objects.select_for_update()
        .filter(organization=actor.organization, kind=MemoryTask.Kind.REEMBED, status__in=OPEN)
        .first()
    )
    if running is not None:
        raise Conflict(_("A re-embed is already running."), code="reembed_running")
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
