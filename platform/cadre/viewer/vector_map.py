"""The vector-space map: a 2-D PCA projection of a selection's embeddings with KMeans clusters
labelled by their most distinctive terms (c-TF-IDF), computed in a Celery task and kept as a
MemoryMap row with its parameters; a search query can be placed on it with its top hits.

PCA rather than UMAP: it is linear and deterministic (the same memories give the same map, and
a query is projected by the same matrix the memories were), takes about a second at 100k
vectors on two cores, and needs nothing beyond scikit-learn. UMAP keeps local neighbourhoods
better but costs minutes at that size; it is offered (`method=umap`) only where umap-learn is
installed, and then a query is placed at the centre of its hits.

At 100k points: the vectors are read in PostgreSQL's binary format, PCA (randomized SVD) is
fitted on a sample of FIT_SAMPLE and projects every point, MiniBatchKMeans clusters every
point, and the c-TF-IDF labels are counted over LABEL_SAMPLE texts. The points are stored
packed (`points_data`, 18 bytes a point) and served `display` at a time (a fixed random
subset when the map has more), with `sample_size` (points on the map) and `shown` saying so.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import time
from datetime import datetime, timedelta

import numpy as np
import psycopg
from django.db import connections, transaction
from django.db.models import CharField, Func
from django.db.models.functions import Left
from django.utils import timezone

from cadre.errors import InvalidInput
from cadre.memory import embeddings, personal_reads, selectors
from cadre.memory.embeddings import vector_type
from cadre.memory.models import (
    EmbeddingModel,
    Memory,
    MemoryEmbedding,
    MemoryMap,
    MemoryTask,
    Scope,
    Verification,
)
from cadre.memory.search import binary_connection
from cadre.memory.services.common import enqueue
from cadre.memory.text import STOP_WORDS, tokenize
from cadre.viewer import cache

METHODS = ("pca", "umap") if importlib.util.find_spec("umap") else ("pca",)
DEFAULT_SAMPLE = 100_000
MAX_SAMPLE = 100_000
DEFAULT_DISPLAY = 20_000
FIT_SAMPLE = 20_000
LABEL_SAMPLE = 20_000
MAX_CLUSTERS = 30
LABEL_TERMS = 3
SEED = 0
# A map still computing after this long is taken for lost (its worker died) and requested anew.
COMPUTE_TIMEOUT = timedelta(minutes=10)
PREVIEW_CHARS = 80
CHUNK = 10_000


def map_scope_keys(actor, scope_keys: list[str] | None) -> list[str]:
    """The scopes a map covers: the requested ones the actor may read (default: every scope it
    reads whole — its own, its agents', departments', positions', the organization's, and for
    admins the agent and personal scopes holding memory, as the timeline counts them). A map is
    over whole scopes, so anyone who may read them may see it: memories about the actor kept in
    a scope it does not read whole stay off the map."""
    keys = selectors.narrow_scope_keys(actor, scope_keys)
    if not scope_keys and selectors.acting_member(actor) is not None:
        whole = [
            scope
            for scope, permission in (
                (Scope.AGENT, "memory.view"),
                (Scope.USER, selectors.PERSONAL_PERMISSION),
            )
            if actor.has(permission)
        ]
        if whole and selectors.can_read_memory(actor):
            keys += (
                selectors.memory_queryset(actor)
                .filter(scope__in=whole)
                .values_list("scope_key", flat=True)
                .order_by()  # the model's ordering would join the DISTINCT
                .distinct()
            )
    return sorted(set(keys))


def map_is_stale(memory_map: MemoryMap) -> bool:
    """Has the selection changed since the map was requested: a memory written, changed or
    deleted since, or a vector added (the map counts the active memories with a vector)?"""
    # The selection's vectors whatever their memory's status: a deletion shows here too.
    changed = MemoryEmbedding.objects.filter(
        model=memory_map.model,
        memory__organization_id=memory_map.organization_id,
        memory__scope_key__in=memory_map.scope_keys,
        memory__updated_at__gt=memory_map.created_at,
    )
    if memory_map.kinds:
        changed = changed.filter(memory__kind__in=memory_map.kinds)
    return changed.exists() or _selection_rows(memory_map).count() != memory_map.total


def map_params(*, method: str = "pca", sample: int | None = None, clusters: int | None = None):
    if method not in METHODS:
        raise InvalidInput(
            f"Unknown projection {method!r}.", details={"method": [f"One of: {list(METHODS)}"]}
        )
    sample = DEFAULT_SAMPLE if sample is None else int(sample)
    if not 1 <= sample <= MAX_SAMPLE:
        raise InvalidInput(
            f"sample must be between 1 and {MAX_SAMPLE}.", details={"sample": [f"1..{MAX_SAMPLE}"]}
        )
    if clusters is not None and not 1 <= int(clusters) <= MAX_CLUSTERS:
        raise InvalidInput(
            f"clusters must be between 1 and {MAX_CLUSTERS}.",
            details={"clusters": [f"1..{MAX_CLUSTERS}"]},
        )
    return {"method": method, "sample": sample, "clusters": clusters, "seed": SEED}


def selection_hash(organization_id: int, keys, kinds, model_id: str, params: dict) -> str:
    document = json.dumps(
        [organization_id, sorted(keys), sorted(kinds or []), model_id, params], sort_keys=True
    )
    return hashlib.sha256(document.encode()).hexdigest()


def _model(organization, model_id: str | None) -> EmbeddingModel:
    """The organization's active model, or one it has used (another's is unknown here)."""
    if not model_id:
        return embeddings.active_model(organization)
    model = EmbeddingModel.objects.filter(pk=model_id, uses__organization=organization).first()
    if model is None:
        raise InvalidInput(
            f"Unknown embedding model {model_id!r}.", details={"model": ["Unknown."]}
        )
    return model


@transaction.atomic
def memory_map_request(
    *, actor, scope_keys, kinds=None, model_id=None, refresh: bool = False, **options
) -> tuple[MemoryMap | None, MemoryMap | None]:
    """(newest ready map, map being computed) for the selection; asks for a computation when
    there is no ready map or `refresh` is set. A cache entry, not a change of memory: it holds
    ids and numbers only and is not audited."""
    keys = map_scope_keys(actor, scope_keys)
    model = _model(actor.organization, model_id)
    params = map_params(**options)
    selection = selection_hash(actor.organization.pk, keys, kinds, model.pk, params)
    maps = MemoryMap.objects.filter(organization=actor.organization, selection=selection)
    ready = maps.filter(status=MemoryMap.Status.READY).first()
    computing = maps.filter(
        status=MemoryMap.Status.COMPUTING, created_at__gte=timezone.now() - COMPUTE_TIMEOUT
    ).first()
    # A ready map older than the selection's last change is served while a new one is
    # computed: the map never says "3 of 3" for long where the timeline counts 12.
    # Checked once per data version (a memory's save starts a new one) and cache lifetime (a
    # vector added by a task shows within it): a ready map's body stays a cache read.
    stale = (
        ready is not None
        and computing is None
        and cache.cached(actor, "map-stale", {"map": ready.pk}, lambda: map_is_stale(ready))
    )
    if (ready is None or refresh or stale) and computing is None and keys:
        computing = MemoryMap.objects.create(
            organization=actor.organization,
            selection=selection,
            scope_keys=keys,
            kinds=sorted(kinds or []),
            model=model,
            params=params,
        )
        enqueue(
            MemoryTask.Kind.MAP,
            organization=actor.organization,
            memory=None,
            key=f"map:{computing.pk}",
            params={"map_id": computing.pk},
        )
    return ready, computing


def _selection_rows(memory_map: MemoryMap):
    rows = MemoryEmbedding.objects.filter(
        model=memory_map.model,
        memory__organization_id=memory_map.organization_id,
        memory__scope_key__in=memory_map.scope_keys,
        memory__status=Memory.Status.ACTIVE,
    )
    if memory_map.kinds:
        rows = rows.filter(memory__kind__in=memory_map.kinds)
    return rows


def _chunks(values: list, size: int = CHUNK):
    for start in range(0, len(values), size):
        yield values[start : start + size]


def _label_words(text: str) -> list[str]:
    """Words worth naming a cluster by: Chinese segmented, English unstemmed (readable),
    without stop words, stray letters and bare numbers."""
    return [
        token
        for token in tokenize(text, search_mode=False, stemmed=False)
        if token not in STOP_WORDS
        and not token.isdigit()
        and (len(token) > 1 or not token.isascii())
        and any(ch.isalnum() for ch in token)
    ]


def cluster_terms(texts: list[str], labels, k: int) -> list[list[str]]:
    """The most distinctive terms per cluster, by class-based TF-IDF: a cluster's documents
    joined into one, term frequency within it times log(1 + mean words per cluster / the
    term's frequency over all clusters)."""
    # lazy: heavy — scikit-learn loads in the map task, not in every process importing this.
    from sklearn.feature_extraction.text import CountVectorizer

    words: list[list[str]] = [[] for _ in range(k)]
    for text, label in zip(texts, labels, strict=True):
        words[int(label)].extend(_label_words(text))
    try:
        vectorizer = CountVectorizer(analyzer=lambda document: document)
        counts = vectorizer.fit_transform(words).toarray().astype(float)
    except ValueError:  # no words at all
        return [[] for _ in range(k)]
    terms = vectorizer.get_feature_names_out()
    per_cluster = counts.sum(axis=1, keepdims=True)
    tf = np.divide(counts, per_cluster, out=np.zeros_like(counts), where=per_cluster > 0)
    mean_words = counts.sum() / k
    frequency = counts.sum(axis=0)
    idf = np.log(1 + mean_words / np.maximum(frequency, 1))
    scores = tf * idf
    return [
        [
            str(terms[i])
            for i in np.argsort(-scores[c], kind="stable")[:LABEL_TERMS]
            if scores[c, i] > 0
        ]
        for c in range(k)
    ]


def pack_points(ids, xy, labels) -> bytes:
    """Points as four arrays back to back: int64 ids, float32 x, float32 y, int16 clusters."""
    ids = np.asarray(ids, dtype="<i8")
    xy = np.asarray(xy, dtype="<f4").reshape(-1, 2)
    return b"".join(
        [
            ids.tobytes(),
            np.ascontiguousarray(xy[:, 0]).tobytes(),
            np.ascontiguousarray(xy[:, 1]).tobytes(),
            np.asarray(labels, dtype="<i2").tobytes(),
        ]
    )


def unpack_points(memory_map: MemoryMap):
    """(ids, x, y, clusters) as numpy arrays, from the packed points or a map stored before
    them (JSON rows)."""
    data = bytes(memory_map.points_data or b"")
    if data:
        n = len(data) // 18
        ids = np.frombuffer(data, dtype="<i8", count=n)
        x = np.frombuffer(data, dtype="<f4", count=n, offset=8 * n)
        y = np.frombuffer(data, dtype="<f4", count=n, offset=12 * n)
        clusters = np.frombuffer(data, dtype="<i2", count=n, offset=16 * n)
        return ids, x, y, clusters
    rows = memory_map.points or []
    return (
        np.asarray([row[0] for row in rows], dtype=np.int64),
        np.asarray([row[1] for row in rows], dtype=np.float32),
        np.asarray([row[2] for row in rows], dtype=np.float32),
        np.asarray([row[3] for row in rows], dtype=np.int16),
    )


def _vectors(memory_map: MemoryMap, ids: list[int]) -> tuple[list[int], np.ndarray]:
    """The selection's vectors for `ids`, read in PostgreSQL's binary format (a memory copy
    a row, rather than parsing 384 floats of text)."""
    raw = binary_connection()
    found: list[int] = []
    vectors: list[np.ndarray] = []
    cast = vector_type(memory_map.model)
    sql = (
        f"SELECT memory_id, embedding::{cast} FROM {MemoryEmbedding._meta.db_table} "  # noqa: S608
        "WHERE model_id = %s AND memory_id = ANY(%s) ORDER BY memory_id"
    )
    with psycopg.Cursor(raw) as cursor:  # Django's cursors bind client-side: no binary results
        for chunk in _chunks(ids, 20_000):
            cursor.execute(sql, [memory_map.model_id, chunk], binary=True)
            for memory_id, vector in cursor.fetchall():
                found.append(int(memory_id))
                array = vector.to_numpy() if hasattr(vector, "to_numpy") else vector
                vectors.append(np.asarray(array, dtype=np.float32))
    if not vectors:
        return [], np.zeros((0, 0), dtype=np.float32)
    return found, np.vstack(vectors)


def map_compute(memory_map: MemoryMap) -> dict:
    """Project, cluster and label the selection (sampled beyond `params.sample`)."""
    # lazy: heavy — scikit-learn loads in the map task, not in every process importing this.
    from sklearn.cluster import MiniBatchKMeans
    from sklearn.decomposition import PCA

    started = time.monotonic()
    params = memory_map.params
    seed = params.get("seed", SEED)
    rng = np.random.default_rng(seed)
    rows = _selection_rows(memory_map)
    ids = list(rows.order_by("memory_id").values_list("memory_id", flat=True))
    total = len(ids)
    if total > params["sample"]:
        ids = sorted(int(pk) for pk in rng.choice(ids, params["sample"], replace=False))
    ids, matrix = _vectors(memory_map, ids)
    n = len(ids)
    clusters, projection, strength = [], {}, None
    xy, labels = np.zeros((0, 2)), np.zeros(0, dtype=np.int16)
    if n:
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        matrix = matrix / np.where(norms > 0, norms, 1)
        if n >= 2:
            fit = matrix
            if n > FIT_SAMPLE:
                fit = matrix[np.sort(rng.choice(n, FIT_SAMPLE, replace=False))]
            pca = PCA(n_components=2, svd_solver="randomized", random_state=seed).fit(fit)
            xy = pca.transform(matrix)
            projection = {
                "mean": pca.mean_.round(6).tolist(),
                "components": pca.components_.round(6).tolist(),
                "explained_variance": pca.explained_variance_ratio_.round(4).tolist(),
                "fit_sample": len(fit),
            }
        else:
            xy = np.zeros((1, 2))
        k = params.get("clusters") or max(1, min(12, round(math.sqrt(n / 10))))
        k = min(k, n)
        kmeans = MiniBatchKMeans(
            n_clusters=k, random_state=seed, n_init=3, batch_size=4096, max_iter=100
        )
        labels = kmeans.fit_predict(matrix)
        centroids = kmeans.cluster_centers_
        centroids = centroids / np.maximum(np.linalg.norm(centroids, axis=1, keepdims=True), 1e-12)
        strength = round(float(np.mean(np.sum(matrix * centroids[labels], axis=1))), 4)
        labelled = np.arange(n)
        if n > LABEL_SAMPLE:
            labelled = np.sort(rng.choice(n, LABEL_SAMPLE, replace=False))
        texts: dict[int, str] = {}
        chosen = [ids[i] for i in labelled]
        # Through the memory gate as the map job, within the selection's scopes (which the
        # requesting actor's reach decided, `map_scope_keys`). Not audited: the labels are a
        # few frequent words per cluster, shown only to those who read the selection.
        reader = selectors.system_reader(
            memory_map.organization,
            job="memory map",
            reason="label the clusters of a memory map with their frequent words",
        )
        readable = selectors.memory_queryset(reader, scope_keys=list(memory_map.scope_keys))
        for chunk in _chunks(chosen):
            # Labels are read by everyone who reads the map: never words of a memory still
            # waiting for review (only its writer and the reviewers may read those).
            texts.update(
                readable.filter(pk__in=chunk, verification=Verification.VERIFIED).values_list(
                    "pk", "content"
                )
            )
        terms = cluster_terms([texts.get(pk, "") for pk in chosen], labels[labelled], k)
        for c in range(k):
            members = labels == c
            centre = xy[members].mean(axis=0) if members.any() else np.zeros(2)
            clusters.append(
                {
                    "id": c,
                    "label": " · ".join(terms[c]) or f"cluster {c + 1}",
                    "terms": terms[c],
                    "size": int(members.sum()),
                    "x": round(float(centre[0]), 4),
                    "y": round(float(centre[1]), 4),
                }
            )
    memory_map.total = total
    memory_map.sample_size = n
    memory_map.points = []
    memory_map.points_data = pack_points(ids, np.round(xy, 4), labels)
    memory_map.clusters = clusters
    memory_map.projection = projection
    memory_map.association_strength = strength
    memory_map.status = MemoryMap.Status.READY
    memory_map.computed_at = timezone.now()
    memory_map.compute_ms = int((time.monotonic() - started) * 1000)
    memory_map.save()
    # Older ready maps of the selection stay for association strength's trend (ids only).
    return {"map": memory_map.pk, "points": n, "total": total, "ms": memory_map.compute_ms}


def map_failed(memory_map_id: int, error: str) -> None:
    MemoryMap.objects.filter(pk=memory_map_id).update(
        status=MemoryMap.Status.FAILED, error=error[:2000]
    )


class IsoTime(Func):
    """A time in UTC as DRF writes it: ISO 8601 with a "Z", microseconds only when not 0."""

    output_field = CharField()
    template = (
        "CASE WHEN date_trunc('second', %(expressions)s) = %(expressions)s "
        "THEN to_char(%(expressions)s AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') "
        "ELSE to_char(%(expressions)s AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') "
        "END"
    )


def displayed(memory_map: MemoryMap, display: int = DEFAULT_DISPLAY):
    """The (ids, x, y, clusters) served: every point, or beyond `display` a fixed random
    subset of them (the same for every request of the map), in id order."""
    ids, x, y, clusters = unpack_points(memory_map)
    if len(ids) > display:
        rng = np.random.default_rng(memory_map.params.get("seed", SEED))
        keep = np.sort(rng.choice(len(ids), display, replace=False))
        ids, x, y, clusters = ids[keep], x[keep], y[keep], clusters[keep]
    return ids, x, y, clusters


def map_points_json(actor, memory_map: MemoryMap, display: int = DEFAULT_DISPLAY) -> str:
    """The map's points shown (see `displayed`) the actor may still read (a deleted memory
    drops out at once), with kind, age and a preview for hovering: a JSON array written by
    the database, in the order `displayed` gives (20k points are 5 MB of JSON, which Python
    would build and encode twice over)."""
    ids, xs, ys, clusters = displayed(memory_map, display)
    # The readable memories among the shown ids (one array parameter rather than 20k
    # placeholders), their time written as the API writes it.
    readable = (
        selectors.memory_queryset(actor, scope_keys=memory_map.scope_keys)
        .filter(status=Memory.Status.ACTIVE)
        .extra(where=["memory_memory.id = ANY(%s::bigint[])"], params=[_array(ids)])
        .annotate(preview=Left("content", PREVIEW_CHARS), created=IsoTime("created_at"))
        .order_by()
        .values("id", "kind", "scope_key", "created", "preview")
    )
    if personal_reads.reader_id(actor) is not None:
        # The statement below reads past the gate's watch on fetched rows: the personal memories
        # it would preview are noted here (one small query, for such readers only).
        list(readable.filter(scope=Scope.USER).values("id", "scope_key", "subject_id"))
    readable_sql, readable_params = readable.query.get_compiler(using=readable.db).as_sql()
    labels = {str(cluster["id"]): cluster["label"] for cluster in memory_map.clusters}
    # row_to_json writes a row without spaces; the rounding is Python's, as before. The only
    # text set into the statement is the compiled queryset's (its values are parameters).
    statement = f"""
        SELECT '[' || coalesce(string_agg(row_to_json(point)::text, ',' ORDER BY p.n), '') || ']'
        FROM unnest(%s::bigint[], %s::float8[], %s::float8[], %s::int[])
             WITH ORDINALITY AS p (id, x, y, cluster, n)
        JOIN ({readable_sql}) AS m ON m.id = p.id
        CROSS JOIN LATERAL (
            SELECT p.id, p.x, p.y, p.cluster, coalesce(%s::jsonb ->> p.cluster::text, '') AS label,
                   m.kind, m.scope_key, m.created AS created_at, m.preview
        ) AS point"""  # noqa: S608
    point_params = [
        _array(ids),
        _array(np.round(xs.astype(np.float64), 4)),
        _array(np.round(ys.astype(np.float64), 4)),
        _array(clusters),
    ]
    with connections[readable.db].cursor() as cursor:
        cursor.execute(statement, [*point_params, *readable_params, json.dumps(labels)])
        return cursor.fetchone()[0]


def _array(values: np.ndarray) -> str:
    """A PostgreSQL array literal of numbers (their shortest repr, as JSON would write them)."""
    return "{" + ",".join(map(repr, values.tolist())) + "}"


def map_points(actor, memory_map: MemoryMap, display: int = DEFAULT_DISPLAY) -> list[dict]:
    """`map_points_json` as Python objects."""
    return json.loads(map_points_json(actor, memory_map, display))


def map_query(actor, memory_map: MemoryMap, query: str, *, top_k: int = 10) -> dict:
    """Where a search query falls on the map (projected like the memories) and its top hits,
    as retrieval ranks them over the map's scopes."""
    result = selectors.memory_search(
        actor=actor,
        query=query,
        top_k=top_k,
        scope_keys=memory_map.scope_keys,
        kinds=memory_map.kinds or None,
        force=True,
    )
    ids, xs, ys, _ = unpack_points(memory_map)
    hit_ids = np.asarray([hit.memory.pk for hit in result.hits], dtype=np.int64)
    where = np.flatnonzero(np.isin(ids, hit_ids))
    positions = {
        int(ids[i]): (round(float(xs[i]), 4), round(float(ys[i]), 4)) for i in where.tolist()
    }
    hits = [
        {
            "id": hit.memory.pk,
            "rank": rank,
            "score": round(float(hit.score), 6),
            "on_map": hit.memory.pk in positions,
            "x": positions.get(hit.memory.pk, (None, None))[0],
            "y": positions.get(hit.memory.pk, (None, None))[1],
        }
        for rank, hit in enumerate(result.hits, start=1)
    ]
    x = y = None
    if memory_map.projection.get("components"):
        vector = np.asarray(
            embeddings.provider_for(memory_map.model).embed([query], query=True)[0],
            dtype=np.float32,
        )
        vector = vector / max(float(np.linalg.norm(vector)), 1e-12)
        mean = np.asarray(memory_map.projection["mean"], dtype=np.float32)
        components = np.asarray(memory_map.projection["components"], dtype=np.float32)
        x, y = (float(v) for v in components @ (vector - mean))
    elif placed := [hit for hit in hits if hit["on_map"]]:
        x = sum(hit["x"] for hit in placed) / len(placed)
        y = sum(hit["y"] for hit in placed) / len(placed)
    return {
        "text": query,
        "x": None if x is None else round(x, 4),
        "y": None if y is None else round(y, 4),
        "hits": hits,
    }


def map_history(actor, *, scope_keys, kinds, since: datetime) -> list[MemoryMap]:
    """Ready maps of the actor's selection (any parameters) since a date, oldest first."""
    keys = map_scope_keys(actor, scope_keys)
    return list(
        MemoryMap.objects.filter(
            organization=actor.organization,
            scope_keys=keys,
            kinds=sorted(kinds or []),
            status=MemoryMap.Status.READY,
            computed_at__gte=since,
        )
        .only("association_strength", "created_at", "computed_at")
        .order_by("computed_at", "pk")
    )
