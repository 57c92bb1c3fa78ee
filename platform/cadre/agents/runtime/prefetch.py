"""Prefetch of the next turn's memories: when a turn moves the conversation to a new topic,
the retrieval for that topic runs in the background, so the next turn's assembly finds its
candidates ready (a cache hit on Cadre's side) and ranks that pool instead of searching the
whole scope again.

- After a completed reply (not a delegated run, not a refusal) `schedule` queues
  `prefetch_next_turn` on commit, on the `after` queue. The task compares the embedding of
  this turn's input with the previous turn's in the session; only when their cosine distance
  is above `CADRE_PREFETCH_TOPIC_SHIFT` does it retrieve. The comparison runs in the task,
  not in the finishing transaction: embedding two texts must not delay the reply.
- The predicted next query is this turn's input. A follow-up on a new topic is phrased like
  the question that opened it (and is compared with it below, input with input); the reply
  would add the model's wording, which the next input's embedding is not close to.
- It runs the same retrieval as the `memory_retrieval` hook (the agent's actor, the run's read
  scopes, the input's vector from the check) for a pool of `pool_size(top_k)` (the best
  POOL_SIZE, at least twice the hook's `top_k`, and the candidates diversity passed over) and
  keeps only ids and the query's vector in the cache (Redis), keyed by session, scope keys
  and embedding model, for `CADRE_PREFETCH_TTL_SECONDS`.
- The next turn's hook (`take`) reuses the pool when its input's embedding is at least
  `CADRE_PREFETCH_MATCH` similar to the prefetched query's: the full search runs restricted to
  the pool's ids (`memory_search(candidate_ids=...)`, the same ranking: lexical and vector
  sides, fusion, recency, neighbour and session signals, MMR) with the input's embedding
  already computed. Its filters read the rows under the actor's scopes now (active,
  unexpired, unpurged — a memory deleted, superseded or out of reach since is never sent, an
  edited one is ranked and sent as it is now), and each sent item's components say
  `prefetched: true` (and `prefetch_match`) in the ContextRecord beside the usual ones.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

import numpy as np
from django.conf import settings
from django.core.cache import cache
from django.db import transaction

logger = logging.getLogger(__name__)

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


def topic_shift(before, now) -> bool:
    """Does the input embedded as `now` move away from the previous one's topic?"""
    return 1.0 - cosine(before, now) > settings.CADRE_PREFETCH_TOPIC_SHIFT


def _retrieval_config(version) -> dict | None:
    from cadre.agents.hooks.registry import hooks_for

    for hook, config in hooks_for(version.hooks, "assemble_context"):
        if hook.name == HOOK:
            return config
    return None


def _input_text(run) -> str:
    return run.input.get("model_text") or run.input.get("text", "")


def schedule(run) -> bool:
    """In the finishing transaction of a completed run: queue the topic check and prefetch."""
    if not enabled() or run.parent_id is not None or run.output.get("refused"):
        return False
    if not _input_text(run).strip() or _retrieval_config(run.version) is None:
        return False  # nothing to say, or a template without retrieval: nothing to prefetch
    from cadre.agents.runtime.services import AFTER_RUN_PRIORITY
    from cadre.agents.tasks import prefetch_next_turn

    transaction.on_commit(
        lambda: prefetch_next_turn.apply_async((run.pk,), priority=AFTER_RUN_PRIORITY)
    )
    return True


def prefetch_next_turn(run_id: int) -> str:
    """The task's body: what it did ("prefetched", "same_topic", or why it skipped)."""
    from cadre.agents.models import Run
    from cadre.agents.runtime.grants import agent_actor, scope_keys_for
    from cadre.memory import embeddings
    from cadre.memory.selectors import memory_search

    run = Run.objects.select_related("agent", "version").filter(pk=run_id).first()
    if run is None or run.status != Run.Status.COMPLETED or not enabled():
        return "skipped"
    config = _retrieval_config(run.version)
    if config is None:
        return "no_retrieval"
    text = _input_text(run)
    previous = (
        Run.objects.filter(
            session_id=run.session_id,
            status=Run.Status.COMPLETED,
            parent__isnull=True,
            pk__lt=run.pk,
        )
        .order_by("-pk")
        .first()
    )
    if previous is None or not _input_text(previous).strip():
        return "first_turn"
    model = embeddings.active_model()
    try:
        before, now = embeddings.provider_for(model).embed([_input_text(previous), text])
    except embeddings.EmbeddingError as error:
        logger.warning("prefetch for run %s: embedding failed: %s", run.pk, error)
        return "embedding_failed"
    if not topic_shift(before, now):
        return "same_topic"
    actor = agent_actor(run.agent)
    keys = scope_keys_for(run.agent, run.grants.get("read_scopes", []))
    if not keys:
        return "no_scopes"
    top_k = int(config.get("top_k", 5))
    result = memory_search(
        actor=actor,
        query=text,
        top_k=pool_size(top_k),
        scope_keys=keys,
        passed_over=True,
        query_vector=[float(x) for x in now],
    )
    ids = pool_ids(result.hits, result.passed_over)
    cache.set(
        cache_key(run.session_id, keys, model.pk),
        {
            "run_id": run.pk,
            "agent_id": run.agent_id,
            "member_id": run.member_id,
            "model_id": model.pk,
            "vector": [float(x) for x in now],
            "ids": ids,
        },
        settings.CADRE_PREFETCH_TTL_SECONDS,
    )
    from cadre.agents.runtime import warm

    warm.after_prefetch(run)  # the next turn's skills, and the provider's prompt cache
    return "prefetched"


def take(ctx, top_k: int) -> tuple[Any, list[float] | None]:
    """(this turn's hits ranked from the prefetched pool — a SearchResult — or None when there
    is no prefetch for this session and scopes or this input is on another topic; the input's
    embedding when it was computed, for the full search to reuse)."""
    if not enabled() or ctx.run.session_id is None:
        return None, None
    from cadre.memory import embeddings
    from cadre.memory.selectors import memory_search

    model = embeddings.active_model()
    entry = cache.get(cache_key(ctx.run.session_id, ctx.read_scope_keys(), model.pk))
    if not entry or entry.get("model_id") != model.pk:
        return None, None
    if entry.get("agent_id") != ctx.agent.pk or entry.get("member_id") != ctx.run.member_id:
        return None, None
    try:
        vector = embeddings.provider_for(model).embed([ctx.input_text])[0]
    except embeddings.EmbeddingError:
        return None, None
    match = cosine(vector, entry["vector"])
    if match < settings.CADRE_PREFETCH_MATCH:
        return None, vector
    # The full search's code and ranking over the pool: its filters read the rows as they are
    # now under the actor's scopes (active, unexpired, unpurged), so a memory deleted,
    # superseded or out of reach since the prefetch is never ranked.
    result = memory_search(
        actor=ctx.actor,
        query=ctx.input_text,
        top_k=top_k,
        scope_keys=ctx.read_scope_keys(),
        passed_over=True,
        query_vector=vector,
        candidate_ids=entry["ids"],
    )
    for hit in [*result.hits, *result.passed_over]:
        hit.components = {**hit.components, "prefetched": True, "prefetch_match": round(match, 4)}
    return result, vector
