"""Memory Viewer speed at 100k memories in one organization: p50/p95 of the timeline,
heatmap, quality and (cached) map endpoints, and the map's background computation time.

    python bench/memory_viewer.py                  # 100,000 memories, one organization
    python bench/memory_viewer.py --scale 20000 --keepdb
    python bench/memory_viewer.py --keepdb --no-cache --skip-compute   # uncached, kept maps

Memories, words and 384-d vectors come from bench/memory_latency.py's generator (one
organization); kinds are spread over the six kinds, every memory has its addition version,
5 % a merge and 3 % a correction, and 20,000 model calls over the last 30 days were each sent
five memories. Requests go through the whole API stack (DRF, session auth) as the owner, who
reads every scope: the widest selection. Runs in its own database (dropped unless --keepdb).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "platform"), str(ROOT / "bench")]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cadre.settings")
os.environ.setdefault("LOG_LEVEL", "WARNING")
# Its own cache keys: test runs sharing the Redis database reuse the bench organization's id.
os.environ.setdefault("CADRE_CACHE_PREFIX", "cadre-bench-viewer")

from memory_latency import Corpus, load, percentile  # noqa: E402 - after sys.path


def enrich(organization_id: int, calls: int) -> None:
    """Kinds, history rows and context records, in set-based SQL."""
    from django.db import connection

    kinds = ["fact", "preference", "requirement", "experience", "tool_trajectory", "summary"]
    history = """INSERT INTO memory_memoryversion (memory_id, version, change, old_content,
          new_content, old_attributes, new_attributes, old_status, new_status, actor_type,
          actor_id, actor_label, reason, created_at)
        SELECT id, %s, %s, '', '', '{}', '{}', 'active', 'active', 'system', '', '', %s,
               CASE WHEN %s = 1 THEN created_at ELSE now() - (id %% 30) * interval '1 day' END
        FROM memory_memory WHERE organization_id = %s AND id %% %s = 0"""
    with connection.cursor() as cursor:
        # The bench's memories are bulk-created in one go: their ids are one contiguous run.
        cursor.execute(
            "SELECT min(id), count(*) FROM memory_memory WHERE organization_id = %s",
            [organization_id],
        )
        first, count = cursor.fetchone()
        # A kept database whose enrichment stopped half-way is enriched again from scratch.
        cursor.execute(
            "DELETE FROM memory_memoryversion WHERE memory_id IN "
            "(SELECT id FROM memory_memory WHERE organization_id = %s)",
            [organization_id],
        )
        cursor.execute(
            "UPDATE memory_memory SET kind = (%s::text[])[1 + (id %% 6)] "
            "WHERE organization_id = %s",
            [kinds, organization_id],
        )
        for version, change, modulo, reason in (
            (1, "addition", 1, ""),
            (2, "merge", 20, "exact duplicate: bench"),
            (3, "correction", 33, ""),
        ):
            cursor.execute(history, [version, change, reason, version, organization_id, modulo])
        cursor.execute(
            """INSERT INTO memory_contextrecord (organization_id, kind, run_id, step_id,
                 trace_id, actor_type, actor_id, query, total_tokens, skills, created_at)
               SELECT %s, 'model_call', g::text, '0', '', 'agent', '1', '', 0, '[]',
                      now() - (g %% 30) * interval '1 day' - (g %% 24) * interval '1 hour'
               FROM generate_series(1, %s) AS g""",
            [organization_id, calls],
        )
        cursor.execute(
            """INSERT INTO memory_contextrecorditem (context_id, memory_id, memory_version,
                 rank, score, tokens, status, source, reason, components)
               SELECT r.id, m.id, 1, k, 1.0, 10,
                      CASE WHEN k = 5 THEN 'dropped' ELSE 'sent' END, 'retrieval', '', '{}'
               FROM memory_contextrecord r
               CROSS JOIN generate_series(1, 5) AS k
               JOIN memory_memory m ON m.id = %s + ((r.id * 7919 + k * 104729) %% %s)
               WHERE r.organization_id = %s""",
            [first, count, organization_id],
        )
        cursor.execute("ANALYZE")


def measure(args) -> None:
    from rest_framework.test import APIClient

    from cadre.memory.models import ContextRecord, Memory, MemoryMap
    from cadre.memory.viewer import vector_map
    from cadre.tenancy.actors import member_actor
    from cadre.tenancy.models import Member, Organization
    from tests.factories import MemberFactory

    corpus = Corpus(args.seed)
    state = load(corpus, args.scale, 1)
    fresh = not ContextRecord.objects.exists()
    organization = Organization.objects.get(slug="lat-0")
    if fresh:
        started = time.perf_counter()
        enrich(organization.pk, args.calls)
        print(
            f"history and context records in {time.perf_counter() - started:.0f}s", file=sys.stderr
        )
    # A kept database already has the bench's owner (the factory's emails would repeat).
    owner = Member.objects.filter(organization=organization, roles__contains=["owner"]).first()
    owner = owner or MemberFactory(organization=organization, roles=["owner"])
    client = APIClient()
    client.force_login(owner.user)
    actor = member_actor(owner)
    print(f"{Memory.objects.filter(organization=organization).count()} memories, one organization")

    results = {}
    keys = vector_map.map_scope_keys(actor, None)
    for sample in () if args.skip_compute else (vector_map.DEFAULT_SAMPLE, args.scale):
        params = vector_map.map_params(sample=sample)
        memory_map = MemoryMap.objects.create(
            organization=organization,
            selection=vector_map.selection_hash(
                organization.pk, keys, None, state["model"].pk, params
            ),
            scope_keys=keys,
            model=state["model"],
            params=params,
        )
        started = time.perf_counter()
        vector_map.map_compute(memory_map)
        print(
            f"map compute, sample {sample}: {time.perf_counter() - started:.1f} s "
            f"({memory_map.sample_size} of {memory_map.total} points, "
            f"{len(memory_map.clusters)} clusters)"
        )
    endpoints = {
        "timeline (30 days)": ("/api/v1/memory-viewer/timeline/", {}),
        "timeline (2 years, weeks)": (
            "/api/v1/memory-viewer/timeline/",
            {"since": "2025-01-01T00:00:00Z"},
        ),
        "heatmap": ("/api/v1/memory-viewer/heatmap/", {}),
        "quality": ("/api/v1/memory-viewer/quality/", {}),
        "map, cached, 20k points": (
            "/api/v1/memory-viewer/map/",
            {"model": state["model"].pk},
        ),
    }
    for label, (url, params) in endpoints.items():
        for warm in range(2):
            started = time.perf_counter()
            response = client.get(url, params)
            if not warm:  # the first view of a selection: computed, never from the cache
                cold = (time.perf_counter() - started) * 1000
            assert response.status_code == 200, (url, response.status_code, response.content[:300])
        times = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            client.get(url, params)
            times.append((time.perf_counter() - started) * 1000)
        results[label] = times
        print(
            f"{label:28s} p50 {statistics.median(times):7.1f} ms   "
            f"p95 {percentile(times, 0.95):7.1f} ms   first {cold:7.1f} ms   "
            f"({args.repeat} requests)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=int, default=100_000)
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--seed", type=int, default=20261202)
    parser.add_argument("--database", default="cadre_bench_viewer")
    parser.add_argument("--keepdb", action="store_true", help="keep (and reuse) the database")
    parser.add_argument(
        "--no-cache", action="store_true", help="compute every request (the figures uncached)"
    )
    parser.add_argument("--skip-compute", action="store_true", help="reuse the kept maps")
    args = parser.parse_args()
    if args.no_cache:
        os.environ["CADRE_MEMORY_VIEWER_CACHE_SECONDS"] = "0"

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
