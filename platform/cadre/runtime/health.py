"""Liveness and readiness endpoints for load balancers and orchestrators."""

from __future__ import annotations

from django.core.cache import cache
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.http import JsonResponse

from cadre.api.database_pool import pool_status, reclaim_abandoned


def healthz(request):
    """Liveness: the process answers."""
    return JsonResponse({"status": "ok"})


def readiness_checks(pool: dict | None = None) -> dict[str, str]:
    """Each dependency's state, "ok" when usable. `pool` (pool_status()) when the process pools
    its connections: an exhausted pool is reported without queueing for a connection."""
    checks: dict[str, str] = {}
    if pool is not None and pool["exhausted"]:
        checks["database"] = f"busy: all {pool['max']} pooled connections in use"
    else:
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")
            checks["database"] = "ok"
        except Exception as error:  # any failure means not ready; report it
            checks["database"] = f"error: {error.__class__.__name__}"
    try:
        cache.set("cadre:readyz", "1", timeout=5)
        checks["redis"] = "ok" if cache.get("cadre:readyz") == "1" else "error: no echo"
    except Exception as error:
        checks["redis"] = f"error: {error.__class__.__name__}"
    if checks["database"] == "ok":
        try:
            executor = MigrationExecutor(connection)
            plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
            checks["migrations"] = "ok" if not plan else f"pending: {len(plan)}"
        except Exception as error:
            checks["migrations"] = f"error: {error.__class__.__name__}"
    else:
        checks["migrations"] = "unknown"
    return checks


def readyz(request):
    """Readiness: database reachable (and its pool not exhausted), Redis answering, every
    migration applied. A pooling process also reports its pool: connections that exist,
    idle, out with requests in progress, requests waiting, and how many connections left
    behind by ended requests were reclaimed (cadre.api.database_pool)."""
    reclaim_abandoned()
    pool = pool_status()
    checks = readiness_checks(pool)
    ready = all(value == "ok" for value in checks.values())
    body = {"status": "ready" if ready else "not ready", "checks": checks}
    if pool is not None:
        body["database_pool"] = pool
    return JsonResponse(body, status=200 if ready else 503)
