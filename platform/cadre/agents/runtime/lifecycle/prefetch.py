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

import logging

from django.conf import settings
from django.core.cache import cache
from django.db import transaction

from cadre import queues
from cadre.agents.hooks.prefetched import (
    cache_key,
    enabled,
    pool_ids,
    pool_size,
    retrieval_config,
    topic_shift,
    turn_input,
)
from cadre.agents.models import Run
from cadre.agents.runtime.lifecycle import warm
from cadre.agents.runtime.records.grants import agent_actor, retrieval_kinds, scope_keys_for
from cadre.agents.runtime.records.runs import PREFETCH_TASK
from cadre.memory import embeddings
from cadre.memory import selectors as memory_selectors

logger = logging.getLogger(__name__)


def schedule(run, *, priority: int) -> bool:
    """In the finishing transaction of a completed run: queue the topic check and prefetch."""
    if not enabled() or run.parent_id is not None or run.output.get("refused"):
        return False
    if not turn_input(run).strip() or retrieval_config(run.version) is None:
        return False  # nothing to say, or a template without retrieval: nothing to prefetch
    transaction.on_commit(
        lambda: queues.enqueue_with(PREFETCH_TASK, args=(run.pk,), priority=priority)
    )
    return True


def prefetch_next_turn(run_id: int) -> str:
    """The task's body: what it did ("prefetched", "same_topic", or why it skipped)."""
    run = Run.objects.select_related("agent", "version").filter(pk=run_id).first()
    if run is None or run.status != Run.Status.COMPLETED or not enabled():
        return "skipped"
    config = retrieval_config(run.version)
    if config is None:
        return "no_retrieval"
    text = turn_input(run)
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
    if previous is None or not turn_input(previous).strip():
        return "first_turn"
    model = embeddings.active_model(run.agent.organization_id)
    try:
        before, now = embeddings.provider_for(model).embed([turn_input(previous), text], query=True)
    except embeddings.EmbeddingError as error:
        logger.warning("prefetch for run %s: embedding failed: %s", run.pk, error)
        return "embedding_failed"
    if not topic_shift(before, now, model=model):
        return "same_topic"
    actor = agent_actor(run.agent)
    keys = scope_keys_for(run.agent, run.grants.get("read_scopes", []))
    if not keys:
        return "no_scopes"
    top_k = int(config.get("top_k", 5))
    result = memory_selectors.memory_search(
        actor=actor,
        query=text,
        top_k=pool_size(top_k),
        scope_keys=keys,
        kinds=retrieval_kinds(run.grants),
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
    warm.after_prefetch(run)  # the next turn's skills, and the provider's prompt cache
    return "prefetched"
