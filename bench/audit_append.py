"""Audit append throughput: 8 concurrent writers, the sealing path against the chain-locking one.

    .venv/bin/python bench/audit_append.py                      # 8 writers x 1,500 events
    .venv/bin/python bench/audit_append.py --events 3000 --orgs 4 --synchronous-commit off
    .venv/bin/python bench/audit_append.py --paths sealed       # one path only
    .venv/bin/python bench/audit_append.py --rounds 3           # alternate, report medians

Target (issue #5): >= 1,000 events/s with 8 concurrent writers, the hash chain verifiable.

Both paths run in the same invocation, one after the other (alternately with --rounds), each
run on organization(s) of its own; "load 1m" is the machine's load average after each run.
Each writer is a process with its own database connection; each event is its own transaction
(`transaction.atomic()` around the append, as a service does), and the per-append latency is
measured around that transaction, commit included. On a shared machine events/s mostly says how
much CPU the bench got, so it also prints the CPU time each path spends per event, read from
/proc: the writer processes, their database backends, and for `sealed` the Celery worker (pool
included) and its backend. That figure depends far less on what else runs.

- `locking` (the baseline, Cadre's former `audit.record`): lock the organization's chain head
  row (SELECT … FOR UPDATE), insert the event with its sequence and hashes, move the head; the
  lock is held until the commit, so the writers queue behind each other.
- `sealed` (today's `audit.record`): insert the event unsealed, no lock; its on-commit hook
  enqueues the `audit_seal` task, which a real Celery worker started by the bench runs while the
  writers write. The bench samples the number of events waiting for their seal every 0.1 s and
  reports its maximum and how long after the last write every event was sealed.

The chains are verified afterwards with `audit.verify_chain`. Runs in its own database
(`cadre_bench_append`, created afresh and dropped at the end) and Redis database (14).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "platform")]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cadre.settings")
os.environ.setdefault("LOG_LEVEL", "WARNING")

PATHS = ("locking", "sealed")


# --- environment: a bench database and Redis db ----------------------------------------------


def prepare_environment(database: str, redis_db: int) -> dict[str, str]:
    """Create the bench database (dropped first if left over) and point this process and its
    children at it and at their own Redis database."""
    from urllib.parse import urlsplit, urlunsplit

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
        conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{database}"')
    redis_url = os.environ.get("REDIS_URL")
    if not redis_url:
        from cadre.runtime.embedded import start_redis

        redis_url = start_redis(data_dir)
    if redis_url.startswith("unix://"):
        redis_url = redis_url.split("?")[0] + f"?db={redis_db}"
    else:
        redis_url = redis_url.rsplit("/", 1)[0] + f"/{redis_db}"
    env = {
        "DATABASE_URL": urlunsplit(parts._replace(path=f"/{database}")),
        "ADMIN_DATABASE_URL": admin_url,
        "REDIS_URL": redis_url,
        "CADRE_DATA_DIR": str(data_dir),
        "CADRE_CACHE_PREFIX": "cadre-bench-audit",
        "DJANGO_SETTINGS_MODULE": "cadre.settings",
        "LOG_LEVEL": "WARNING",
        "LOG_FORMAT": "text",
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "platform")]),
    }
    os.environ.update(env)
    return dict(os.environ)


def drop_database(database: str) -> None:
    import psycopg

    admin_url = os.environ["ADMIN_DATABASE_URL"].replace("postgresql://", "postgres://", 1)
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


# --- CPU accounting (Linux /proc; the database server on this machine, as embedded) ----------

SEALER_APP_NAME = "cadre-bench-sealer"


def process_cpu(pid: int) -> float | None:
    """User + system CPU seconds of one process, None when it cannot be read."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def sealer_cpu(worker_pid: int) -> float | None:
    """CPU seconds so far of the Celery worker, its pool processes and their database backends."""
    from django.db import connection

    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
    family, grew = {worker_pid}, True
    while grew:
        children = {pid for pid, parent in parents.items() if parent in family} - family
        family |= children
        grew = bool(children)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s", [SEALER_APP_NAME]
        )
        family |= {pid for (pid,) in cursor.fetchall()}
    values = [process_cpu(pid) for pid in family]
    return None if any(value is None for value in values) else sum(values)


def start_worker(env: dict, loglevel: str) -> subprocess.Popen:
    """A Celery worker on the bench Redis database: it runs the `audit_seal` tasks."""
    return subprocess.Popen(  # noqa: S603 - our own interpreter and arguments
        [
            sys.executable,
            "-m",
            "celery",
            "--quiet",
            "-A",
            "cadre",
            "worker",
            "--concurrency",
            "1",
            "--loglevel",
            loglevel,
            "--hostname",
            f"bench-audit-{os.getpid()}@%h",
            "--without-gossip",
            "--without-mingle",
        ],
        cwd=ROOT,
        env={**env, "LOG_LEVEL": loglevel, "PGAPPNAME": SEALER_APP_NAME},
    )


def wait_for_worker(timeout: float = 120.0) -> None:
    from cadre.celery import app

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if app.control.ping(timeout=1.0):
            return
    raise SystemExit("the Celery worker did not answer within 120 s")


# --- the two append paths ---------------------------------------------------------------------


def locking_append(**arguments) -> None:
    """Cadre's former `audit.record`: the event is chained at insert, under the head lock."""
    from cadre.governance import audit
    from cadre.governance.models import AuditChainHead

    event = audit.new_event(**arguments)
    head = audit._lock_head(event.organization_id)
    event.sequence, event.prev_hash = head.sequence + 1, head.hash
    fields = {name: getattr(event, name) for name in audit._HASHED_FIELDS}
    event.hash = audit.event_hash(event.organization_id, event.created_at, fields)
    event.save(force_insert=True)
    AuditChainHead.objects.filter(organization_id=event.organization_id).update(
        sequence=event.sequence, hash=event.hash
    )


def writer(path: str, organization_id: int, events: int, synchronous_commit: str, ready, results):
    import django

    django.setup()
    from django.db import connection, transaction

    from cadre.governance import audit
    from cadre.tenancy.actors import system_actor
    from cadre.tenancy.models import Organization

    append = audit.record if path == "sealed" else locking_append
    actor = system_actor(Organization.objects.get(pk=organization_id), label="bench writer")
    if synchronous_commit:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT set_config('synchronous_commit', %s, false)", [synchronous_commit]
            )
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]
    latencies = []
    ready.wait()  # every writer set up and connected: all start together
    began, cpu, backend_cpu = time.perf_counter(), time.process_time(), process_cpu(backend)
    for number in range(events):
        t0 = time.perf_counter()
        with transaction.atomic():
            append(
                actor=actor,
                action="bench.append",
                target=("member", number, f"Member {number}"),
                changes={"after": {"status": "active", "n": number}},
            )
        latencies.append(time.perf_counter() - t0)
    ended, backend_after = time.perf_counter(), process_cpu(backend)
    if backend_cpu is not None and backend_after is not None:
        backend_cpu = backend_after - backend_cpu
    results.put((began, ended, latencies, time.process_time() - cpu, backend_cpu))


# --- one run of one path ----------------------------------------------------------------------


def unsealed_count(organization_ids: list[int]) -> int:
    from cadre.governance.models import AuditEvent

    return AuditEvent.objects.unsealed().filter(organization_id__in=organization_ids).count()


def run_path(path: str, args, organization_ids: list[int], worker_pid: int | None) -> dict:
    from django.db import connections

    from cadre.governance import audit
    from cadre.tenancy.models import Organization

    connections.close_all()
    context = multiprocessing.get_context("spawn")
    ready, results = context.Barrier(args.writers + 1), context.Queue()
    processes = [
        context.Process(
            target=writer,
            args=(
                path,
                organization_ids[index % len(organization_ids)],
                args.events,
                args.synchronous_commit,
                ready,
                results,
            ),
        )
        for index in range(args.writers)
    ]
    for process in processes:
        process.start()
    ready.wait(timeout=600)
    sealer_before = sealer_cpu(worker_pid) if path == "sealed" and worker_pid else None
    # While writing (and until every event is sealed): how many events wait for their seal.
    samples: list[tuple[float, int]] = []
    watching = threading.Event()
    watching.set()

    def watch_unsealed() -> None:
        while watching.is_set():
            samples.append((time.perf_counter(), unsealed_count(organization_ids)))
            time.sleep(0.1)
        connections.close_all()

    watcher = threading.Thread(target=watch_unsealed, daemon=True)
    if path == "sealed":
        watcher.start()
    spans = [results.get(timeout=3600) for _ in processes]
    last_write = max(span[1] for span in spans)
    sealed_after = None
    if path == "sealed":
        deadline = time.perf_counter() + args.seal_timeout
        while time.perf_counter() < deadline and not any(
            at >= last_write and count == 0 for at, count in samples
        ):
            time.sleep(0.1)
        watching.clear()
        watcher.join()
        done = [at for at, count in samples if at >= last_write and count == 0]
        sealed_after = done[0] - last_write if done else None
    sealer_after = sealer_cpu(worker_pid) if path == "sealed" and worker_pid else None
    for process in processes:
        process.join()
    seconds = last_write - min(span[0] for span in spans)
    latencies = sorted(value for span in spans for value in span[2])
    percentiles = statistics.quantiles(latencies, n=100)
    organizations = Organization.objects.filter(pk__in=organization_ids)
    verified = [audit.verify_chain(organization) for organization in organizations]
    total = args.writers * args.events
    return {
        "path": path,
        "events": total,
        "seconds": seconds,
        "rate": total / seconds,
        "p50": percentiles[49] * 1000,
        "p95": percentiles[94] * 1000,
        "cpu_ms": sum(span[3] for span in spans) / total * 1000,
        "db_ms": (
            None
            if any(span[4] is None for span in spans)
            else sum(span[4] for span in spans) / total * 1000
        ),
        "sealer_ms": (
            (sealer_after - sealer_before) / total * 1000
            if sealer_before is not None and sealer_after is not None
            else None
        ),
        "chain_ok": all(v["ok"] for v in verified) and not any(v["unsealed"] for v in verified),
        "checked": sum(v["checked"] for v in verified),
        "unsealed": sum(v["unsealed"] for v in verified),
        "sealed_after": sealed_after,
        "backlog": max((count for _, count in samples), default=0),
    }


def load_average() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--events", type=int, default=1500, help="events per writer")
    parser.add_argument("--orgs", type=int, default=1, help="organizations per path")
    parser.add_argument("--paths", default=",".join(PATHS), help="locking,sealed (in order)")
    parser.add_argument(
        "--rounds", type=int, default=1, help="run the paths alternately this many times"
    )
    parser.add_argument("--database", default="cadre_bench_append")
    parser.add_argument("--redis-db", type=int, default=14)
    parser.add_argument("--seal-timeout", type=float, default=300.0)
    parser.add_argument("--worker-loglevel", default="WARNING", help="INFO shows each seal task")
    parser.add_argument(
        "--synchronous-commit",
        default="",
        choices=["", "on", "off", "local"],
        help="set on each writer's connection (default: the server's setting)",
    )
    args = parser.parse_args()
    paths = [path.strip() for path in args.paths.split(",") if path.strip()]
    if not paths or set(paths) - set(PATHS):
        parser.error(f"--paths takes {', '.join(PATHS)}")

    env = prepare_environment(args.database, args.redis_db)
    import django

    django.setup()
    from django.core.cache import cache
    from django.core.management import call_command
    from django.db import connections

    from cadre.tenancy.models import Organization

    worker = None
    try:
        call_command("migrate", verbosity=0)
        cache.clear()  # the bench Redis database only
        if "sealed" in paths:
            worker = start_worker(env, args.worker_loglevel)
            wait_for_worker()
        load_before = load_average()
        rows = []
        for round_number in range(1, args.rounds + 1):
            for path in paths:
                organization_ids = [
                    Organization.objects.create(
                        name=f"Bench {path} {round_number}.{i}",
                        slug=f"bench-{path}-{round_number}-{i}",
                    ).pk
                    for i in range(args.orgs)
                ]
                row = run_path(
                    path, args, organization_ids, worker.pid if worker is not None else None
                )
                rows.append(row | {"round": round_number, "load": load_average()})
        load_after = load_average()
    finally:
        if worker is not None:
            worker.terminate()
            worker.wait(timeout=60)
        connections.close_all()
        drop_database(args.database)

    print(
        f"\naudit_append: {args.writers} writers x {args.events} events, {args.orgs} "
        f"organization(s) per path, one transaction per event, "
        f"synchronous_commit={args.synchronous_commit or 'server'}, {os.cpu_count()} CPUs; "
        f"load average (1/5/15 min) {load_before} before, {load_after} after"
    )
    print(
        f"{'path':<9}{'events':>8}{'seconds':>9}{'events/s':>10}{'p50 ms':>9}{'p95 ms':>9}"
        f"{'load 1m':>9}  chain"
    )
    for row in rows:
        chain = f"{'ok' if row['chain_ok'] else 'BROKEN'}, {row['checked']} verified"
        if row["path"] == "sealed":
            after = row["sealed_after"]
            chain += (
                f"; all sealed {after:.1f} s after the last write"
                if after is not None
                else f"; NOT all sealed {args.seal_timeout:.0f} s after the last write"
            ) + f", at most {row['backlog']} events waiting for their seal"
        print(
            f"{row['path']:<9}{row['events']:>8}{row['seconds']:>9.2f}{row['rate']:>10.0f}"
            f"{row['p50']:>9.2f}{row['p95']:>9.2f}{row['load'].split()[0]:>9}  {chain}"
        )
    print("CPU per event (ms): writer processes + their database backends [+ sealer] = total")
    for row in rows:
        parts = [row["cpu_ms"], row["db_ms"]] + (
            [row["sealer_ms"]] if row["path"] == "sealed" else []
        )
        known = [part for part in parts if part is not None]
        text = " + ".join("n/a" if part is None else f"{part:.2f}" for part in parts)
        total = f" = {sum(known):.2f}" if len(known) == len(parts) else ""
        print(f"{row['path']:<9}{text}{total}")  # in the order of the table above
    rates = {path: [row["rate"] for row in rows if row["path"] == path] for path in paths}
    if len(paths) == 2:
        locking, sealed = (statistics.median(rates[path]) for path in PATHS)
        print(
            f"median events/s over {args.rounds} round(s): locking {locking:.0f}, "
            f"sealed {sealed:.0f} ({sealed / locking:.1f}x)"
        )
    if not all(row["chain_ok"] for row in rows):
        raise SystemExit("a chain did not verify")


if __name__ == "__main__":
    main()
