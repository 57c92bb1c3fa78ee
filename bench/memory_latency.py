"""Memory search latency and ANN recall at scale: p50/p95 of the memory gate's search
(`selectors.memory_search`, as a named system reader) with scope filters over synthetic
memories, and the HNSW recall@10 against exact search.

    python bench/memory_latency.py                 # 100,000 memories over 100 organizations
    python bench/memory_latency.py --scale 1000000

Synthetic data, no model needed: each memory has a few words from a Zipf-distributed
vocabulary (so the full-text side has real work) and a 384-d unit vector drawn around one of
2,000 topic centroids (clustered like real embeddings; uniform random vectors would be an
unrealistically hard case for any ANN index). Organizations have Zipf-like sizes (the largest
holds ~19 % of the rows at 100 orgs), each with an organization scope, departments and users.
A query searches one user's readable scopes: [user, their department, organization].

Compared in the same run: the product path (planner's choice, HNSW with iterative scan), the
same search with exact vector search (`enable_indexscan = off`), and the vector side with
iterative scan off (how many of the k rows a filtered HNSW scan loses without it).
Runs in its own database (default `cadre_bench_latency`, dropped unless --keepdb).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "platform")]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cadre.settings")
os.environ.setdefault("LOG_LEVEL", "WARNING")

DIMENSION = 384
MODEL_ID = "bench/random-384"


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


class Corpus:
    """Deterministic synthetic memories: words, topics, vectors, scopes."""

    def __init__(self, seed: int) -> None:
        import numpy as np

        self.rng = np.random.default_rng(seed)
        syllables = ["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "pa", "do", "fi"]
        self.vocabulary = [
            "".join(self.rng.choice(syllables, size=self.rng.integers(2, 4)))
            + str(index % 7 if index % 3 == 0 else "")
            for index in range(4000)
        ]
        ranks = np.arange(1, len(self.vocabulary) + 1)
        self.word_p = (1 / ranks) / (1 / ranks).sum()
        centroids = self.rng.standard_normal((2000, DIMENSION)).astype(np.float32)
        self.centroids = centroids / np.linalg.norm(centroids, axis=1, keepdims=True)

    def words(self, count: int) -> str:
        return " ".join(self.rng.choice(self.vocabulary, size=count, p=self.word_p))

    def vectors(self, count: int):
        import numpy as np

        topics = self.rng.integers(0, len(self.centroids), size=count)
        noise = self.rng.standard_normal((count, DIMENSION)).astype(np.float32)
        noise /= np.linalg.norm(noise, axis=1, keepdims=True)
        vectors = self.centroids[topics] + 0.8 * noise
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def organization_sizes(scale: int, orgs: int) -> list[int]:
    weights = [1 / rank for rank in range(1, orgs + 1)]
    total = sum(weights)
    sizes = [max(50, int(scale * weight / total)) for weight in weights]
    sizes[-1] += scale - sum(sizes)
    return sizes


def scope_layout(size: int) -> tuple[int, int]:
    """(departments, users) of an organization of `size` memories."""
    return max(2, size // 2000), max(5, size // 100)


def load(corpus: Corpus, scale: int, orgs: int) -> dict:
    """Bulk-load organizations, memories (ORM bulk_create) and vectors (binary COPY)."""
    from django.db import connection
    from django.utils import timezone
    from pgvector.psycopg import register_vector

    from cadre.memory.models import EmbeddingModel, Memory, MemoryEmbedding
    from cadre.memory.text import lexical_document
    from cadre.tenancy.models import Organization

    model, _ = EmbeddingModel.objects.get_or_create(
        id=MODEL_ID, defaults={"provider": "test", "name": "random-384", "dimension": DIMENSION}
    )
    layout = {}
    if Memory.objects.exists():
        for organization in Organization.objects.filter(slug__startswith="lat-"):
            size = Memory.objects.filter(organization=organization).count()
            layout[organization.pk] = scope_layout(size)
        return {"model": model, "layout": layout}
    started = time.perf_counter()
    now = timezone.now()
    register_vector(connection.connection)
    table = MemoryEmbedding._meta.db_table
    for index, size in enumerate(organization_sizes(scale, orgs)):
        organization = Organization.objects.create(name=f"Latency {index}", slug=f"lat-{index}")
        departments, users = scope_layout(size)
        layout[organization.pk] = (departments, users)
        draw = corpus.rng.random(size)
        lengths = corpus.rng.integers(6, 20, size=size)
        words = corpus.rng.choice(corpus.vocabulary, size=(size, 20), p=corpus.word_p)
        for start in range(0, size, 5000):
            rows = []
            for position in range(start, min(size, start + 5000)):
                share = draw[position]
                if share < 0.2:
                    scope, scope_id = "organization", None
                elif share < 0.5:
                    scope, scope_id = "department", int(corpus.rng.integers(1, departments + 1))
                else:
                    scope, scope_id = "user", int(corpus.rng.integers(1, users + 1))
                content = " ".join(words[position, : lengths[position]])
                observed = now - timedelta(days=float(corpus.rng.integers(0, 720)))
                rows.append(
                    Memory(
                        organization=organization,
                        scope=scope,
                        scope_id=scope_id,
                        scope_key=scope if scope_id is None else f"{scope}:{scope_id}",
                        content=content,
                        search_text=lexical_document(content),
                        content_hash=str(position),
                        observed_at=observed,
                        created_at=observed,
                        valid_from=observed,
                    )
                )
            created = Memory.objects.bulk_create(rows, batch_size=5000)
            vectors = corpus.vectors(len(created))
            with (
                connection.cursor() as cursor,
                cursor.cursor.copy(
                    f"COPY {table} (memory_id, model_id, embedding, created_at) FROM STDIN "
                    "WITH (FORMAT BINARY)"
                ) as copy,
            ):
                copy.set_types(["int8", "varchar", "vector", "timestamptz"])
                for memory, vector in zip(created, vectors, strict=True):
                    copy.write_row([memory.pk, MODEL_ID, vector, now])
    print(f"loaded {scale} memories in {time.perf_counter() - started:.0f}s", file=sys.stderr)
    return {"model": model, "layout": layout}


def build_index(model) -> None:
    from django.db import connection

    from cadre.memory import embeddings

    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("SET maintenance_work_mem = '1GB'")
        cursor.execute("SET max_parallel_maintenance_workers = 1")
    name = embeddings.ensure_index(model)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memory_memory")
        cursor.execute("ANALYZE memory_memoryembedding")
        cursor.execute("SELECT pg_size_pretty(pg_relation_size(%s))", [name])
        size = cursor.fetchone()[0]
    print(
        f"HNSW index {name} ({size}) ready in {time.perf_counter() - started:.0f}s", file=sys.stderr
    )


def queries(corpus: Corpus, layout: dict, count: int) -> list[dict]:
    import numpy as np

    org_ids = sorted(layout)
    result = []
    for _ in range(count):
        organization_id = int(corpus.rng.choice(org_ids))
        departments, users = layout[organization_id]
        scope_keys = [
            f"user:{int(corpus.rng.integers(1, users + 1))}",
            f"department:{int(corpus.rng.integers(1, departments + 1))}",
            "organization",
        ]
        vector = corpus.vectors(1)[0]
        result.append(
            {
                "organization": organization_id,
                "scope_keys": scope_keys,
                "query": corpus.words(5),
                "vector": np.asarray(vector, dtype=np.float32),
            }
        )
    return result


def measure(args) -> None:
    from django.db import connection, transaction
    from django.utils import timezone

    from cadre.memory import search, selectors
    from cadre.tenancy.models import Organization

    corpus = Corpus(args.seed)
    state = load(corpus, args.scale, args.orgs)
    model = state["model"]
    build_index(model)
    sample = queries(corpus, state["layout"], args.queries)
    # Searches go through the memory gate, as a named system reader per organization (not
    # audited: the benchmark shows its figures to no one but the person running it).
    readers = {
        organization.pk: selectors.system_reader(
            organization, job="benchmark", reason="measure memory search latency"
        )
        for organization in Organization.objects.filter(
            pk__in={item["organization"] for item in sample}
        )
    }

    def gated_search(item, **options):
        return selectors.memory_search(
            actor=readers[item["organization"]],
            scope_keys=item["scope_keys"],
            query=item["query"],
            query_vector=item["vector"],
            model=model,
            force=True,
            **options,
        )

    for item in sample[:5]:  # warm caches and connection
        gated_search(item)

    def timed(mode: str, settings=None, exact: bool = False) -> list[float]:
        times = []
        for item in sample:
            started = time.perf_counter()
            if exact:
                with transaction.atomic(), connection.cursor() as cursor:
                    cursor.execute("SET LOCAL enable_indexscan = off")
                    gated_search(item, mode=mode, settings=settings)
            else:
                gated_search(item, mode=mode, settings=settings)
            times.append((time.perf_counter() - started) * 1000)
        return times

    def report(label: str, times: list[float]) -> None:
        print(
            f"{label:44s} p50={statistics.median(times):6.1f} ms  "
            f"p95={percentile(times, 0.95):6.1f} ms"
        )

    load_average = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    print(
        f"{args.scale} memories, {args.orgs} organizations, {len(sample)} queries, scope "
        f"filter [user, department, organization]; load average {load_average} on "
        f"{os.cpu_count()} CPUs"
    )
    report("hybrid search (product path)", timed("hybrid"))
    report("  lexical side only", timed("lexical"))
    report("  vector side only (product path)", timed("vector"))
    report("  vector side only, exact (indexscan off)", timed("vector", exact=True))

    # ANN recall@10 vs exact search (enable_indexscan = off), for the product's vector side
    # (which compares small filtered sets exactly) and for the HNSW walk alone; and how many
    # of the rows a filtered HNSW walk returns without iterative scan.
    now = timezone.now()
    no_iterative = search.with_settings(iterative_scan=False, ef_search=40)

    def ann(items, label: str) -> None:
        product, hnsw, plain, brute, hnsw_ms, exact_ms = [], [], [], 0, [], []
        for item in items:
            where, params = search._filter_sql(
                organization=item["organization"], scope_keys=item["scope_keys"], now=now
            )
            filtered = search.count_filtered(where, params)
            brute += search.prefer_brute_force(filtered, 50, search.DEFAULT_SETTINGS)
            options = {"limit": 50, "settings": search.DEFAULT_SETTINGS}
            started = time.perf_counter()
            truth = search.vector_candidates(
                item["vector"], model, where, params, exact=True, **options
            )
            exact_ms.append((time.perf_counter() - started) * 1000)
            truth = {pk for pk, _ in truth[:10]}
            chosen = search.vector_candidates(
                item["vector"], model, where, params, filtered=filtered, **options
            )
            started = time.perf_counter()
            walked = search.vector_candidates(item["vector"], model, where, params, **options)
            hnsw_ms.append((time.perf_counter() - started) * 1000)
            without = search.vector_candidates(
                item["vector"], model, where, params, limit=50, settings=no_iterative
            )
            if truth:
                product.append(len(truth & {pk for pk, _ in chosen[:10]}) / len(truth))
                hnsw.append(len(truth & {pk for pk, _ in walked[:10]}) / len(truth))
            plain.append(len(without))
        print(
            f"{label}: ANN recall@10 vs exact: product path {statistics.mean(product):.3f} "
            f"({brute}/{len(items)} compared exactly), HNSW walk {statistics.mean(hnsw):.3f} "
            f"(p50 {statistics.median(hnsw_ms):.1f} ms, p95 {percentile(hnsw_ms, 0.95):.1f}"
            f" ms vs exact p50 {statistics.median(exact_ms):.1f} ms, p95 "
            f"{percentile(exact_ms, 0.95):.1f} ms); rows of 50 without iterative scan: "
            f"{statistics.mean(plain):.1f}"
        )

    ann(sample, "user scopes")
    largest = max(state["layout"], key=lambda pk: state["layout"][pk][1])
    ann(
        [dict(item, organization=largest, scope_keys=["organization"]) for item in sample],
        f"largest org ({_org_size(largest)} memories), organization scope",
    )
    ann(
        [
            dict(item, organization=largest, scope_keys=_all_scopes(largest, state["layout"]))
            for item in sample
        ],
        "largest org, every scope (an admin)",
    )


def _all_scopes(organization_id: int, layout: dict) -> list[str]:
    departments, users = layout[organization_id]
    return (
        ["organization"]
        + [f"department:{d}" for d in range(1, departments + 1)]
        + [f"user:{u}" for u in range(1, users + 1)]
    )


def _org_size(organization_id: int) -> int:
    from cadre.memory.models import Memory

    return Memory.objects.filter(organization_id=organization_id).count()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=int, default=100_000)
    parser.add_argument("--orgs", type=int, default=100)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=20261130)
    parser.add_argument("--database", default="cadre_bench_latency")
    parser.add_argument("--keepdb", action="store_true", help="keep (and reuse) the database")
    args = parser.parse_args()

    import django

    django.setup()
    from django.db import connection
    from django.test.utils import setup_databases, teardown_databases

    connection.settings_dict["TEST"]["NAME"] = args.database
    old_config = setup_databases(
        verbosity=0, interactive=False, keepdb=args.keepdb, serialized_aliases=set()
    )
    try:
        measure(args)
    finally:
        if not args.keepdb:
            teardown_databases(old_config, verbosity=0)


if __name__ == "__main__":
    main()
