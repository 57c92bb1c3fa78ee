"""A benchmark's own services: a fresh database (dropped first) on DATABASE_URL's server, or on
the embedded PostgreSQL when none is configured, and its own Redis database, set in the
environment before Django starts (`keep`: the database of an earlier run is reused when it
exists). Returns the admin URL (to drop the database afterwards)."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent


def prepare(
    database: str,
    *,
    redis_db: int,
    cache_prefix: str,
    embedded_redis: bool = True,
    extra: dict[str, str] | None = None,
    keep: bool = False,
) -> str:
    import psycopg

    data_dir = Path(os.environ.get("CADRE_DATA_DIR", ROOT / "var")).resolve()
    database_url = os.environ.get("DATABASE_URL")
    if not database_url:
        from cadre.runtime.embedded import start_postgres

        database_url = start_postgres(data_dir)
    parts = urlsplit(database_url)
    admin_url = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(
        admin_url.replace("postgresql://", "postgres://", 1), autocommit=True
    ) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [database]).fetchone()
        if exists and not keep:
            conn.execute(f'DROP DATABASE "{database}" WITH (FORCE)')
        if not exists or not keep:
            conn.execute(f'CREATE DATABASE "{database}"')
    redis_url = os.environ.get("REDIS_URL")
    if not redis_url and embedded_redis:
        from cadre.runtime.embedded import start_redis

        redis_url = start_redis(data_dir)
    redis_url = redis_url or "redis://127.0.0.1:6379/0"
    if redis_url.startswith("unix://"):
        redis_url = redis_url.split("?")[0] + f"?db={redis_db}"
    else:
        redis_url = redis_url.rsplit("/", 1)[0] + f"/{redis_db}"
    os.environ.update(
        {
            "DATABASE_URL": urlunsplit(parts._replace(path=f"/{database}")),
            "REDIS_URL": redis_url,
            "CADRE_DATA_DIR": str(data_dir),
            "CADRE_CACHE_PREFIX": cache_prefix,
            "DJANGO_SETTINGS_MODULE": "cadre.settings",
            "LOG_LEVEL": "WARNING",
            **(extra or {}),
        }
    )
    return admin_url


def worker_queues() -> list[str]:
    """Every queue the product routes tasks to (cadre.celery.task_queues): runs and inbound
    drains go to `runs`, after-run hooks to `after`, replies through the platforms' APIs to
    `connectors`, housekeeping to the default queue. Read once Django's settings are the
    bench's (not at import: they would be read too early)."""
    from cadre.celery import task_queues

    return task_queues()


def worker_command(concurrency: int, hostname: str, *options: str) -> list[str]:
    """One Celery worker pool consuming every queue (`worker_queues`), quiet and without the
    cluster chatter a single bench worker does not need; `options` are added as given.
    tests/test_bench_queues.py checks no queue is left without a consumer."""
    import sys

    return [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "cadre",
        "worker",
        "--concurrency",
        str(concurrency),
        *options,
        "-Q",
        ",".join(worker_queues()),
        "--loglevel",
        "WARNING",
        "--hostname",
        f"{hostname}-{os.getpid()}@%h",
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
    ]
