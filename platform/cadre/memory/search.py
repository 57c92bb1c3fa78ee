"""Hybrid memory retrieval: full-text + pgvector, fused by their relative scores (and/or
reciprocal rank fusion: SearchSettings.fusion), then recency, conversation/speaker boosts,
neighbouring-turn smoothing and MMR diversity. Only verified memories are searched: a shared
memory waiting for review reaches no model. Records derived from runs (experience, tool
trajectories, summaries) are searched only by kind.

Every hit explains itself (`SearchHit.components`). The two retrieval sides are plain SQL so
that the planner uses the right indexes:

- lexical: `to_tsvector('simple', coalesce(search_text, ''))` (the GIN index expression) matched
  against an OR of the query's content terms, scored BM25-style (idf per term from the
  filtered scope, length-normalized) because `ts_rank_cd` has no idf and lets common words win
  an OR query;
- vector: `ORDER BY (embedding::vector(D)) <#> query` (inner product: a memory's vector is a
  unit vector, or for a conversation turn the mean of its views', see memory/turns.py) through
  the active model's partial HNSW index (`WHERE model_id = ...`), with
  `hnsw.iterative_scan = relaxed_order` so a selective scope filter still returns k rows.

See docs/memory-retrieval.md for the parameters and the benchmark figures. Nothing here takes
an actor: every search goes through `selectors.memory_search` (docs/memory.md, "One gate").
"""

from __future__ import annotations

import logging
import re
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import numpy as np
import psycopg
from django.db import connection, transaction
from django.utils import timezone

from cadre.memory import embeddings
from cadre.memory import text as memory_text
from cadre.memory.embeddings import vector_type
from cadre.memory.models import (
    DERIVED_KINDS,
    EmbeddingModel,
    Memory,
    MemoryEmbedding,
    Verification,
)

logger = logging.getLogger(__name__)

tokenize = memory_text.tokenize

MODES = ("hybrid", "lexical", "vector")
RANKING_FIELDS = (
    "id",
    "organization_id",
    "scope_key",
    "observed_at",
    "conversation_id",
    "attributes",
    "author_label",
)
# Per database connection: pgvector types registered, HNSW session options set.
_vector_types_registered: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_session_options: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

_EMOJI_OR_SYMBOLS = re.compile(r"^[\W_]*$", re.UNICODE)


def should_recall(query: str) -> bool:
    """False for messages that ask nothing of memory: acknowledgements ('ok', '好的', 'thanks',
    '嗯'), emoji or punctuation only, or a single stray letter."""
    stripped = (query or "").strip()
    if not stripped or _EMOJI_OR_SYMBOLS.match(stripped):
        return False
    terms = memory_text.content_terms(stripped)
    if not terms:
        return False
    return not (len(terms) == 1 and len(terms[0]) < 2)


@dataclass(frozen=True)
class SearchSettings:
    """Tuning of the hybrid ranking. Defaults are the documented, benchmarked ones."""

    candidates_per_side: int = 0  # 0: max(top_k * 5, 50)
    # Small k: with two lists of ~50 candidates, the top of each list should dominate (k=60
    # comes from fusing many TREC runs; on LoCoMo-dev k=10 gave R@10 0.71 vs 0.67 at 60).
    # With `fusion` = 1 it only sets the scale of the scores (1 / (k + 1) at best).
    rrf_k: int = 10
    lexical_weight: float = 1.0
    vector_weight: float = 1.0
    # Recency: score *= (1 - w) + w * 0.5 ** (age / half_life). Mild: old facts still matter.
    recency_weight: float = 0.1
    recency_half_life_days: float = 30.0
    conversation_boost: float = 0.1  # hits from the caller's conversation: score *= 1 + boost
    speaker_boost: float = 0.3  # hits said by a person the query names: score *= 1 + boost
    # A hit's adjacent turns (same conversation_id, attributes["turn"] +-1) lend it this share
    # of their own score: the answer is often the reply to the turn that matches the question.
    neighbour_weight: float = 0.35
    # Any other candidate of the same conversation (session) lends this share of the best
    # such score: a conversation about the topic is more likely to hold the answer.
    session_weight: float = 0.4
    mmr_lambda: float = 0.9  # 1.0 = pure relevance, lower = more diversity
    # Relative score fusion (each side's scores min-max scaled over the pool, weighted, summed)
    # mixed with RRF by this share: 1 = relative scores only, 0 = RRF only. Ranks throw away how
    # far ahead a candidate is, min-max scaling exaggerates gaps in a small pool: half of each.
    # With E5 on LoCoMo-dev R@10 0.754 vs 0.735 for RRF alone, better on every conversation
    # (relative alone 0.761, but a rare exact word then loses to paraphrases in small scopes).
    fusion: float = 0.5
    ef_search: int = 100
    iterative_scan: bool = True  # off only to measure what it buys (benchmarks)
    # Small filtered sets are searched exactly (see prefer_brute_force).
    brute_force_below: int = 2000
    brute_force_factor: float = 4.0
    max_scan_tuples: int = 20000
    bm25_k1: float = 1.2
    bm25_b: float = 0.75


DEFAULT_SETTINGS = SearchSettings()


@dataclass
class SearchHit:
    memory: Memory
    score: float
    components: dict[str, Any] = field(default_factory=dict)


# --- filters ------------------------------------------------------------------------------


def _filter_sql(
    *,
    organization,
    scope_keys: Sequence[str],
    kinds=None,
    tags=None,
    source_kinds=None,
    attributes: dict | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    as_of: datetime | None = None,
    include_statuses=None,
    candidate_ids: Sequence[int] | None = None,
    now: datetime,
) -> tuple[str, list]:
    """WHERE conditions on `m` (memory_memory) shared by both retrieval sides."""
    import json

    organization_id = getattr(organization, "pk", organization)
    conditions = ["m.organization_id = %s", "m.scope_key = ANY(%s)"]
    params: list = [organization_id, list(scope_keys)]
    if candidate_ids is not None:
        conditions.append("m.id = ANY(%s)")
        params.append([int(pk) for pk in candidate_ids])
    conditions.append("m.purged_at IS NULL AND m.deleted_at IS NULL")
    # Search feeds models: a shared memory waiting for review (or refused) is never found.
    conditions.append("m.verification = %s")
    params.append(str(Verification.VERIFIED))
    conditions.append("(m.expires_at IS NULL OR m.expires_at > %s)")
    params.append(now)
    if as_of is not None:
        statuses = [
            s
            for s in (include_statuses or (Memory.Status.ACTIVE, Memory.Status.SUPERSEDED))
            if s != Memory.Status.DELETED
        ]
        conditions.append(
            "m.valid_from <= %s AND (m.valid_to IS NULL OR m.valid_to > %s) AND m.created_at <= %s"
        )
        params.extend([as_of, as_of, as_of])
    else:
        statuses = [s for s in (include_statuses or (Memory.Status.ACTIVE,))]
    conditions.append("m.status = ANY(%s)")
    params.append([str(s) for s in statuses])
    if kinds:
        conditions.append("m.kind = ANY(%s)")
        params.append([str(k) for k in kinds])
    else:
        # Ordinary retrieval finds what people stated: records derived from runs (experience,
        # tool trajectories, summaries) only when a caller names their kind.
        conditions.append("m.kind <> ALL(%s)")
        params.append([str(k) for k in DERIVED_KINDS])
    if source_kinds:
        conditions.append("m.source_kind = ANY(%s)")
        params.append([str(k) for k in source_kinds])
    if tags:
        conditions.append("m.tags @> %s::varchar(64)[]")
        params.append(list(tags))
    if attributes:
        conditions.append("m.attributes @> %s::jsonb")
        params.append(json.dumps(attributes))
    if since is not None:
        conditions.append("m.observed_at >= %s")
        params.append(since)
    if until is not None:
        conditions.append("m.observed_at < %s")
        params.append(until)
    return " AND ".join(conditions), params


_TSVECTOR = "to_tsvector('simple'::regconfig, COALESCE(m.search_text, ''))"


def _quote_term(term: str) -> str:
    return "'" + term.replace("\\", "\\\\").replace("'", "''") + "'"


def lexical_candidates(
    terms: Sequence[str],
    where: str,
    params: list,
    *,
    limit: int,
    settings: SearchSettings,
    total: int | None = None,
) -> list[tuple[int, float]]:
    """(memory id, BM25-style score) of memories matching any term, best first."""
    if not terms:
        return []
    table = Memory._meta.db_table
    # Only internal names and the parameterized filter are formatted in; values are params.
    # One GIN lookup per term (LATERAL): no tsvector is re-parsed, so the cost is that of the
    # index scans. Document length is taken in characters of search_text (cheap, and fair to
    # Chinese, whose tokens are short).
    sql = f"""
        WITH terms AS (
            SELECT t.term, to_tsquery('simple', t.quoted) AS q
            FROM unnest(%s::text[], %s::text[]) AS t(term, quoted)
        ),
        hits AS (
            SELECT t.term, c.id, c.dl
            FROM terms t
            CROSS JOIN LATERAL (
                SELECT m.id, length(m.search_text) + 1 AS dl
                FROM {table} m
                WHERE {where} AND {_TSVECTOR} @@ t.q
            ) c
        ),
        df AS (
            SELECT term,
                   ln(1.0 + (%s::float8 - count(*) + 0.5) / (count(*) + 0.5)) AS idf
            FROM hits GROUP BY term
        ),
        stats AS (SELECT GREATEST(avg(dl), 1)::float8 AS avgdl FROM hits)
        SELECT h.id,
               sum(d.idf * (%s::float8 + 1.0)
                   / (1.0 + %s::float8 * (1.0 - %s::float8 + %s::float8 * h.dl / s.avgdl)))
                   AS score
        FROM hits h JOIN df d USING (term) CROSS JOIN stats s
        GROUP BY h.id
        ORDER BY score DESC, h.id DESC
        LIMIT %s
    """  # noqa: S608
    k1, b = settings.bm25_k1, settings.bm25_b
    all_params = [
        list(terms),
        [_quote_term(term) for term in terms],
        *params,
        max(total if total is not None else count_filtered(where, params), 1),
        k1,
        k1,
        b,
        b,
        limit,
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, all_params)
        return [(row[0], float(row[1])) for row in cursor.fetchall()]


def count_filtered(where: str, params: list, *, cap: int = 100_000) -> int:
    """How many memories the filters leave (counted up to `cap`)."""
    table = Memory._meta.db_table
    sql = f"SELECT count(*) FROM (SELECT 1 FROM {table} m WHERE {where} LIMIT %s) AS f"  # noqa: S608
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, cap])
        return int(cursor.fetchone()[0])


_table_estimate: dict[str, tuple[float, float]] = {}


def embedding_rows_estimate() -> float:
    """The planner's estimate of stored vectors (pg_class.reltuples), cached for a minute."""
    table = MemoryEmbedding._meta.db_table
    cached = _table_estimate.get(table)
    if cached is not None and time.monotonic() - cached[1] < 60:
        return cached[0]
    with connection.cursor() as cursor:
        cursor.execute("SELECT GREATEST(reltuples, 0) FROM pg_class WHERE relname = %s", [table])
        row = cursor.fetchone()
    estimate = float(row[0]) if row else 0.0
    _table_estimate[table] = (estimate, time.monotonic())
    return estimate


def prefer_brute_force(filtered: int, limit: int, settings: SearchSettings) -> bool:
    """Compare the filtered rows one by one rather than walk HNSW? An HNSW walk under a
    filter of selectivity s visits about limit / s tuples (each a graph step plus a join
    check); brute force costs `filtered` distance computations. With s = filtered / total,
    brute force wins when filtered^2 < factor * limit * total."""
    if filtered <= settings.brute_force_below:
        return True
    total = max(embedding_rows_estimate(), float(filtered))
    return filtered * filtered <= settings.brute_force_factor * limit * total


def _vector_literal(vector: Sequence[float]) -> str:
    return "[" + ",".join(f"{float(x):.7g}" for x in vector) + "]"


def vector_candidates(
    query_vector: Sequence[float],
    model: EmbeddingModel,
    where: str,
    params: list,
    *,
    limit: int,
    settings: SearchSettings,
    exact: bool = False,
    filtered: int | None = None,
) -> list[tuple[int, float]]:
    """(memory id, similarity) of the nearest memories under `model`, best first. The
    similarity is the inner product with the (unit) query vector: the cosine for a unit vector,
    the mean of its views' cosines for a turn's (memory/turns.py).

    The ORDER BY expression and the model predicate match the model's partial HNSW index
    (embeddings.ensure_index); iterative scan keeps filtered queries returning `limit` rows.
    When the filter leaves few rows (`filtered`, see `prefer_brute_force`), those rows are
    compared one by one instead: exact, and faster than an HNSW walk that must skip the
    other scopes' neighbours. `exact=True` disables index scans: the ground truth for ANN
    recall in the benchmarks."""
    kind = vector_type(model)
    table = Memory._meta.db_table
    embedding_table = MemoryEmbedding._meta.db_table
    literal = _vector_literal(query_vector)
    if not exact and filtered is not None and prefer_brute_force(filtered, limit, settings):
        # "+ 0" keeps the planner off the HNSW index: filter first (btree), then sort.
        brute = f"""
            SELECT e.memory_id, (e.embedding::{kind}) <#> %s::{kind} AS distance
            FROM {table} m JOIN {embedding_table} e ON e.memory_id = m.id AND e.model_id = %s
            WHERE {where}
            ORDER BY ((e.embedding::{kind}) <#> %s::{kind}) + 0
            LIMIT %s
        """  # noqa: S608
        with connection.cursor() as cursor:
            cursor.execute(brute, [literal, model.pk, *params, literal, limit])
            rows = cursor.fetchall()
        return [(row[0], -float(row[1])) for row in rows]
    sql = f"""
        SELECT e.memory_id, (e.embedding::{kind}) <#> %s::{kind} AS distance
        FROM {embedding_table} e JOIN {table} m ON m.id = e.memory_id
        WHERE e.model_id = %s AND {where}
        ORDER BY (e.embedding::{kind}) <#> %s::{kind}
        LIMIT %s
    """  # noqa: S608
    if exact:
        options = {"enable_indexscan": "off"}
    else:
        options = {
            "hnsw.iterative_scan": "relaxed_order" if settings.iterative_scan else "off",
            "hnsw.ef_search": str(int(settings.ef_search)),
            "hnsw.max_scan_tuples": str(int(settings.max_scan_tuples)),
        }
    names = list(options)
    nested = connection.in_atomic_block
    if not exact and not nested:
        # Autocommit: set the HNSW options for the session once per connection (they only
        # steer HNSW scans, i.e. these queries) and save a BEGIN/SET/COMMIT round trip each.
        connection.ensure_connection()
        raw = connection.connection
        wanted = tuple(options.items())
        with connection.cursor() as cursor:
            if _session_options.get(raw) != wanted:
                cursor.execute(
                    "SELECT " + ", ".join(["set_config(%s, %s, false)"] * len(names)),
                    [value for name in names for value in (name, options[name])],
                )
                _session_options[raw] = wanted
            cursor.execute(sql, [literal, model.pk, *params, literal, limit])
            rows = cursor.fetchall()
        rows.sort(key=lambda row: row[1])
        return [(row[0], -float(row[1])) for row in rows]
    with transaction.atomic(), connection.cursor() as cursor:
        if nested:  # SET LOCAL would outlive this query in the caller's transaction
            cursor.execute("SELECT " + ", ".join(["current_setting(%s)"] * len(names)), names)
            previous = dict(zip(names, cursor.fetchone(), strict=True))
        cursor.execute(
            "SELECT " + ", ".join(["set_config(%s, %s, true)"] * len(names)),
            [value for name in names for value in (name, options[name])],
        )
        cursor.execute(sql, [literal, model.pk, *params, literal, limit])
        rows = cursor.fetchall()
        if nested:
            cursor.execute(
                "SELECT " + ", ".join(["set_config(%s, %s, true)"] * len(names)),
                [value for name in names for value in (name, previous[name])],
            )
    # relaxed_order may return rows slightly out of order: sort by the exact distance.
    rows.sort(key=lambda row: row[1])
    return [(row[0], -float(row[1])) for row in rows]


# --- the pipeline -------------------------------------------------------------------------


def _speaker(memory: Memory) -> str:
    value = (memory.attributes or {}).get("speaker") or memory.author_label or ""
    return str(value).strip().lower()


def _turn(memory: Memory) -> int | None:
    value = (memory.attributes or {}).get("turn")
    return value if isinstance(value, int) else None


def _aware(moment: datetime) -> datetime:
    return moment if timezone.is_aware(moment) else timezone.make_aware(moment)


def _search(
    *,
    organization,
    scope_keys: list[str],
    query: str,
    top_k: int = 10,
    kinds=None,
    tags=None,
    source_kinds=None,
    attributes: dict | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    as_of: datetime | None = None,
    conversation_id: str | None = None,
    model: EmbeddingModel | None = None,
    include_statuses=None,
    mode: str = "hybrid",
    query_vector: Sequence[float] | None = None,
    settings: SearchSettings | None = None,
    passed_over: list[SearchHit] | None = None,
    candidate_ids: Sequence[int] | None = None,
) -> list[SearchHit]:
    """The memories of `organization` within `scope_keys` that best answer `query`.

    It takes no actor: only the memory gate (`selectors.memory_search`, which computes the
    scopes from an actor) calls it; tests/memory/test_memory_gate.py keeps it so.

    `passed_over`, when given, receives the candidates relevance alone would have put in the
    top k but diversity (MMR) passed over, with their components (`mmr_redundancy`: their
    highest similarity to a chosen hit); the hits returned are the same either way.

    `mode` "lexical" / "vector" run one side alone (same SQL as the hybrid's sides; used by
    the benchmarks). `query_vector` skips embedding the query (benchmarks, callers that
    already have it). Filters always include organization and scope; see the module docs.
    Without `kinds`, derived records (models.DERIVED_KINDS) are left out; a caller that wants
    them names their kinds.

    `candidate_ids` restricts both sides to these memories (a pool retrieved ahead, e.g. the
    runtime's prefetch): the same filters and the same ranking, over the pool instead of the
    whole scope. The pool's rows stand in for the scope: the lexical side's idf and the ranks
    fused are the pool's, so the top k matches the full search's when the pool holds its
    candidates (docs/memory.md#prefetch-of-the-next-turn).
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if not scope_keys or top_k <= 0 or not (query or "").strip():
        return []
    settings = settings or DEFAULT_SETTINGS
    now = timezone.now()
    where, params = _filter_sql(
        organization=organization,
        scope_keys=scope_keys,
        kinds=kinds,
        tags=tags,
        source_kinds=source_kinds,
        attributes=attributes,
        since=_aware(since) if since else None,
        until=_aware(until) if until else None,
        as_of=_aware(as_of) if as_of else None,
        include_statuses=include_statuses,
        candidate_ids=candidate_ids,
        now=now,
    )
    pool = settings.candidates_per_side or max(top_k * 5, 50)
    terms = memory_text.content_terms(query)

    filtered = count_filtered(where, params)
    if filtered == 0:
        return []
    lexical: list[tuple[int, float]] = []
    if mode in ("hybrid", "lexical"):
        lexical = lexical_candidates(
            terms, where, params, limit=pool, settings=settings, total=filtered
        )

    vector: list[tuple[int, float]] = []
    embedding_model = None
    if mode in ("hybrid", "vector"):
        embedding_model = model or embeddings.active_model(organization)
        if query_vector is None:
            try:
                query_vector = embeddings.provider_for(embedding_model).embed([query], query=True)[
                    0
                ]
            except embeddings.EmbeddingError:
                if mode == "vector":
                    raise
                logger.warning("memory search: query embedding failed, lexical results only")
        if query_vector is not None:
            vector = vector_candidates(
                query_vector,
                embedding_model,
                where,
                params,
                limit=pool,
                settings=settings,
                filtered=filtered,
            )

    if mode == "lexical":
        return _plain_hits(lexical, "lexical", top_k)
    if mode == "vector":
        return _plain_hits(vector, "vector", top_k)
    return _fuse(
        lexical=lexical,
        vector=vector,
        query_vector=query_vector,
        model=embedding_model,
        terms=terms,
        conversation_id=conversation_id,
        top_k=top_k,
        now=now,
        settings=settings,
        passed_over=passed_over,
    )


def _plain_hits(ranked: list[tuple[int, float]], side: str, top_k: int) -> list[SearchHit]:
    ranked = ranked[:top_k]
    memories = Memory.objects.in_bulk([pk for pk, _ in ranked])
    label = "score" if side == "lexical" else "similarity"
    return [
        SearchHit(
            memory=memories[pk],
            score=score,
            components={f"{side}_rank": rank, f"{side}_{label}": round(score, 6)},
        )
        for rank, (pk, score) in enumerate(ranked, start=1)
        if pk in memories
    ]


@dataclass
class Candidates:
    """Everything the ranking needs about one query's candidate pool (loaded once)."""

    lexical: list[tuple[int, float]]
    vector: list[tuple[int, float]]
    memories: dict[int, Memory]
    vectors: dict[int, np.ndarray]
    query: np.ndarray | None
    # The cosine the vectors' model gives unrelated texts (embeddings.similarity_floor): MMR
    # reads redundancy on the usual scale.
    similarity_floor: float = 0.0
    # Each vector's length before it was normalized (a turn's mean of views is shorter than 1):
    # a candidate's similarity is its cosine times this, as the vector side ranks it.
    norms: dict[int, float] = field(default_factory=dict)


def binary_connection():
    """The psycopg connection under Django's, with pgvector's types registered once."""
    from pgvector.psycopg import register_vector

    connection.ensure_connection()
    raw = connection.connection
    if raw not in _vector_types_registered:
        register_vector(raw)
        _vector_types_registered[raw] = True
    return raw


def fetch_candidates(
    model: EmbeddingModel | None, ids: Sequence[int]
) -> tuple[dict[int, Memory], dict[int, np.ndarray], dict[int, float]]:
    """The ranking fields of the candidates and their vectors under `model`, in one query
    read in PostgreSQL's binary format: parsing the text form of 384 floats costs ~0.5 ms a
    row in Python, the binary form is a memory copy. The Memory objects carry only
    RANKING_FIELDS (the hits' full rows are fetched once the top k is known). Vectors come
    back normalized, with their lengths beside them."""
    raw = binary_connection()
    fields = [f.attname for f in Memory._meta.concrete_fields if f.attname in RANKING_FIELDS]
    columns = ", ".join(f"m.{name}" for name in fields)
    table = Memory._meta.db_table
    embedding_table = MemoryEmbedding._meta.db_table
    if model is not None:
        vector = f"e.embedding::{vector_type(model)}"
        join = f"LEFT JOIN {embedding_table} e ON e.memory_id = m.id AND e.model_id = %s"
        params: list = [model.pk, list(ids)]
    else:
        vector, join, params = "NULL", "", [list(ids)]
    sql = f"SELECT {columns}, {vector} FROM {table} m {join} WHERE m.id = ANY(%s)"  # noqa: S608
    with psycopg.Cursor(raw) as cursor:  # Django's cursors bind client-side: no binary results
        cursor.execute(sql, params, binary=True)
        rows = cursor.fetchall()
    memories: dict[int, Memory] = {}
    vectors: dict[int, np.ndarray] = {}
    norms: dict[int, float] = {}
    for row in rows:
        memory = Memory.from_db(connection.alias, fields, row[:-1])
        memories[memory.pk] = memory
        value = row[-1]
        if value is not None:
            array = value.to_numpy() if hasattr(value, "to_numpy") else value
            array = np.asarray(array, dtype=np.float32)
            norm = float(np.linalg.norm(array))
            vectors[memory.pk] = array / norm if norm > 0 else array
            norms[memory.pk] = norm
    return memories, vectors, norms


def load_candidates(
    lexical: list[tuple[int, float]],
    vector: list[tuple[int, float]],
    *,
    model: EmbeddingModel | None,
    query_vector: Sequence[float] | None,
) -> Candidates:
    """Fetch the candidate rows and, for MMR and for ranking lexical-only candidates by
    similarity too, their vectors under `model` (one query)."""
    ids = list(dict.fromkeys([pk for pk, _ in lexical] + [pk for pk, _ in vector]))
    if not ids:
        return Candidates(lexical=lexical, vector=vector, memories={}, vectors={}, query=None)
    use_vectors = model is not None and query_vector is not None
    memories, vectors, norms = fetch_candidates(model if use_vectors else None, ids)
    query = None
    if use_vectors:
        query = np.asarray(query_vector, dtype=np.float32)
        norm = float(np.linalg.norm(query))
        query = query / norm if norm > 0 else query
    return Candidates(
        lexical=lexical,
        vector=vector,
        memories=memories,
        vectors=vectors,
        query=query,
        similarity_floor=embeddings.similarity_floor(model) if model is not None else 0.0,
        norms=norms,
    )


def _fuse(
    *,
    lexical: list[tuple[int, float]],
    vector: list[tuple[int, float]],
    query_vector: Sequence[float] | None,
    model: EmbeddingModel | None,
    terms: list[str],
    conversation_id: str | None,
    top_k: int,
    now: datetime,
    settings: SearchSettings,
    passed_over: list[SearchHit] | None = None,
) -> list[SearchHit]:
    candidates = load_candidates(lexical, vector, model=model, query_vector=query_vector)
    hits = rank(
        candidates,
        terms=terms,
        conversation_id=conversation_id,
        top_k=top_k,
        now=now,
        settings=settings,
        passed_over=passed_over,
    )
    extra = passed_over or []
    full = Memory.objects.in_bulk([hit.memory.pk for hit in [*hits, *extra]])
    for hit in [*hits, *extra]:
        hit.memory = full[hit.memory.pk]
    return hits


def rank(
    candidates: Candidates,
    *,
    terms: list[str],
    conversation_id: str | None,
    top_k: int,
    now: datetime,
    settings: SearchSettings,
    passed_over: list[SearchHit] | None = None,
) -> list[SearchHit]:
    """Fuse, boost, smooth and diversify a loaded candidate pool (no database access).
    `passed_over` (a list) receives the candidates MMR displaced from the relevance top k."""
    lexical, vector = candidates.lexical, candidates.vector
    memories, vectors, query = candidates.memories, candidates.vectors, candidates.query
    ids = [
        pk
        for pk in dict.fromkeys([pk for pk, _ in lexical] + [pk for pk, _ in vector])
        if pk in memories
    ]
    if not ids:
        return []

    lexical_rank = {pk: rank for rank, (pk, _) in enumerate(lexical, start=1)}
    lexical_score = dict(lexical)
    similarity = dict(vector)
    if query is not None:
        for pk in ids:
            if pk not in similarity and pk in vectors:
                similarity[pk] = float(vectors[pk] @ query) * candidates.norms.get(pk, 1.0)
    by_similarity = sorted(similarity.items(), key=lambda item: -item[1])
    vector_rank = {pk: rank for rank, (pk, _) in enumerate(by_similarity, start=1)}

    fused = _relative_scores(lexical_score, similarity, settings) if settings.fusion else {}
    query_speakers = _named_speakers(terms, memories.values())
    half_life = settings.recency_half_life_days * 86400.0
    base: dict[int, float] = {}
    components: dict[int, dict[str, Any]] = {}
    for pk in ids:
        memory = memories[pk]
        rrf = 0.0
        parts: dict[str, Any] = {}
        if pk in lexical_rank:
            rrf += settings.lexical_weight / (settings.rrf_k + lexical_rank[pk])
            parts["lexical_rank"] = lexical_rank[pk]
            parts["lexical_score"] = round(lexical_score[pk], 6)
        if pk in vector_rank:
            rrf += settings.vector_weight / (settings.rrf_k + vector_rank[pk])
            parts["vector_rank"] = vector_rank[pk]
            parts["vector_similarity"] = round(similarity[pk], 6)
        if settings.fusion:
            rrf = (1 - settings.fusion) * rrf + settings.fusion * fused.get(pk, 0.0)
        parts["rrf"] = round(rrf, 6)
        age = max((now - memory.observed_at).total_seconds(), 0.0)
        recency = (1 - settings.recency_weight) + settings.recency_weight * 0.5 ** (age / half_life)
        parts["recency"] = round(recency, 6)
        factor = recency
        if conversation_id and memory.conversation_id == conversation_id:
            factor *= 1 + settings.conversation_boost
            parts["conversation_boost"] = settings.conversation_boost
        if query_speakers and _speaker(memory) in query_speakers:
            factor *= 1 + settings.speaker_boost
            parts["speaker_boost"] = settings.speaker_boost
        base[pk] = rrf * factor
        components[pk] = parts

    scores = _smooth_neighbours(base, memories, components, settings)
    ranked = _mmr(scores, vectors, top_k, settings, components, floor=candidates.similarity_floor)
    if passed_over is not None:
        chosen = set(ranked)
        passed_over.extend(
            SearchHit(memory=memories[pk], score=round(scores[pk], 6), components=components[pk])
            for pk in sorted(scores, key=lambda pk: -scores[pk])[:top_k]
            if pk not in chosen
        )
    return [
        SearchHit(memory=memories[pk], score=round(scores[pk], 6), components=components[pk])
        for pk in ranked
    ]


def _relative_scores(
    lexical: dict[int, float], similarity: dict[int, float], settings: SearchSettings
) -> dict[int, float]:
    """Relative score fusion: each side's scores min-max scaled over the pool, weighted,
    summed, and put on the scale of RRF's best possible score (so the two mix)."""
    fused: dict[int, float] = {}
    scale = 1.0 / (settings.rrf_k + 1)
    for scores, weight in (
        (lexical, settings.lexical_weight),
        (similarity, settings.vector_weight),
    ):
        if not scores:
            continue
        low, high = min(scores.values()), max(scores.values())
        for pk, value in scores.items():
            scaled = (value - low) / (high - low) if high > low else 1.0
            fused[pk] = fused.get(pk, 0.0) + weight * scale * scaled
    return fused


def _named_speakers(terms: list[str], memories) -> set[str]:
    """Speakers of the candidate memories whose (first) name the query mentions."""
    wanted = set(terms)
    named: set[str] = set()
    for memory in memories:
        speaker = _speaker(memory)
        if speaker and speaker not in named:
            parts = tokenize(speaker, search_mode=False)
            if parts and (speaker in wanted or parts[0] in wanted):
                named.add(speaker)
    return named


def _smooth_neighbours(
    base: dict[int, float],
    memories: dict[int, Memory],
    components: dict[int, dict[str, Any]],
    settings: SearchSettings,
) -> dict[int, float]:
    """score += w * best score of the hit's adjacent turns (same conversation) in the pool."""
    if settings.neighbour_weight <= 0 and settings.session_weight <= 0:
        return dict(base)
    position: dict[tuple[str, int], int] = {}
    for pk in base:
        memory = memories[pk]
        turn = _turn(memory)
        if memory.conversation_id and turn is not None:
            position[(memory.conversation_id, turn)] = pk
    scores = dict(base)
    for (conversation, turn), pk in position.items():
        neighbours = [
            base[other]
            for other in (
                position.get((conversation, turn - 1)),
                position.get((conversation, turn + 1)),
            )
            if other is not None
        ]
        if neighbours:
            bonus = settings.neighbour_weight * max(neighbours)
            scores[pk] += bonus
            components[pk]["neighbour_bonus"] = round(bonus, 6)
    if settings.session_weight > 0:
        by_conversation: dict[str, list[int]] = {}
        for pk in base:
            conversation = memories[pk].conversation_id
            if conversation:
                by_conversation.setdefault(conversation, []).append(pk)
        for members in by_conversation.values():
            if len(members) < 2:
                continue
            ranked = sorted(members, key=lambda pk: -base[pk])
            for pk in members:
                other = ranked[1] if ranked[0] == pk else ranked[0]
                bonus = settings.session_weight * base[other]
                scores[pk] += bonus
                components[pk]["session_bonus"] = round(bonus, 6)
    return scores


def _mmr(
    scores: dict[int, float],
    vectors: dict[int, np.ndarray],
    top_k: int,
    settings: SearchSettings,
    components: dict[int, dict[str, Any]],
    *,
    floor: float = 0.0,
) -> list[int]:
    """Maximal marginal relevance over the best candidates (relevance scaled to [0, 1];
    redundancy is the cosine on the usual scale: a model's `floor`, what unrelated texts score,
    counts as not alike at all)."""
    ordered = sorted(scores, key=lambda pk: -scores[pk])
    for pk in ordered:
        components[pk]["score_before_mmr"] = round(scores[pk], 6)
    if settings.mmr_lambda >= 1 or not vectors:
        return ordered[:top_k]
    pool = ordered[: max(top_k * 3, top_k + 10)]
    top = scores[pool[0]] or 1.0
    lam = settings.mmr_lambda
    relevance = np.array([scores[pk] / top for pk in pool])
    # Candidates without a vector (not embedded yet) are never penalized as redundant.
    has_vector = np.array([pk in vectors for pk in pool])
    matrix = np.stack(
        [
            vectors[pk] if pk in vectors else np.zeros_like(next(iter(vectors.values())))
            for pk in pool
        ]
    )
    redundancy = np.zeros(len(pool))
    available = np.ones(len(pool), dtype=bool)
    chosen: list[int] = []
    while available.any() and len(chosen) < top_k:
        value = np.where(available, lam * relevance - (1 - lam) * redundancy, -np.inf)
        index = int(np.argmax(value))
        pk = pool[index]
        chosen.append(pk)
        available[index] = False
        components[pk]["mmr"] = round(float(value[index]), 6)
        components[pk]["mmr_redundancy"] = round(float(redundancy[index]), 6)
        if has_vector[index]:
            similarity = np.where(
                has_vector, np.clip((matrix @ matrix[index] - floor) / (1.0 - floor), 0.0, 1.0), 0.0
            )
            redundancy = np.maximum(redundancy, similarity)
    for index in np.flatnonzero(available):  # passed over: how alike a chosen hit they were
        components[pool[index]]["mmr_redundancy"] = round(float(redundancy[index]), 6)
    return chosen


def with_settings(**changes: Any) -> SearchSettings:
    """DEFAULT_SETTINGS with some fields changed (benchmarks, experiments)."""
    return replace(DEFAULT_SETTINGS, **changes)
