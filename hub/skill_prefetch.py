"""Prefetch of the next turn's skill relevance: the description vectors the `skills` hook's
semantic stage compares the input with, embedded after a topic shift (in the background, see
cadre.agents.runtime.lifecycle.warm) so the next turn on that topic does not embed them again.

- `prefetch` (from `hooks.skills_predict`, on the runtime's topic-shift prefetch) embeds this
  turn's input — the predicted next input, as for memories — and every verified installed
  skill's "name: description", and keeps in the cache (Redis), keyed by session, agent and
  embedding model, for `CADRE_PREFETCH_TTL_SECONDS`: the input's vector and, per skill
  version id, its fingerprint, the SHA-256 of the text embedded and that text's vector.
- `semantic_scores` (the next turn's hook) embeds only its input; when that is at least
  `CADRE_PREFETCH_MATCH` similar to the prefetched input (the memory prefetch's rule, on the
  usual scale: `cadre.agents.hooks.prefetched.similarity`), each
  skill is scored against its kept vector — only a version whose id, fingerprint and text are
  the ones kept; any other skill's description is embedded now. The scores are what the full
  stage computes, so the same bodies load. Which skills are candidates is never taken from
  the cache: the hook reads the agent's installs and verifies each version's signature on every
  turn, so an uninstalled, revoked or tampered version is never loaded.

Inputs are embedded as queries, descriptions as what is searched; scores are similarities on
the usual scale (unrelated ≈ 0, `embeddings.calibrated_similarity`), whatever the model, so the
hook's `semantic_threshold` means the same under each.
"""

from __future__ import annotations

import hashlib
import logging
import math

from django.conf import settings
from django.core.cache import cache

from cadre.memory import embeddings
from hub.semantic import active_embedding

logger = logging.getLogger(__name__)


def description_text(skill: dict) -> str:
    """What the semantic stage compares the input with: "name: description"."""
    return f"{skill['name']}: {skill['description']}"


def cosine(a, b) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=False))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


def similarity(model, a, b) -> float:
    """The cosine of two of `model`'s vectors on the usual scale (unrelated ≈ 0)."""
    return embeddings.calibrated_similarity(model, cosine(a, b))


def _embed(provider, text: str, descriptions: list[str]) -> tuple[list[float], list[list[float]]]:
    """(the input's vector as a query, the descriptions' vectors as what is searched)."""
    query = provider.embed([text], query=True)[0]
    return query, provider.embed(descriptions) if descriptions else []


def embedded_scores(text: str, descriptions: list[str]) -> list[float] | None:
    """Similarity of `text` to each description, all embedded now; None when embeddings are
    off."""
    active = active_embedding()
    if active is None or not descriptions:
        return None
    model, provider = active
    try:
        query, described = _embed(provider, text, descriptions)
    except Exception as error:  # a provider outage only costs the semantic stage
        logger.warning("hub skills: semantic relevance unavailable: %s", error)
        return None
    return [similarity(model, query, vector) for vector in described]


def enabled() -> bool:
    return settings.CADRE_PREFETCH_TTL_SECONDS > 0


def cache_key(session_id: int, agent_id: int, model_pk: int) -> str:
    return f"skills-prefetch:{session_id}:{agent_id}:{model_pk}"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _texts(skills: list[dict]) -> list[str]:
    return [description_text(skill) for skill in skills]


def prefetch(run, text: str, skills: list[dict]) -> list[float] | None:
    """Embed `text` and the skills' descriptions, keep them for the next turn of `run`'s
    session; the similarity of `text` to each skill (None when embeddings are unavailable)."""
    active = active_embedding()
    if active is None or not skills or run.session_id is None:
        return None
    model, provider = active
    texts = _texts(skills)
    try:
        query, described = _embed(provider, text, texts)
    except Exception as error:  # the next turn embeds them itself
        logger.warning("skills prefetch for run %s: embedding failed: %s", run.pk, error)
        return None
    cache.set(
        cache_key(run.session_id, run.agent_id, model.pk),
        {
            "run_id": run.pk,
            "agent_id": run.agent_id,
            "member_id": run.member_id,
            "model_id": model.pk,
            "vector": [float(x) for x in query],
            "skills": {
                str(skill["version"].pk): {
                    "fingerprint": skill["version"].fingerprint,
                    "text": _digest(described_text),
                    "vector": [float(x) for x in vector],
                }
                for skill, described_text, vector in zip(skills, texts, described, strict=True)
            },
        },
        settings.CADRE_PREFETCH_TTL_SECONDS,
    )
    return [similarity(model, query, vector) for vector in described]


def semantic_scores(run, text: str, skills: list[dict]) -> tuple[list[float] | None, bool]:
    """(the similarity of `text` to each skill's description or None when embeddings are
    unavailable, whether a prefetch supplied the descriptions' vectors)."""
    if not skills:
        return None, False
    texts = _texts(skills)
    active = active_embedding() if enabled() and run.session_id is not None else None
    if active is None:
        return embedded_scores(text, texts), False
    model, provider = active
    entry = cache.get(cache_key(run.session_id, run.agent_id, model.pk))
    if not entry or entry.get("model_id") != model.pk or entry.get("member_id") != run.member_id:
        return embedded_scores(text, texts), False
    try:
        query = provider.embed([text], query=True)[0]
    except Exception as error:
        logger.warning("hub skills: semantic relevance unavailable: %s", error)
        return None, False
    matched = similarity(model, query, entry["vector"]) >= settings.CADRE_PREFETCH_MATCH
    kept = entry["skills"] if matched else {}
    vectors: dict[int, list[float]] = {}
    for index, (skill, described) in enumerate(zip(skills, texts, strict=True)):
        known = kept.get(str(skill["version"].pk))
        if (
            known is not None
            and known["fingerprint"] == skill["version"].fingerprint
            and known["text"] == _digest(described)
        ):
            vectors[index] = known["vector"]
    reused = bool(vectors)
    missing = [index for index in range(len(skills)) if index not in vectors]
    if missing:
        try:
            for index, vector in zip(
                missing, provider.embed([texts[i] for i in missing]), strict=True
            ):
                vectors[index] = vector
        except Exception as error:
            logger.warning("hub skills: semantic relevance unavailable: %s", error)
            return None, False
    return [similarity(model, query, vectors[index]) for index in range(len(skills))], reused
