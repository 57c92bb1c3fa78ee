"""The API under mixed authenticated reads and writes: persistent connections vs the pool.

Starts the web process as `cadre up` does (uvicorn serving `cadre.asgi:application`, one
process) on the embedded PostgreSQL (a database of its own, `cadre_bench`), and sends API-key
requests open-loop — 70 % reads (department list, one department, member list), 30 % writes
(create a department, rename one) — at `--rate` per second for `--duration` seconds, then at
twice the rate for `--burst` seconds. Meanwhile it samples pg_stat_activity every 0.2 s for the
web process's connections. Two variants in one run, on the same database and machine load:

- `persistent`: DATABASE_POOL=false (each request thread keeps a connection, CONN_MAX_AGE 60)
- `pool`: the default, psycopg's pool of DATABASE_POOL_SIZE (10) per web process

and for each phase prints requests/s achieved, p50/p95, the count of 5xx and the most
connections seen. 2 shared CPUs may not reach the rate asked for; the figures say what was.

    .venv/bin/python bench/api_mixed_load.py                          # 200/s 60 s, 400/s 30 s
    .venv/bin/python bench/api_mixed_load.py --duration 20 --burst 10 --redis-db 1
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import random
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "bench"), str(ROOT), str(ROOT / "platform")]

from connectors_load import (  # noqa: E402 - the same harness
    Connection,
    cpu_seconds,
    free_port,
    fresh_database,
    prepare_environment,
    start_servers,
    stop_servers,
)

APPLICATION = "cadre-bench-web"
READ_SHARE = 0.7
NAMES = itertools.count()  # department names stay unique across variants (same database)


def create_api_key(departments: int = 20) -> tuple[str, list[int]]:
    """Migrate the bench database; an organization, an API key, some departments."""
    import django

    django.setup()
    from django.core.cache import cache
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    cache.clear()  # the bench Redis database only
    from cadre.tenancy import services
    from cadre.tenancy.actors import member_actor

    _, owner = services.organization_create(
        name="Bench", slug="bench", owner_email="owner@bench.test", password=None
    )
    actor = member_actor(owner)
    _, token = services.api_key_create(actor=actor, name="bench", scopes=["org:read", "org:write"])
    ids = [services.department_create(actor=actor, name=f"seed {n}").pk for n in range(departments)]
    from django.db import connections

    connections.close_all()
    return token, ids


class ConnectionSampler:
    """The web process's connections (by application_name) and every client connection of
    the server, sampled every `interval` seconds from pg_stat_activity."""

    def __init__(self, admin_url: str, interval: float = 0.2):
        import psycopg

        self.connection = psycopg.connect(admin_url, autocommit=True)
        self.interval = interval
        self.samples: list[tuple[float, int, int]] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopping.wait(self.interval):
            web, everyone = self.connection.execute(
                "SELECT count(*) FILTER (WHERE application_name = %s), count(*) "
                "FROM pg_stat_activity WHERE backend_type = 'client backend'",
                [APPLICATION],
            ).fetchone()
            self.samples.append((time.perf_counter(), web, everyone))

    def most(self, began: float, ended: float) -> tuple[int, int]:
        inside = [(web, all_) for at, web, all_ in self.samples if began <= at <= ended]
        return (max(w for w, _ in inside), max(a for _, a in inside)) if inside else (0, 0)

    def close(self) -> None:
        self.stopping.set()
        self.thread.join(5)
        self.connection.close()


def requests_mix(token: str, department_ids: list[int]):
    """An endless mix of (method, path, body) for the API key's organization."""
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    reads = [
        lambda: ("GET", "/api/v1/departments/", b""),
        lambda: ("GET", f"/api/v1/departments/{random.choice(department_ids)}/", b""),
        lambda: ("GET", "/api/v1/members/", b""),
    ]
    writes = [
        lambda: (
            "POST",
            "/api/v1/departments/",
            json.dumps({"name": f"bench {os.getpid()}-{next(NAMES)}"}).encode(),
        ),
        lambda: (
            "PATCH",
            f"/api/v1/departments/{random.choice(department_ids)}/",
            json.dumps({"description": f"renamed {next(NAMES)}"}).encode(),
        ),
    ]
    while True:
        method, path, body = random.choice(reads if random.random() < READ_SHARE else writes)()
        yield method, path, body, headers


async def phase(port: int, mix, rate: int, seconds: float, connections: int) -> dict:
    """Open-loop: request i is due at i / rate; `connections` keep-alive clients take them.
    A request no client could begin before the phase's end is not sent (counted `unsent`):
    a server slower than the rate shows as fewer requests done, not as a longer phase."""
    queue: asyncio.Queue = asyncio.Queue()
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    errors = unsent = 0
    began = time.perf_counter() + 0.05
    deadline = began + seconds
    total = int(rate * seconds)

    async def feeder():
        for index in range(total):
            delay = began + index / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            queue.put_nowait(next(mix))
        for _ in range(connections):
            queue.put_nowait(None)

    async def client():
        nonlocal errors, unsent
        connection = Connection("127.0.0.1", port)
        while (item := await queue.get()) is not None:
            if time.perf_counter() > deadline:
                unsent += 1
                continue
            method, path, body, headers = item
            started = time.perf_counter()
            try:
                status = await asyncio.wait_for(connection.request(method, path, body, headers), 60)
            except (OSError, TimeoutError, ConnectionError, ValueError):
                errors += 1
                connection.close()
                continue
            latencies.append(time.perf_counter() - started)
            statuses[status] = statuses.get(status, 0) + 1
        connection.close()

    await asyncio.gather(feeder(), *(client() for _ in range(connections)))
    ended = time.perf_counter()
    ordered = sorted(latencies)

    def pct(p: float) -> float:
        return ordered[min(len(ordered) - 1, int(p * len(ordered)))] * 1000 if ordered else 0.0

    return {
        "rate": rate, "sent": total, "began": began, "ended": ended,
        "rps": len(latencies) / (ended - began), "p50": pct(0.50), "p95": pct(0.95),
        "server_errors": sum(n for status, n in statuses.items() if status >= 500),
        "statuses": statuses, "errors": errors, "unsent": unsent,
    }  # fmt: skip


def run_variant(name: str, variables: dict, env: dict, args, token: str, ids: list[int]) -> dict:
    env = {**env, **variables, "CADRE_API_RATE_KEY": "1000000/minute"}
    env["DATABASE_URL"] = f"{env['DATABASE_URL']}&application_name={APPLICATION}"
    if "DATABASE_POOL" not in variables:
        env.pop("DATABASE_POOL", None)
    port = free_port()
    children = start_servers(env, port, 1, 0, ROOT, worker=False)
    sampler = ConnectionSampler(os.environ["DATABASE_URL"])
    mix = requests_mix(token, ids)
    try:
        asyncio.run(phase(port, mix, 20, 2, args.connections))  # warm-up
        cpu_before = cpu_seconds(children[0])
        steady = asyncio.run(phase(port, mix, args.rate, args.duration, args.connections))
        burst = asyncio.run(phase(port, mix, 2 * args.rate, args.burst, args.connections))
        cpu = cpu_seconds(children[0]) - cpu_before
    finally:
        stop_servers(children)
        sampler.close()
    for result in (steady, burst):
        result["web_connections"], result["all_connections"] = sampler.most(
            result["began"], result["ended"]
        )
    done = sum(sum(r["statuses"].values()) for r in (steady, burst))
    return {"name": name, "phases": [steady, burst], "cpu_ms": 1000 * cpu / max(1, done)}


def report(runs: list[dict], args) -> None:
    print(
        f"\n{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; one uvicorn process; "
        f"{args.connections} client connections; {READ_SHARE:.0%} reads; "
        f"{args.duration:g} s at {args.rate}/s then {args.burst:g} s at {2 * args.rate}/s"
    )
    print(
        f"{'variant':<11} {'asked/s':>7} {'planned':>7} {'done/s':>7} {'p50 ms':>8} {'p95 ms':>8} "
        f"{'5xx':>5} {'unsent':>6} {'web conns':>9} {'all conns':>9}  statuses"
    )
    for run in runs:
        for r in run["phases"]:
            print(
                f"{run['name']:<11} {r['rate']:>7} {r['sent']:>7} {r['rps']:>7.1f} "
                f"{r['p50']:>8.1f} {r['p95']:>8.1f} {r['server_errors']:>5} {r['unsent']:>6} "
                f"{r['web_connections']:>9} {r['all_connections']:>9}  "
                f"{dict(sorted(r['statuses'].items()))} client errors={r['errors']}"
            )
        print(f"{run['name']:<11} web CPU {run['cpu_ms']:.2f} ms per request")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=200, help="requests/s (the burst is 2x)")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds at --rate")
    parser.add_argument("--burst", type=float, default=30.0, help="seconds at twice --rate")
    parser.add_argument("--connections", type=int, default=64, help="keep-alive clients")
    parser.add_argument("--redis-db", type=int, default=14)
    args = parser.parse_args()

    env = prepare_environment(args.redis_db)
    fresh_database(env)
    token, ids = create_api_key()
    variants = [("persistent", {"DATABASE_POOL": "false"}), ("pool", {})]
    runs = [run_variant(name, values, env, args, token, ids) for name, values in variants]
    report(runs, args)


if __name__ == "__main__":
    main()
