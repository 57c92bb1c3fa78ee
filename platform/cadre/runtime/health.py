"""Liveness and readiness endpoints for load balancers and orchestrators."""

from __future__ import annotations

from django.core.cache import cache
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.http import JsonResponse


def healthz(request):
    """Liveness: the process answers."""
    return JsonResponse({"status": "ok"})


def readiness_checks() -> dict[str, str]:
    checks: dict[str, str] = {}
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
    """Readiness: database reachable, Redis answering, every migration applied."""
    checks = readiness_checks()
    ready = all(value == "ok" for value in checks.values())
    return JsonResponse(
        {"status": "ready" if ready else "not ready", "checks": checks},
        status=200 if ready else 503,
    )
