"""Load test of the IM inbound edge: signed webhook and Slack events at rising rates.

Starts Cadre as deployed (uvicorn `cadre.asgi:application` with N workers plus a Celery
worker) against a separate database (`cadre_bench` on the same PostgreSQL) and a separate Redis
database, posts signed events at each rate for a fixed duration with 10 % duplicate
redeliveries (half sent concurrently with the original, half later), and prints acknowledgement
latency p50/p95/p99, sustained throughput, the worker's processing rate and end-to-end counts:
every unique event stored once, none lost, none processed twice (each processed once and
answered once).

    .venv/bin/python bench/connectors_load.py                  # 100, 200, 300, 400 events/s
    .venv/bin/python bench/connectors_load.py --rates 300 --duration 20

`--baseline-source DIR` runs the same load, in the same run, against another copy of Cadre
(e.g. `git archive <commit> | tar -x -C DIR`), each on a fresh database, so a change is
compared with what it replaces under the same machine load.

The sender of every event is a member without an agent, so processing means: claim the event,
resolve the identity, answer once through the platform API (a loopback receiver, in a process
of its own, standing in for Slack's Web API and the webhook's callback URL). Agent runs are
measured by the agents benchmarks, not here.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "platform")]

from bench.environment import worker_command  # noqa: E402

WEBHOOK_SECRET = "bench-webhook-secret"
SLACK_SECRET = "bench-slack-signing-secret"
BENCH_DB = "cadre_bench"


# --- the loopback platform API (Slack Web API + webhook callback URL) ----------------------


class PlatformHandler(BaseHTTPRequestHandler):
    """A stand-in platform's request handler (this receiver's, bench/cluster.py's IM machine's):
    keep-alive, quiet, JSON answers."""

    protocol_version = "HTTP/1.1"
    # One segment per response, sent at once: written unbuffered with Nagle on (the
    # defaults), the body waits for the client's delayed ACK of the headers, ~40 ms on
    # every keep-alive request, and the worker would measure this stand-in, not itself.
    disable_nagle_algorithm = True
    wbufsize = -1

    def log_message(self, *args):
        pass

    def _answer(self, data: dict, status: int = 200) -> None:
        body = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))


def _serve_receiver(port_out, stop) -> None:
    """The receiver's process: answers every POST like Slack's chat.postMessage, counts them,
    and tells the count on GET /count."""
    count = [0]
    lock = threading.Lock()

    class Handler(PlatformHandler):
        def do_GET(self):
            self._answer({"count": count[0]})

        def do_POST(self):
            self._body()
            with lock:
                count[0] += 1
                number = count[0]
            self._answer(
                {"ok": True, "ts": f"1.{number}", "channel": "D1", "message_id": f"m{number}"}
            )

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    port_out.put(httpd.server_address[1])
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    stop.wait()


class Receiver:
    """The loopback platform API, in a process of its own: in the load generator's process its
    threads would take the GIL from the sender and inflate the measured latencies."""

    def __init__(self):
        import multiprocessing

        context = multiprocessing.get_context("spawn")
        ports, self.stop = context.Queue(), context.Event()
        self.process = context.Process(target=_serve_receiver, args=(ports, self.stop), daemon=True)
        self.process.start()
        self.port = ports.get(timeout=60)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def count(self) -> int:
        import httpx

        return httpx.get(f"{self.url}/count", timeout=30).json()["count"]

    def close(self) -> None:
        self.stop.set()
        self.process.join(timeout=10)


# --- environment: a bench database and Redis db, Django set up on them --------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def prepare_environment(redis_db: int) -> dict[str, str]:
    """The bench database's URL and Redis database in the environment of this process and the
    servers' (the database itself is made afresh for each variant by `fresh_database`)."""
    from urllib.parse import urlsplit, urlunsplit

    data_dir = Path(os.environ.get("CADRE_DATA_DIR", ROOT / "var")).resolve()
    database_url = os.environ.get("DATABASE_URL")
    if not database_url:
        from cadre.runtime.embedded import start_postgres

        database_url = start_postgres(data_dir)
    bench_url = urlunsplit(urlsplit(database_url)._replace(path=f"/{BENCH_DB}"))

    redis_url = os.environ.get("REDIS_URL")
    if not redis_url:
        from cadre.runtime.embedded import start_redis

        redis_url = start_redis(data_dir)
    if redis_url.startswith("unix://"):
        redis_url = redis_url.split("?")[0] + f"?db={redis_db}"
    else:
        redis_url = redis_url.rsplit("/", 1)[0] + f"/{redis_db}"

    env = dict(os.environ)
    env.update(
        {
            "DATABASE_URL": bench_url,
            "REDIS_URL": redis_url,
            "CADRE_DATA_DIR": str(data_dir),
            "DJANGO_SETTINGS_MODULE": "cadre.settings",
            "LOG_LEVEL": "WARNING",
            "LOG_FORMAT": "text",
            "PYTHONUNBUFFERED": "1",
            "CADRE_CACHE_PREFIX": "cadre-bench",
            # As `cadre up` does: the Celery worker skips Django's system checks.
            "CELERY_SKIP_CHECKS": "1",
            # The loopback receiver stands in for the platforms: the outbound guard refuses
            # loopback addresses unless the instance allows them (docs/connectors.md), for the
            # webhook connector's callback URL and for Slack's API base URL respectively.
            "CADRE_CONNECTOR_WEBHOOK_ALLOWED_HOSTS": "127.0.0.1",
            "CADRE_CONNECTOR_ALLOWED_HOSTS": "127.0.0.1",
            "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "platform")]),
        }
    )
    os.environ.update(env)
    return env


def fresh_database(env: dict) -> None:
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    if "django" in sys.modules:
        from django.db import connections

        connections.close_all()
    admin_url = urlunsplit(urlsplit(env["DATABASE_URL"])._replace(path="/postgres"))
    with psycopg.connect(
        admin_url.replace("postgresql://", "postgres://", 1), autocommit=True
    ) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {BENCH_DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {BENCH_DB}")


def create_objects(receiver_url: str) -> dict:
    import django

    django.setup()
    from django.core.cache import cache
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    cache.clear()  # the bench Redis database only
    from cadre.tenancy import services as tenancy
    from cadre.tenancy.actors import member_actor
    from cadre.tenancy.models import IMIdentity
    from connectors.base import services

    _, owner = tenancy.organization_create(
        name="Bench", slug="bench", owner_email="owner@bench.test", password=None
    )
    actor = member_actor(owner)
    webhook = services.connector_create(
        actor=actor,
        platform="webhook",
        name="bench webhook",
        credentials={"signing_secret": WEBHOOK_SECRET},
        settings={"callback_url": f"{receiver_url}/callback"},
    )
    slack = services.connector_create(
        actor=actor,
        platform="slack",
        name="bench slack",
        credentials={"bot_token": "xoxb-bench", "signing_secret": SLACK_SECRET},
        settings={"api_base_url": f"{receiver_url}/api"},
    )
    for platform, user in (("webhook", "u-bench"), ("slack", "UBENCH")):
        IMIdentity.objects.create(
            organization=owner.organization, member=owner, platform=platform, platform_user_id=user
        )
    return {
        "webhook": webhook.callback_path,
        "slack": slack.callback_path,
        "ids": [webhook.pk, slack.pk],
    }


# --- servers ----------------------------------------------------------------------------------


def worker_commands(concurrency: int = 2, worker_nice: int = 0) -> list[list[str]]:
    """The Celery workers this bench starts: one pool consuming every queue, so the worker's
    CPU and processing rate are one process tree's."""
    nice = ["nice", "-n", str(worker_nice)] if worker_nice else []
    return [[*nice, *worker_command(concurrency, "bench")]]


def start_servers(
    env: dict,
    port: int,
    web_workers: int,
    concurrency: int,
    source: Path,
    worker_nice: int = 0,
    worker: bool = True,
) -> list:
    """uvicorn serving cadre.asgi (and a Celery worker unless `worker` is false), ready."""
    python = sys.executable
    env = {
        **env,
        "PYTHONPATH": os.pathsep.join([str(source), str(source / "platform")]),
    }
    commands = [
        [
            python,
            "-m",
            "uvicorn",
            "cadre.asgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            str(web_workers),
            "--lifespan",
            "off",
            "--no-access-log",
            "--log-level",
            "warning",
        ],
        *worker_commands(concurrency, worker_nice),
    ]
    children = [
        subprocess.Popen(command, cwd=source, env=env, process_group=0)  # noqa: S603
        for command in (commands if worker else commands[:1])
    ]
    import httpx

    # Ready when /healthz answers quickly several times in a row (every worker has imported
    # Django and connected), not merely when the socket is bound.
    deadline, quick = time.time() + 240, 0
    while time.time() < deadline and quick < 3 * web_workers:
        started = time.perf_counter()
        try:
            ok = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=60).status_code == 200
        except httpx.HTTPError:
            ok = False
            time.sleep(0.5)
        quick = quick + 1 if ok and time.perf_counter() - started < 0.5 else 0
    if quick < 3 * web_workers:
        stop_servers(children)
        raise SystemExit("the web server did not become ready")
    return children


def wait_for_worker(timeout: float = 240) -> None:
    """Until the Celery worker answers a ping (it imports Django, slowly on a busy machine)."""
    from cadre.celery import app

    deadline = time.time() + timeout
    while time.time() < deadline:
        if app.control.ping(timeout=1.0):
            return
    raise SystemExit("the Celery worker did not become ready")


def cpu_seconds(child) -> float:
    """CPU time (user + system) used so far by a server and all its processes."""
    import psutil

    try:
        root = psutil.Process(child.pid)
        processes = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0.0
    total = 0.0
    for process in processes:
        try:
            times = process.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


def stop_servers(children: list) -> None:
    for child in children:  # the main process: it stops its own workers
        if child.poll() is None:
            os.kill(child.pid, signal.SIGTERM)
    for child in children:
        try:
            child.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)


# --- the load -----------------------------------------------------------------------------


def webhook_request(path: str, event_id: str, text: str) -> tuple[str, bytes, dict]:
    body = json.dumps(
        {
            "event_id": event_id,
            "type": "message",
            "text": text,
            "user": {"id": "u-bench"},
            "chat": {"id": "c1"},
        }
    ).encode()
    ts = str(int(time.time()))
    mac = hmac.new(WEBHOOK_SECRET.encode(), f"{ts}.".encode() + body, hashlib.sha256)
    return (
        path,
        body,
        {
            "Content-Type": "application/json",
            "X-Cadre-Timestamp": ts,
            "X-Cadre-Signature": f"v1={mac.hexdigest()}",
        },
    )


def slack_request(path: str, event_id: str, text: str, retry: bool) -> tuple[str, bytes, dict]:
    body = json.dumps(
        {
            "type": "event_callback",
            "team_id": "T1",
            "event_id": event_id,
            "event": {
                "type": "message",
                "user": "UBENCH",
                "text": text,
                "channel": "DBENCH",
                "channel_type": "im",
                "ts": f"1700000000.{int(event_id.split('-')[-1]):06d}",
            },
        }
    ).encode()
    ts = str(int(time.time()))
    mac = hmac.new(SLACK_SECRET.encode(), f"v0:{ts}:".encode() + body, hashlib.sha256)
    headers = {
        "Content-Type": "application/json",
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": f"v0={mac.hexdigest()}",
    }
    if retry:
        headers.update({"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"})
    return path, body, headers


class Connection:
    """One keep-alive HTTP/1.1 connection on raw asyncio streams (a general-purpose client
    would spend more CPU than the server under test on this shared machine)."""

    def __init__(self, host: str, port: int):
        self.host, self.port = host, port
        self.reader = self.writer = None

    async def post(self, path: str, body: bytes, headers: dict) -> int:
        return await self.request("POST", path, body, headers)

    async def request(self, method: str, path: str, body: bytes, headers: dict) -> int:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        head = [
            f"{method} {path} HTTP/1.1",
            f"Host: {self.host}:{self.port}",
            f"Content-Length: {len(body)}",
        ]
        head += [f"{name}: {value}" for name, value in headers.items()]
        self.writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
        await self.writer.drain()
        status_line = await self.reader.readline()
        if not status_line:
            raise ConnectionError("closed")
        length, close = 0, False
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b""):
                break
            name, _, value = line.decode("latin-1").partition(":")
            if name.lower() == "content-length":
                length = int(value.strip())
            elif name.lower() == "connection" and value.strip().lower() == "close":
                close = True
        if length:
            await self.reader.readexactly(length)
        if close:
            self.close()
        return int(status_line.split()[1])

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


class Load:
    def __init__(self, host, port, paths: dict, duplicate_ratio: float, connections: int):
        self.host, self.port = host, port
        self.paths = paths
        self.duplicate_ratio = duplicate_ratio
        self.connections = connections
        self.sequence = 0
        self.sent_unique: list[tuple[str, str]] = []  # (platform, event id)

    def new_event(self) -> tuple[str, str]:
        self.sequence += 1
        platform = "webhook" if self.sequence % 2 else "slack"
        event = (platform, f"bench-{self.sequence}")
        self.sent_unique.append(event)
        return event

    def request(self, event: tuple[str, str], retry: bool):
        platform, event_id = event
        if platform == "webhook":
            return webhook_request(self.paths["webhook"], event_id, "load test")
        return slack_request(self.paths["slack"], event_id, "load test", retry)

    def plan(self, rate: int, duration: float) -> tuple[list, int]:
        """(offset seconds, event, is redelivery) for one step, with duplicates mixed in."""
        items, duplicates = [], 0
        for index in range(int(rate * duration)):
            offset = index / rate
            if random.random() < self.duplicate_ratio and self.sent_unique:
                duplicates += 1
                if random.random() < 0.5:
                    event = self.new_event()
                    items += [(offset, event, False), (offset, event, True)]
                    continue
                earlier = random.choice(self.sent_unique[-2000:])
                items.append((offset, earlier, True))
                continue
            items.append((offset, self.new_event(), False))
        return items, duplicates

    async def step(self, rate: int, duration: float) -> dict:
        items, duplicates = self.plan(rate, duration)
        queue: asyncio.Queue = asyncio.Queue()
        latencies: list[float] = []
        lags: list[float] = []
        statuses: dict[int, int] = {}
        errors = 0
        start = time.perf_counter() + 0.1

        async def feeder():
            for offset, event, retry in items:
                delay = start + offset - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                queue.put_nowait((start + offset, event, retry))
            for _ in range(self.connections):
                queue.put_nowait(None)

        async def worker():
            nonlocal errors
            connection = Connection(self.host, self.port)
            while (item := await queue.get()) is not None:
                scheduled, event, retry = item
                path, body, headers = self.request(event, retry)
                began = time.perf_counter()
                lags.append(began - scheduled)
                try:
                    status = await asyncio.wait_for(connection.post(path, body, headers), 30)
                except (OSError, TimeoutError, ConnectionError, ValueError):
                    errors += 1
                    connection.close()
                    continue
                latencies.append(time.perf_counter() - began)
                statuses[status] = statuses.get(status, 0) + 1
            connection.close()

        began = time.perf_counter()
        await asyncio.gather(feeder(), *(worker() for _ in range(self.connections)))
        elapsed = time.perf_counter() - began
        ordered = sorted(latencies)

        def pct(values, p):
            return values[min(len(values) - 1, int(p * len(values)))] * 1000 if values else 0

        return {
            "rate": rate, "requests": len(items), "duplicates": duplicates,
            "elapsed": elapsed, "throughput": len(latencies) / elapsed,
            "p50": pct(ordered, 0.50), "p95": pct(ordered, 0.95), "p99": pct(ordered, 0.99),
            "max": ordered[-1] * 1000 if ordered else 0, "lag_p99": pct(sorted(lags), 0.99),
            "statuses": statuses, "errors": errors, "latencies": latencies,
        }  # fmt: skip


async def run_load(port, paths, rates, duration, duplicate_ratio, connections, after_warm_up):
    load = Load("127.0.0.1", port, paths, duplicate_ratio, connections)
    await load.step(50, 2)  # warm-up: connections and the connector caches in each worker
    after_warm_up()
    results = []
    for rate in rates:
        results.append(await load.step(rate, duration))
        await asyncio.sleep(1)
    return load, results


def wait_for_drain(connector_ids: list[int], timeout: float) -> float:
    """Seconds until nothing is queued or processing (and the count is stable); -1: timeout."""
    from connectors.models import InboundEvent

    started, last, stable = time.time(), -1, 0
    while time.time() - started < timeout:
        events = InboundEvent.objects.filter(connector_id__in=connector_ids)
        pending = events.filter(status__in=["queued", "processing"]).count()
        stored = events.count()
        stable = stable + 1 if stored == last else 0
        last = stored
        if pending == 0 and stable >= 2:
            return time.time() - started
        time.sleep(1)
    return -1


def run_variant(name: str, source: Path, args, env: dict, receiver: Receiver) -> dict:
    """One full run against the Cadre in `source`: fresh database, servers, load, drain, counts."""
    from datetime import UTC, datetime

    rates = [int(rate) for rate in args.rates.split(",")]
    fresh_database(env)
    objects = create_objects(receiver.url)
    sends_before = receiver.count
    port = free_port()
    load_before = os.getloadavg()[0]
    children = start_servers(
        env, port, args.web_workers, args.worker_concurrency, source, args.worker_nice
    )
    marks: dict[str, object] = {}

    def after_warm_up() -> None:
        marks["began"] = datetime.now(UTC)
        marks["web"], marks["worker"] = cpu_seconds(children[0]), cpu_seconds(children[1])

    try:
        wait_for_worker()
        load, results = asyncio.run(
            run_load(
                port, objects, rates, args.duration, args.duplicates, args.connections,
                after_warm_up,
            )
        )  # fmt: skip
        ended = datetime.now(UTC)
        web_cpu = cpu_seconds(children[0]) - marks["web"]
        drained = wait_for_drain(objects["ids"], args.drain_timeout)
        worker_cpu = cpu_seconds(children[1]) - marks["worker"]
    finally:
        stop_servers(children)
    began = marks["began"]

    from django.db.models import Count, Max, Min

    from connectors.models import Delivery, InboundEvent

    events = InboundEvent.objects.filter(connector_id__in=objects["ids"])
    keys = events.values("connector_id", "event_key").annotate(n=Count("id"))
    replies = Delivery.objects.filter(connector_id__in=objects["ids"])
    per_event = replies.values("inbound_event_id").annotate(n=Count("id"))
    done = events.exclude(processed_at=None)
    window = done.aggregate(first=Min("received_at"), last=Max("processed_at"))
    load_seconds = (ended - began).total_seconds()
    unique_sent = len(set(load.sent_unique))
    stored = events.count()
    processed = done.count()
    requests = sum(len(r["latencies"]) for r in results)
    processed_after_warm_up = done.filter(received_at__gte=began).count()
    return {
        "name": name,
        "web_cpu_ms": 1000 * web_cpu / max(1, requests),
        "worker_cpu_ms": 1000 * worker_cpu / max(1, processed_after_warm_up),
        "source": str(source),
        "results": results,
        "load_average": (load_before, os.getloadavg()[0]),
        "unique_sent": unique_sent,
        "stored": stored,
        "lost": max(0, unique_sent - stored),
        "stored_twice": sum(1 for row in keys if row["n"] > 1),
        "by_status": dict(events.values_list("status").annotate(n=Count("id"))),
        "max_attempts": events.aggregate(m=Max("attempts"))["m"],
        "replies_sent": replies.filter(status="sent").count(),
        "answered_twice": sum(1 for row in per_event if row["n"] > 1),
        "http_sends": receiver.count - sends_before,
        "drained": drained,
        "processed": processed,
        "processed_rate_load": done.filter(processed_at__lte=ended).count() / load_seconds,
        "backlog_at_end": events.filter(received_at__lte=ended)
        .exclude(processed_at__lte=ended)
        .count(),
        "processed_rate_overall": (
            processed / (window["last"] - window["first"]).total_seconds() if processed > 1 else 0.0
        ),
    }


def report(run: dict, args) -> None:
    print(
        f"\n[{run['name']}] {run['source']}: {args.web_workers} uvicorn workers, celery "
        f"concurrency {args.worker_concurrency} (nice {args.worker_nice}), {os.cpu_count()} CPUs, "
        f"{args.duplicates:.0%} duplicates, load average {run['load_average'][0]:.1f} before / "
        f"{run['load_average'][1]:.1f} after"
    )
    print(
        f"{'rate/s':>7} {'requests':>9} {'dups':>6} {'ack/s':>8} {'p50 ms':>8} "
        f"{'p95 ms':>8} {'p99 ms':>8} {'max ms':>8} {'lag p99':>8}  statuses"
    )
    for r in run["results"]:
        print(
            f"{r['rate']:>7} {r['requests']:>9} {r['duplicates']:>6} {r['throughput']:>8.1f} "
            f"{r['p50']:>8.1f} {r['p95']:>8.1f} {r['p99']:>8.1f} {r['max']:>8.1f} "
            f"{r['lag_p99']:>8.1f}  "
            f"{r['statuses']} errors={r['errors']}"
        )
    print(
        f"end to end: unique events sent {run['unique_sent']} (incl. the warm-up), stored "
        f"{run['stored']}, lost {run['lost']}, stored twice {run['stored_twice']}"
    )
    print(
        f"processing: {run['by_status']}, max attempts per event {run['max_attempts']}, "
        f"replies sent {run['replies_sent']}, events answered twice {run['answered_twice']}, "
        f"HTTP sends received {run['http_sends']}, drained in {run['drained']:.1f}s after the "
        "load"
    )
    print(
        f"worker: {run['processed_rate_load']:.1f} events/s processed during the load, backlog "
        f"{run['backlog_at_end']} at its end; {run['processed_rate_overall']:.1f} events/s from "
        "the first event received to the last processed"
    )
    print(
        f"cpu: web servers {run['web_cpu_ms']:.2f} ms per request, worker "
        f"{run['worker_cpu_ms']:.2f} ms per event processed (all processes of each, after the "
        "warm-up; independent of the machine's other load, unlike the latencies)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="100,200,300,400")
    parser.add_argument("--duration", type=float, default=15.0, help="seconds per rate")
    parser.add_argument("--duplicates", type=float, default=0.10)
    parser.add_argument("--web-workers", type=int, default=2)
    parser.add_argument("--worker-concurrency", type=int, default=2)
    parser.add_argument("--redis-db", type=int, default=13)
    parser.add_argument("--connections", type=int, default=64, help="keep-alive connections")
    parser.add_argument("--drain-timeout", type=float, default=300.0)
    parser.add_argument(
        "--worker-nice",
        type=int,
        default=0,
        help="run the Celery worker at this niceness: on one small machine the acknowledgements "
        "(the platforms' deadline) then come before the backlog",
    )
    parser.add_argument(
        "--baseline-source",
        type=Path,
        help="another copy of Cadre to run the same load against first (fresh database)",
    )
    args = parser.parse_args()

    receiver = Receiver()
    env = prepare_environment(args.redis_db)
    variants = [("current", ROOT)]
    if args.baseline_source:
        variants.insert(0, ("baseline", args.baseline_source.resolve()))
    try:
        runs = [run_variant(name, source, args, env, receiver) for name, source in variants]
    finally:
        receiver.close()
    for run in runs:
        report(run, args)


if __name__ == "__main__":
    main()
