"""The vector-space map: a 2-D PCA projection of a selection's embeddings with KMeans clusters
labelled by their most distinctive terms (c-TF-IDF), computed in a Celery task and kept as a
MemoryMap row with its parameters; a search query can be placed on it with its top hits.

PCA rather than UMAP: it is linear and deterministic (the same memories give the same map, and
a query is projected by the same matrix the memories were), takes about a second at 100k
vectors on two cores, and needs nothing beyond scikit-learn. UMAP keeps local neighbourhoods
better but costs minutes at that size; it is offered (`method=umap`) only where umap-learn is
installed, and then a query is placed at the centre of its hits.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import time
from datetime import datetime, timedelta

import numpy as np
from django.db import transaction
from django.db.models.functions import Left
from django.utils import timezone

from cadre.errors import InvalidInput
from cadre.memory import embeddings, selectors
from cadre.memory.models import (
    EmbeddingModel,
    Memory,
    MemoryEmbedding,
    MemoryMap,
    MemoryTask,
)
from cadre.memory.services.common import enqueue
from cadre.memory.text import STOP_WORDS, tokenize

METHODS = ("pca", "umap") if importlib.util.find_spec("umap") else ("pca",)
DEFAULT_SAMPLE = 20_000
MAX_SAMPLE = 100_000
MAX_CLUSTERS = 30
LABEL_TERMS = 3
SEED = 0
# A map still computing after this long is taken for lost (its worker died) and requested anew.
COMPUTE_TIMEOUT = timedelta(minutes=10)
PREVIEW_CHARS = 80
CHUNK = 10_000


def map_scope_keys(actor, scope_keys: list[str] | None) -> list[str]:
    """The scopes a map covers: the requested ones the actor may read (default: every readable
    scope). A map is over whole scopes, so anyone who may read them may see it."""
    return sorted(selectors.narrow_scope_keys(actor, scope_keys))


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


def _model(model_id: str | None) -> EmbeddingModel:
    if not model_id:
        return embeddings.active_model()
    model = EmbeddingModel.objects.filter(pk=model_id).first()
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
    model = _model(model_id)
    params = map_params(**options)
    selection = selection_hash(actor.organization.pk, keys, kinds, model.pk, params)
    maps = MemoryMap.objects.filter(organization=actor.organization, selection=selection)
    ready = maps.filter(status=MemoryMap.Status.READY).first()
    computing = maps.filter(
        status=MemoryMap.Status.COMPUTING, created_at__gte=timezone.now() - COMPUTE_TIMEOUT
    ).first()
    if (ready is None or refresh) and computing is None and keys:
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


def map_compute(memory_map: MemoryMap) -> dict:
    """Project, cluster and label the selection (sampled beyond `params.sample`)."""
    from sklearn.cluster import KMeans
    from sklearn.decomposition import PCA

    started = time.monotonic()
    params = memory_map.params
    rows = _selection_rows(memory_map)
    ids = list(rows.order_by("memory_id").values_list("memory_id", flat=True))
    total = len(ids)
    if total > params["sample"]:
        rng = np.random.default_rng(params.get("seed", SEED))
        ids = sorted(int(pk) for pk in rng.choice(ids, params["sample"], replace=False))
    vectors: dict[int, np.ndarray] = {}
    texts: dict[int, str] = {}
    for chunk in _chunks(ids):
        for memory_id, vector in rows.filter(memory_id__in=chunk).values_list(
            "memory_id", "embedding"
        ):
            vectors[memory_id] = np.asarray(vector, dtype=np.float32)
        texts.update(Memory.objects.filter(pk__in=chunk).values_list("pk", "content"))
    ids = [pk for pk in ids if pk in vectors]
    n = len(ids)
    points, clusters, projection, strength = [], [], {}, None
    if n:
        matrix = np.vstack([vectors[pk] for pk in ids])
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        matrix = matrix / np.where(norms > 0, norms, 1)
        if n >= 2:
            pca = PCA(n_components=2, random_state=params.get("seed", SEED)).fit(matrix)
            xy = pca.transform(matrix)
            projection = {
                "mean": pca.mean_.round(6).tolist(),
                "components": pca.components_.round(6).tolist(),
                "explained_variance": pca.explained_variance_ratio_.round(4).tolist(),
            }
        else:
            xy = np.zeros((1, 2))
        k = params.get("clusters") or max(1, min(12, round(math.sqrt(n / 10))))
        k = min(k, n)
        kmeans = KMeans(n_clusters=k, random_state=params.get("seed", SEED), n_init=3)
        labels = kmeans.fit_predict(matrix)
        centroids = kmeans.cluster_centers_
        centroids = centroids / np.maximum(np.linalg.norm(centroids, axis=1, keepdims=True), 1e-12)
        strength = round(float(np.mean(np.sum(matrix * centroids[labels], axis=1))), 4)
        terms = cluster_terms([texts.get(pk, "") for pk in ids], labels, k)
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
        points = [
            [pk, round(float(x), 4), round(float(y), 4), int(label)]
            for pk, (x, y), label in zip(ids, xy, labels, strict=True)
        ]
    memory_map.total = total
    memory_map.sample_size = n
    memory_map.points = points
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


def map_points(actor, memory_map: MemoryMap) -> list[dict]:
    """The map's points the actor may still read (a deleted memory drops out at once), with
    kind, age and a preview for hovering."""
    ids = [row[0] for row in memory_map.points]
    # One array parameter rather than 20k placeholders: the statement stays short to parse.
    details = {
        pk: (kind, key, created_at.isoformat().replace("+00:00", "Z"), preview)
        for pk, kind, key, created_at, preview in selectors.memory_queryset(
            actor, scope_keys=memory_map.scope_keys
        )
        .filter(status=Memory.Status.ACTIVE)
        .extra(where=["memory_memory.id = ANY(%s)"], params=[ids])
        .annotate(preview=Left("content", PREVIEW_CHARS))
        .values_list("id", "kind", "scope_key", "created_at", "preview")
    }
    labels = {cluster["id"]: cluster["label"] for cluster in memory_map.clusters}
    points = []
    for pk, x, y, cluster in memory_map.points:
        if (found := details.get(pk)) is not None:
            kind, key, created_at, preview = found
            points.append(
                {
                    "id": pk,
                    "x": x,
                    "y": y,
                    "cluster": cluster,
                    "label": labels.get(cluster, ""),
                    "kind": kind,
                    "scope_key": key,
                    "created_at": created_at,
                    "preview": preview,
                }
            )
    return points


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
    positions = {row[0]: (row[1], row[2]) for row in memory_map.points}
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
            embeddings.provider_for(memory_map.model).embed([query])[0], dtype=np.float32
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
