"""Memory Viewer speed at 100k memories in one organization: p50/p95 of the timeline,
heatmap, quality and map endpoints, first view (the viewer's cache off) and cached, the first
build's queries (`reach.DIRECT`, the map as JSON rows) side by side with the rollup and the
packed map, and the map's background computation time at 100k points.

    python bench/memory_viewer.py                  # 100,000 memories, one organization
    python bench/memory_viewer.py --scale 20000 --keepdb
    python bench/memory_viewer.py --keepdb --skip-compute   # reuse the kept map
    python bench/memory_viewer.py --keepdb --skip-compute --browser 3   # and Chromium
    python bench/memory_viewer.py --keepdb --skip-compute --only heatmap quality

Memories, words and 384-d vectors come from bench/memory_latency.py's generator (one
organization); kinds are spread over the six kinds, every memory has its addition version,
5 % a merge and 3 % a correction, and 20,000 model calls over the last 30 days were each sent
five memories (four sent, one dropped); every third call's run is rated (one in four of those
a failure) through the run-outcome port. Requests go through the whole API stack (DRF, session
auth) as the owner, who reads every scope: the widest selection. With --browser N each console
page is opened N times in headless Chromium (Debian's, through uvicorn on loopback, the cache
off) and the time to its first chart drawn is printed. Runs in its own database (dropped
unless --keepdb) on the embedded PostgreSQL unless DATABASE_URL is set (bench/environment.py).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "platform"), str(ROOT / "bench")]

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


def rate_runs(organization_id: int, run_ids: list[str]) -> dict[str, str]:
    """Run ratings for the bench: every third call's run rated, one in four of those a
    failure (the runs' own ratings need agents and runs the generator has none of). The runs'
    lookup is asked too, so its cost is in the figures (it finds no rating)."""
    from cadre.agents.selectors import rated_runs

    found = rated_runs(organization_id, run_ids)
    return found | {
        run: ("failure" if int(run) % 4 == 0 else "success")
        for run in run_ids
        if run.isdigit() and int(run) % 3 == 0
    }


def timed(client, url, params, repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        response = client.get(url, params)
        times.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, (url, response.status_code, response.content[:300])
    return times


def figures(times: list[float]) -> str:
    if not times:
        return f"{'':>15s}"
    return f"{statistics.median(times):6.0f} /{percentile(times, 0.95):6.0f}"


def legacy_map(memory_map, size: int):
    """The map as the first build stored it: JSON rows of `size` points (its default sample),
    served whole."""
    from cadre.memory.models import MemoryMap
    from cadre.viewer import vector_map

    ids, x, y, clusters = vector_map.unpack_points(memory_map)
    keep = sorted(range(len(ids)), key=lambda i: (int(ids[i]) * 2654435761) % 2**32)[:size]
    keep.sort()
    return MemoryMap.objects.create(
        organization=memory_map.organization,
        selection="bench-legacy",
        scope_keys=memory_map.scope_keys,
        model=memory_map.model,
        params={**memory_map.params, "sample": size},
        status=MemoryMap.Status.READY,
        total=memory_map.total,
        sample_size=len(keep),
        points=[
            [int(ids[i]), round(float(x[i]), 4), round(float(y[i]), 4), int(clusters[i])]
            for i in keep
        ],
        clusters=memory_map.clusters,
        projection=memory_map.projection,
        computed_at=memory_map.computed_at,
    )


def measure(args) -> None:
    from django.conf import settings
    from rest_framework.test import APIClient

    from cadre.agents import ratings as ports
    from cadre.memory.models import ContextRecord, Memory, MemoryMap, MemoryUsageDay
    from cadre.tenancy.actors import member_actor
    from cadre.tenancy.models import Member, Organization
    from cadre.viewer import cache, reach, vector_map
    from tests.factories import MemberFactory

    corpus = Corpus(args.seed)
    state = load(corpus, args.scale, 1)
    fresh = not ContextRecord.objects.exists()
    organization = Organization.objects.get(slug="lat-0")
    if fresh:
        started = time.perf_counter()
        enrich(organization.pk, args.calls)
        print(
            f"history and context records (the rollup kept by its triggers on the way) in "
            f"{time.perf_counter() - started:.0f}s",
            file=sys.stderr,
        )
    from django.db import connection

    with connection.cursor() as cursor:
        # Settled tables, as autovacuum leaves them (statistics, the visibility map).
        cursor.execute("VACUUM ANALYZE")
    # A kept database already has the bench's owner (the factory's emails would repeat).
    owner = Member.objects.filter(organization=organization, roles__contains=["owner"]).first()
    owner = owner or MemberFactory(organization=organization, roles=["owner"])
    client = APIClient()
    client.force_login(owner.user)
    actor = member_actor(owner)
    print(
        f"{Memory.objects.filter(organization=organization).count()} memories, one organization; "
        f"{ContextRecord.objects.filter(organization=organization).count()} context records, "
        f"{MemoryUsageDay.objects.filter(organization=organization).count()} rollup rows"
    )

    keys = vector_map.map_scope_keys(actor, None)
    params = vector_map.map_params(sample=min(args.scale, vector_map.MAX_SAMPLE))
    selection = vector_map.selection_hash(organization.pk, keys, None, state["model"].pk, params)
    memory_map = (
        MemoryMap.objects.filter(selection=selection, status=MemoryMap.Status.READY).first()
        if args.skip_compute
        else None
    )
    if memory_map is None:
        memory_map = MemoryMap.objects.create(
            organization=organization,
            selection=selection,
            scope_keys=keys,
            model=state["model"],
            params=params,
        )
        started = time.perf_counter()
        vector_map.map_compute(memory_map)
        print(
            f"map compute: {time.perf_counter() - started:.1f} s for {memory_map.sample_size} of "
            f"{memory_map.total} points, {len(memory_map.clusters)} clusters "
            f"(first build, from its issue note: 54.6-87.7 s for 20k points)"
        )
    print(
        f"map stored: {len(bytes(memory_map.points_data)) / 1e6:.1f} MB packed for "
        f"{memory_map.sample_size} points (JSON rows: "
        f"{len(json.dumps(legacy_map_rows(memory_map))) / 1e6:.1f} MB)"
    )
    if not args.skip_compute:
        # The owner's readable selection holds the organization scope only (the generator's
        # user and department ids name no members): the map of every scope is the 100k one.
        every = sorted(
            set(
                Memory.objects.filter(organization=organization).values_list("scope_key", flat=True)
            )
        )
        whole = MemoryMap.objects.create(
            organization=organization,
            selection="bench-every-scope",
            scope_keys=every,
            model=state["model"],
            params=params,
        )
        started = time.perf_counter()
        vector_map.map_compute(whole)
        print(
            f"map compute, every scope: {time.perf_counter() - started:.1f} s for "
            f"{whole.sample_size} of {whole.total} points, {len(whole.clusters)} clusters, "
            f"{len(bytes(whole.points_data)) / 1e6:.1f} MB packed"
        )
    old_map = legacy_map(memory_map, 20_000)
    model = state["model"].pk
    endpoints = {
        "timeline (30 days)": ("/api/v1/memory-viewer/timeline/", {}, {}),
        "timeline (2 years, weeks)": (
            "/api/v1/memory-viewer/timeline/",
            {"since": "2025-01-01T00:00:00Z"},
            {},
        ),
        "heatmap": ("/api/v1/memory-viewer/heatmap/", {}, {}),
        "quality": ("/api/v1/memory-viewer/quality/", {}, {}),
        "map (old: 20k JSON rows; new: 100k packed, 20k shown)": (
            "/api/v1/memory-viewer/map/",
            {"model": model, "sample": params["sample"]},
            {"model": model, "sample": 20_000},
        ),
    }
    print(
        f"\n{'p50 / p95 ms':56s} {'old, first view':>15s}  {'new, first view':>15s}  "
        f"{'old, cached':>15s}  {'new, cached':>15s}"
    )
    with ports.RUN_OUTCOMES.overridden({"bench": rate_runs}):
        for label, (url, new_params, old_params) in endpoints.items():
            if args.only and not any(word in label for word in args.only):
                continue
            row = {}
            for mode in ("old", "new"):
                reach.DIRECT = mode == "old"
                cache.writes_changed(organization.pk)  # neither is served the other's body
                query = old_params or new_params if mode == "old" else new_params
                if mode == "old" and url.endswith("/map/"):
                    # The legacy row answers the old selection (its sample is 20k).
                    MemoryMap.objects.filter(pk=old_map.pk).update(
                        selection=vector_map.selection_hash(
                            organization.pk,
                            keys,
                            None,
                            model,
                            vector_map.map_params(sample=20_000),
                        )
                    )
                settings.MEMORY_VIEWER_CACHE_SECONDS = 0  # every request a first view
                repeat = args.repeat if mode == "new" else max(3, args.repeat // 4)
                timed(client, url, query, 1)  # the connection and the plan cache warmed
                row[f"{mode} first"] = timed(client, url, query, repeat)
                settings.MEMORY_VIEWER_CACHE_SECONDS = 30
                timed(client, url, query, 1)
                row[f"{mode} cached"] = timed(client, url, query, args.repeat)
            reach.DIRECT = False
            print(
                f"{label:56s} {figures(row['old first']):>15s}  {figures(row['new first']):>15s}  "
                f"{figures(row['old cached']):>15s}  {figures(row['new cached']):>15s}"
            )
        if args.browser:  # the pages with the same run ratings
            first_charts(client, args.browser, state["model"])
    print(
        "\nold: the first build's queries (straight from the context record items, a query a "
        "figure; the map as JSON rows); new: the rollup, counts in two queries, packed points."
    )


PAGES = ("/memory/timeline/", "/memory/heatmap/", "/memory/quality/", "/memory/map/")
CHROMIUM = "/usr/bin/chromium"


def _first_chart_ms(page, timeout: float = 30.0) -> float:
    """Polled from here: the console's CSP refuses the string evaluation `wait_for_function`
    uses in the page."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = page.evaluate("() => window.cadreViewer && window.cadreViewer.firstChartMs")
        if value:
            return value
        time.sleep(0.05)
    raise TimeoutError(f"no chart drawn on {page.url} in {timeout:.0f} s")


def first_charts(client, repeat: int, model) -> None:
    """Each viewer page opened in headless Chromium as the owner (the session of `client`),
    the viewer's cache off: ms from navigation start to the first chart drawn (the page's
    `viewer:first-chart` mark). The console's map uses the active embedding model: the bench's
    model is made the active one, so the page is served the map computed above (its
    selection: the owner's scopes, every point)."""
    from django.conf import settings
    from django.utils import timezone
    from playwright.sync_api import sync_playwright

    from cadre.memory.models import MemoryMap, OrganizationEmbeddingModel
    from cadre.tenancy.models import Organization
    from tests.live_asgi import serve_asgi

    organization = Organization.objects.get(slug="lat-0")
    Status = OrganizationEmbeddingModel.Status
    uses = OrganizationEmbeddingModel.objects.filter(organization=organization)
    uses.filter(status=Status.ACTIVE).exclude(model=model).update(status=Status.RETIRED)
    OrganizationEmbeddingModel.objects.update_or_create(
        organization=organization,
        model=model,
        defaults={"status": Status.ACTIVE, "activated_at": timezone.now()},
    )
    # A map asked for by an earlier run on another model waits for a worker the bench has not.
    MemoryMap.objects.exclude(model=model).delete()
    settings.MEMORY_VIEWER_CACHE_SECONDS = 0
    cookie = client.cookies[settings.SESSION_COOKIE_NAME].value
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # Playwright's loop on this thread
    print(f"\n{'first chart drawn, headless Chromium, ms':56s} {'median':>8s} {'max':>8s}")
    with serve_asgi() as (host, port), sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        context = browser.new_context(viewport={"width": 1400, "height": 900})
        context.add_cookies(
            [{"name": settings.SESSION_COOKIE_NAME, "value": cookie, "domain": host, "path": "/"}]
        )
        page = context.new_page()
        for path in PAGES:
            drawn = []
            for _ in range(repeat + 1):  # the first load warms the server's imports
                page.goto(f"http://{host}:{port}{path}")
                drawn.append(_first_chart_ms(page))
            drawn = drawn[1:]
            print(f"{path:56s} {statistics.median(drawn):8.0f} {max(drawn):8.0f}")
        browser.close()


def legacy_map_rows(memory_map) -> list:
    from cadre.viewer import vector_map

    ids, x, y, clusters = vector_map.unpack_points(memory_map)
    return [
        [int(i), round(float(a), 4), round(float(b), 4), int(c)]
        for i, a, b, c in zip(ids, x, y, clusters, strict=True)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=int, default=100_000)
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--seed", type=int, default=20261202)
    parser.add_argument("--database", default="cadre_bench_viewer")
    parser.add_argument("--keepdb", action="store_true", help="keep (and reuse) the database")
    parser.add_argument("--skip-compute", action="store_true", help="reuse the kept maps")
    parser.add_argument("--redis-db", type=int, default=14)
    parser.add_argument(
        "--browser", type=int, default=0, metavar="N", help="open each page N times in Chromium"
    )
    parser.add_argument(
        "--only", nargs="*", default=[], help="measure the endpoints whose label has a word"
    )
    args = parser.parse_args()

    from bench.environment import prepare

    admin_url = prepare(
        args.database,
        redis_db=args.redis_db,
        cache_prefix="cadre-bench-viewer",
        keep=args.keepdb,
    )
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connections

    call_command("migrate", verbosity=0)
    try:
        measure(args)
    finally:
        connections.close_all()
        if not args.keepdb:
            import psycopg

            with psycopg.connect(
                admin_url.replace("postgresql://", "postgres://", 1), autocommit=True
            ) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{args.database}" WITH (FORCE)')


if __name__ == "__main__":
    main()
