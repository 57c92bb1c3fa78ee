"""The prefetched memory pools of the next turn, as the `memory_retrieval` hook reads them: their
cache key, the topic test, and `take` (the pool reused when this input is on its topic). The
lifecycle's prefetch task (runtime/lifecycle/prefetch.py) writes them; its docstring tells the
whole story."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
from django.conf import settings
from django.core.cache import cache

from cadre.agents.hooks.registry import hooks_for
from cadre.agents.runtime.records.grants import retrieval_kinds
from cadre.memory import embeddings
from cadre.memory import selectors as memory_selectors

HOOK = "memory_retrieval"


# The pool kept: the prefetch search's best POOL_SIZE (at least twice the hook's top_k; 100 at
# most, memory_search's limit) and the candidates diversity passed over. The next turn ranks it
# as the full search ranks the scope, which gives the same top k when the pool holds the next
# query's candidates: on LoCoMo, R@10 of the prefetch path is 0.699 / 0.714 / 0.720 with pools
# of 20 / 50 / 100 against 0.729 for the full search (bench/prefetch.py --locomo).
POOL_SIZE = 100


def enabled() -> bool:
    return settings.CADRE_PREFETCH_TTL_SECONDS > 0


def cache_key(session_id: int, scope_keys: list[str], model_pk: int) -> str:
    scopes = hashlib.sha256("\n".join(sorted(scope_keys)).encode()).hexdigest()[:16]
    return f"prefetch:{session_id}:{model_pk}:{scopes}"


def cosine(a, b) -> float:
    a, b = np.asarray(a, dtype=np.float32), np.asarray(b, dtype=np.float32)
    norm = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(a @ b) / norm if norm > 0 else 0.0


def pool_size(top_k: int) -> int:
    return min(100, max(POOL_SIZE, 2 * top_k))


def pool_ids(hits, passed_over) -> list[int]:
    """The ids kept from the prefetch search: its hits, then what diversity passed over."""
    return list(dict.fromkeys(hit.memory.pk for hit in [*hits, *passed_over]))


def similarity(model, a, b) -> float:
    """The cosine of two of `model`'s vectors on the usual scale (unrelated ≈ 0, the same ≈ 1),
    the scale CADRE_PREFETCH_TOPIC_SHIFT and CADRE_PREFETCH_MATCH are stated on."""
    return embeddings.calibrated_similarity(model, cosine(a, b))


def topic_shift(before, now, *, model) -> bool:
    """Does the input embedded as `now` (by `model`) move away from the previous one's topic?"""
    return 1.0 - similarity(model, before, now) > settings.CADRE_PREFETCH_TOPIC_SHIFT


def retrieval_config(version) -> dict | None:
    """The config of the version's memory_retrieval hook, or None when it has none."""
    for hook, config in hooks_for(version.hooks, "assemble_context"):
        if hook.name == HOOK:
            return config
    return None


def turn_input(run) -> str:
    """A turn's input as retrieval searched for it (masked when masking changed it)."""
    return run.input.get("model_text") or run.input.get("text", "")


def take(ctx, top_k: int) -> tuple[Any, list[float] | None]:
    """(this turn's hits ranked from the prefetched pool — a SearchResult — or None when there
    is no prefetch for this session and scopes or this input is on another topic; the input's
    embedding when it was computed, for the full search to reuse)."""
    if not enabled() or ctx.run.session_id is None:
        return None, None
    model = embeddings.active_model(ctx.agent.organization_id)
    entry = cache.get(cache_key(ctx.run.session_id, ctx.read_scope_keys(), model.pk))
    if not entry or entry.get("model_id") != model.pk:
        return None, None
    if entry.get("agent_id") != ctx.agent.pk or entry.get("member_id") != ctx.run.member_id:
        return None, None
    try:
        vector = embeddings.provider_for(model).embed([ctx.input_text], query=True)[0]
    except embeddings.EmbeddingError:
        return None, None
    match = similarity(model, vector, entry["vector"])
    if match < settings.CADRE_PREFETCH_MATCH:
        return None, vector
    # The full search's code and ranking over the pool: its filters read the rows as they are
    # now under the actor's scopes (active, unexpired, unpurged), so a memory deleted,
    # superseded or out of reach since the prefetch is never ranked.
    result = memory_selectors.memory_search(
        actor=ctx.actor,
        query=ctx.input_text,
        top_k=top_k,
        scope_keys=ctx.read_scope_keys(),
        kinds=retrieval_kinds(ctx.run.grants),
        passed_over=True,
        query_vector=vector,
        candidate_ids=entry["ids"],
    )
    for hit in [*result.hits, *result.passed_over]:
        hit.components = {**hit.components, "prefetched": True, "prefetch_match": round(match, 4)}
    return result, vector
