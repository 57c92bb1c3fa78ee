"""The semantic stage of Hub search, on the memory layer's embedding interface.

Guarded: when embeddings are not available (no `embeddings` extra, no provider configured,
a provider error), search stays lexical and says nothing — semantic results only ever add.
Packages are embedded under the instance's configured model; after it changes (an upgrade's
new default), a search queues the packages it can see that have no vector under it yet, and
finds them once embedded (lexically meanwhile).
"""

from __future__ import annotations

import hashlib
import logging

from django.conf import settings
from django.core.cache import cache
from django.db import DatabaseError
from django.db.models import QuerySet
from pgvector.django import CosineDistance

from cadre.memory import embeddings
from cadre.queues import enqueue
from hub.models import SkillEmbedding, SkillPackage

logger = logging.getLogger(__name__)
# Cosine similarity of a search to a package below which it is noise, on the usual scale
# (unrelated ≈ 0; moved onto the model's own by `embeddings.similarity_threshold`). Measured:
# unrelated queries at most 0.27 (multilingual-e5-small) / 0.31 (all-MiniLM-L6-v2); close ones
# 0.36-0.58 / 0.62-0.79, but E5 puts a short query loosely phrased at 0.1-0.25 (not found).
MIN_SIMILARITY = 0.35
# Packages without a vector under the model queued per search, and how often (seconds).
BACKFILL_BATCH = 200
BACKFILL_INTERVAL = 300


def embedding_text(package: SkillPackage) -> str:
    return "\n".join(
        part
        for part in (
            package.display_name or package.name,
            package.summary,
            (package.search_text or "")[:2000],
        )
        if part
    )


def active_embedding():
    """(model, provider) of the instance's configured embedding model (the Hub's vectors serve
    every organization), or None when embeddings cannot be used here (search and prefetch then
    stay lexical)."""
    try:
        model = embeddings.active_model()
        return model, embeddings.provider_for(model)
    except Exception as error:  # ImproperlyConfigured, a missing extra, provider or DB errors
        logger.info("hub search: semantic stage unavailable (%s)", error)
        return None


def package_embed(package: SkillPackage) -> bool:
    """Embed the package's current text under the active model; False if unavailable."""
    active = active_embedding()
    if active is None:
        return False
    model, provider = active
    text = embedding_text(package)
    digest = hashlib.sha256(text.encode()).hexdigest()
    existing = SkillEmbedding.objects.filter(package=package, model=model).first()
    if existing is not None and existing.text_sha256 == digest:
        return True
    try:
        vector = provider.embed([text])[0]
    except Exception as error:
        logger.warning("hub: embedding %s failed: %s", package, error)
        return False
    SkillEmbedding.objects.update_or_create(
        package=package, model=model, defaults={"embedding": vector, "text_sha256": digest}
    )
    return True


def missing_packages(model) -> QuerySet[SkillPackage]:
    """The packages with no vector under `model` (new, or embedded under another model)."""
    return SkillPackage.objects.exclude(
        pk__in=SkillEmbedding.objects.filter(model=model).values("package_id")
    ).order_by("pk")


def queue_missing(model) -> int:
    """Queue the embedding of the packages that have no vector under `model`, at most
    BACKFILL_BATCH once per BACKFILL_INTERVAL per model (the task is idempotent); how many
    were queued. The Hub's vectors are the instance's: every package, whoever can see it."""
    if getattr(settings, "TESTING", False) and not settings.CELERY_TASK_ALWAYS_EAGER:
        return 0  # as for a published package: no broker in the tests
    if not cache.add(f"hub-embed-missing:{model.pk}", 1, BACKFILL_INTERVAL):
        return 0
    ids = list(missing_packages(model).values_list("pk", flat=True)[:BACKFILL_BATCH])
    for package_id in ids:
        try:
            enqueue("hub.tasks.package_embed", package_id)
        except Exception:
            logger.warning("hub: could not queue embedding of package %s", package_id)
            return 0
    if ids:
        logger.info("hub search: queued %d packages to embed under %s", len(ids), model.id)
    return len(ids)


def semantic_matches(
    packages: QuerySet[SkillPackage], query: str, *, limit: int, exclude: set[int]
) -> list[tuple[SkillPackage, float]]:
    """(package, similarity on the usual scale) of the visible `packages` nearest to `query`.
    Packages not embedded under the configured model yet are queued for it and not found."""
    active = active_embedding()
    if active is None or not query.strip():
        return []
    model, provider = active
    threshold = embeddings.similarity_threshold(model, MIN_SIMILARITY)
    try:
        queue_missing(model)
        vector = provider.embed([query], query=True)[0]
        rows = list(
            SkillEmbedding.objects.filter(model=model, package__in=packages.values("pk"))
            .exclude(package_id__in=exclude)
            .annotate(distance=CosineDistance("embedding", vector))
            .filter(distance__lte=1 - threshold)
            .order_by("distance")
            .values_list("package_id", "distance")[:limit]
        )
    except (DatabaseError, Exception) as error:
        logger.warning("hub search: semantic stage failed: %s", error)
        return []
    found = (
        packages.filter(pk__in=[pk for pk, _ in rows])
        .defer("search_text", "search_vector", "title_vector")
        .in_bulk()
    )
    return [
        (found[pk], embeddings.calibrated_similarity(model, 1 - distance))
        for pk, distance in rows
        if pk in found
    ]
