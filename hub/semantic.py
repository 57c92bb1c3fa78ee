"""The semantic stage of Hub search, on the memory layer's embedding interface.

Guarded: when embeddings are not available (no `embeddings` extra, no provider configured,
a provider error), search stays lexical and says nothing — semantic results only ever add.
"""

from __future__ import annotations

import hashlib
import logging

from django.db import DatabaseError
from django.db.models import QuerySet
from pgvector.django import CosineDistance

from cadre.memory import embeddings
from hub.models import SkillEmbedding, SkillPackage

logger = logging.getLogger(__name__)
MIN_SIMILARITY = 0.35  # cosine similarity below this is noise for all-MiniLM-L6-v2


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


def semantic_matches(
    packages: QuerySet[SkillPackage], query: str, *, limit: int, exclude: set[int]
) -> list[tuple[SkillPackage, float]]:
    """(package, cosine similarity) of the visible `packages` nearest to `query`."""
    active = active_embedding()
    if active is None or not query.strip():
        return []
    model, provider = active
    try:
        vector = provider.embed([query])[0]
        rows = list(
            SkillEmbedding.objects.filter(model=model, package__in=packages.values("pk"))
            .exclude(package_id__in=exclude)
            .annotate(distance=CosineDistance("embedding", vector))
            .filter(distance__lte=1 - MIN_SIMILARITY)
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
    return [(found[pk], 1 - distance) for pk, distance in rows if pk in found]
