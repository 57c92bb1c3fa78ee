"""Re-embedding every memory under a new embedding model, resumably, then switching to it.

Shared by `manage.py memory_reembed` (with a tqdm progress bar) and the `memory_reembed` Celery
task. Resumable because only memories still missing a vector under the model are embedded
(`embeddings.missing_embeddings`); the switch (`embeddings.activate`) happens only when none is
missing, atomically, so search never runs against a half-built model. Memories written while a
re-embed runs are embedded under every `building` model by the enrich task as well.
"""

from __future__ import annotations

from collections.abc import Callable

from cadre.memory import embeddings
from cadre.memory.models import EmbeddingModel

ACTIVATE_ATTEMPTS = 5


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
