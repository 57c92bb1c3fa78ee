"""Sizing figures for the deployment overlays: acks/s per web process, runs/s per worker
process, memory and database connections per process kind, side by side in one run.

Every process runs its kind's command line (cadre.runtime.processes.commands: what compose
and the Kubernetes manifests run), started by this interpreter, against a database of its own
(`cadre_bench_sizing`) and a Redis database of its own. The database is a copy of a template
(`cadre_bench_sizing_template`) migrated by the real `migrate` command as the schema owner;
the template is migrated again only when a migration file changed. The processes connect as
the application role (the embedded PostgreSQL's `cadre_app`), each with the `application_name`
of its process in DATABASE_URL, so pg_stat_activity tells their connections apart.

Processes: web-1 and web-2 (two web processes on loopback ports), worker-runs (`-Q runs`, at
`--concurrency` 1, then 2), worker (every other queue), beat and streams. Then:

1. runs: agent runs through the runs API (POST /api/v1/runs/ as the runs' member, an API key)
   on ONE worker-runs process, closed loop with three sessions per worker slot so the queue is
   never empty, against a loopback OpenAI-compatible model answering after each `--model-delays`
   value (0 s: Cadre's own overhead); the template has the product's default hooks (memory
   retrieval with the local embedding model, memory writing, skills). Runs/s, seconds a run
   holds a worker slot, the overhead beyond the model's delay, CPU of the process tree per run.
   Processes needed = peak runs/s x (model seconds + overhead) (one run at a time per process).
2. acks: signed webhook and Slack events (bench/connectors_load.py's signing and sender, no
   redeliveries) open-loop at each of `--rates` against ONE web process, then the same total
   rates split over TWO; ack p50/p99, the sender's own lag p99, and the highest rate sustained:
   every request answered 2xx, none failed, p99 + lag p99 below the platforms' 3 s, and at
   least 90 % of the asked rate acknowledged. The runs worker is stopped meanwhile and what the
   acks queued for it is discarded before it starts again: processing events is
   bench/connectors_load.py's measure; here it would take the CPU the acks are measured on.
3. memory: RSS, PSS and USS of each process and its children (prefork pools), after the loads.
4. database connections: the most backends of each process seen in pg_stat_activity (sampled
   every 0.25 s) during each phase, beside what docs/operations.md "Database connections" says
   each holds.

    .venv/bin/python bench/sizing.py            # full: about 7 minutes on 2 busy cores
    .venv/bin/python bench/sizing.py --short    # a quick check (tests/deploy/test_sizing.py)

The short variant measures each figure once: runs at one model delay (0.5 s) on worker-runs at
concurrency 1 only (no second runs phase), acks at one rate (on one web process, then two).

`--json PATH` writes the figures. The load average before and after is printed: latencies and
rates depend on what else the machine runs, CPU per ack and per run much less.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import multiprocessing
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "platform")]

from bench import environment  # noqa: E402
from bench.connectors_load import Load, Receiver, cpu_seconds, create_objects, free_port  # noqa: E402

BENCH_DB = "cadre_bench_sizing"
TEMPLATE_DB = "cadre_bench_sizing_template"
ACK_LIMIT_MS = 3000  # Slack and Feishu give up on an acknowledgement after 3 s
SESSIONS_PER_SLOT = 3
MOST_CONCURRENCY = 2  # worker-runs' concurrency in the last runs phase
# Whose CPU a run costs: the web process serving the post, the runs worker executing it, the
# other worker running its after-run hooks.
CPU_OF_RUNS = ("web-1", "worker-runs", "worker")
QUESTIONS = [
    "What is the standard discount?",
    "How do I prepare a customer visit?",
    "What should I record after a meeting?",
    "Who approves discounts above the limit?",
]


# --- the loopback model: an OpenAI-compatible endpoint answering after a delay --------------


def _serve_model(url_out, delay, calls, stop) -> None:
    """The model's process (the load generator's threads would otherwise share its GIL)."""
    from tests.agents.fake_models import FakeModelServer

    class SlowModel(FakeModelServer):
        def openai(self, handler, body, turn):
            with calls.get_lock():
                calls.value += 1
            time.sleep(delay.value)  # the model thinking
            super().openai(handler, body, {"text": "Noted: the sizing bench answered."})

    with SlowModel() as server:
        url_out.put(server.base_url)
        stop.wait()


class Model:
    """The loopback model in a process of its own; `delay` can be changed between phases."""

    def __init__(self):
        context = multiprocessing.get_context("spawn")
        urls, self.stop = context.Queue(), context.Event()
        self.delay, self.calls = context.Value("d", 0.0), context.Value("i", 0)
        self.process = context.Process(
            target=_serve_model, args=(urls, self.delay, self.calls, self.stop), daemon=True
        )
        self.process.start()
        self.url = urls.get(timeout=120)

    def close(self) -> None:
        self.stop.set()
        self.process.join(timeout=10)


# --- the database: a copy of a migrated template, the processes as the application role -----


def migrations_fingerprint() -> str:
    """What the template's schema depends on: every migration file's path and content."""
    digest = hashlib.sha256()
    for root in ("platform", "hub", "connectors"):
        for path in sorted((ROOT / root).rglob("migrations/*.py")):
            digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:32]


def _admin(admin_url: str):
    import psycopg

    return psycopg.connect(admin_url.replace("postgresql://", "postgres://", 1), autocommit=True)


def prepare_database(args) -> dict[str, str]:
    """A fresh bench database copied from the template (migrated first when a migration file
    changed), and the URLs: `owner` (the harness, and `migrate`), `app` (the processes)."""
    embedded = not os.environ.get("DATABASE_URL")
    fingerprint = migrations_fingerprint()
    admin_url = environment.prepare(
        TEMPLATE_DB, redis_db=args.redis_db, cache_prefix="cadre-bench-sizing", keep=True
    )
    with _admin(admin_url) as conn:
        stamp = conn.execute(
            "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s",
            [TEMPLATE_DB],
        ).fetchone()[0]
    if stamp != fingerprint:
        # Dropped and created again (it may be half-migrated), then migrated as the owner.
        admin_url = environment.prepare(
            TEMPLATE_DB, redis_db=args.redis_db, cache_prefix="cadre-bench-sizing"
        )
        urls = role_urls(os.environ["DATABASE_URL"], embedded)
        began = time.monotonic()
        migrate = subprocess.run(  # noqa: S603 - our interpreter, the product's command line
            migrate_command(),
            cwd=ROOT,
            env={**os.environ, "DATABASE_URL": urls["app"], "DATABASE_OWNER_URL": urls["owner"]},
            capture_output=True,
            text=True,
            check=False,
        )
        if migrate.returncode:
            raise SystemExit(f"migrate failed: {migrate.stderr[-3000:]}")
        with _admin(admin_url) as conn:
            conn.execute(f"COMMENT ON DATABASE {TEMPLATE_DB} IS '{fingerprint}'")
        print(f"template migrated as the owner in {time.monotonic() - began:.0f} s", flush=True)
    with _admin(admin_url) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {BENCH_DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {BENCH_DB} TEMPLATE {TEMPLATE_DB}")
    parts = urlsplit(os.environ["DATABASE_URL"])
    urls = role_urls(urlunsplit(parts._replace(path=f"/{BENCH_DB}")), embedded)
    # The harness works as the owner (it seeds, and discards the acks' backlog).
    os.environ["DATABASE_URL"] = urls["owner"]
    os.environ.pop("DATABASE_OWNER_URL", None)
    return {**urls, "admin": admin_url}


def role_urls(owner_url: str, embedded: bool) -> dict[str, str]:
    """The owner's URL and the application role's: on the embedded PostgreSQL its `cadre_app`;
    on a configured server (DATABASE_URL) that URL's role does both."""
    from cadre.runtime.embedded import app_role_url

    return {"owner": owner_url, "app": app_role_url(owner_url) if embedded else owner_url}


def with_application_name(url: str, name: str) -> str:
    parts = urlsplit(url)
    query = [(key, value) for key, value in parse_qsl(parts.query) if key != "application_name"]
    return urlunsplit(parts._replace(query=urlencode([*query, ("application_name", name)])))


def migrate_command() -> list[str]:
    from cadre.runtime import processes

    return processes.local_argv(processes.MIGRATE)


# --- the processes ---------------------------------------------------------------------------


def _replace(command: list[str], option: str, value: str) -> None:
    command[command.index(option) + 1] = value


def command_lines(settings, *, port: int, concurrency: int) -> dict[str, list[str]]:
    """Each kind's command line from cadre.runtime.processes.commands, for this machine: web on
    a loopback port, worker-runs at `concurrency`, each Celery worker with a node name of its
    own (as each container has a host name of its own)."""
    from cadre.runtime import processes

    lines = {kind: list(line) for kind, line in processes.commands(settings).items()}
    _replace(lines[processes.WEB], "--host", "127.0.0.1")
    _replace(lines[processes.WEB], "--port", str(port))
    _replace(lines[processes.WORKER_RUNS], "--concurrency", str(concurrency))
    for kind in (processes.WORKER_RUNS, processes.WORKER):
        lines[kind] += ["--hostname", f"{node_prefix(kind)}@%h"]
    return {kind: processes.local_argv(line) for kind, line in lines.items()}


def node_prefix(kind: str) -> str:
    return f"sizing-{kind}-{os.getpid()}"


class Installation:
    """The processes of one installation on this machine, by name (`web-1`, `worker-runs`...)."""

    def __init__(self, urls: dict[str, str], logs: Path):
        self.urls, self.logs = urls, logs
        self.children: dict[str, object] = {}  # name -> cadre.runtime.processes.Child
        self.ports: dict[str, int] = {}

    def start(self, name: str, kind: str, *, concurrency: int = 2) -> None:
        from django.conf import settings

        from cadre.runtime.processes import Child

        port = free_port()
        command = command_lines(settings, port=port, concurrency=concurrency)[kind]
        env = {
            **os.environ,
            "DATABASE_URL": with_application_name(self.urls["app"], name),
            "CELERY_SKIP_CHECKS": "1",  # as `cadre up`: the checks ran once, in migrate
            "PYTHONUNBUFFERED": "1",
        }
        env.pop("DATABASE_OWNER_URL", None)  # no process but migrate has the owner's URL
        with open(self.logs / f"{name}.log", "ab") as log:
            process = subprocess.Popen(  # noqa: S603 - our interpreter, the product's command
                command, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, process_group=0,
            )  # fmt: skip
        self.children[name] = Child(name, process)
        self.ports[name] = port

    def stop(self, *names: str) -> None:
        from cadre.runtime.processes import stop_children

        stop_children([self.children.pop(name) for name in names], timeout=30)

    def stop_all(self) -> None:
        self.stop(*list(self.children))

    def pid(self, name: str) -> int:
        return self.children[name].pid

    def wait_web(self, name: str, timeout: float) -> None:
        """Until /readyz answers 200 quickly three times in a row (Django imported, the
        database reachable), not merely when the socket is bound."""
        import httpx

        deadline, quick = time.monotonic() + timeout, 0
        while quick < 3:
            self._alive(name)
            if time.monotonic() > deadline:
                raise SystemExit(f"{name} did not become ready: see {self.logs / name}.log")
            began = time.perf_counter()
            try:
                url = f"http://127.0.0.1:{self.ports[name]}/readyz"
                ok = httpx.get(url, timeout=30).status_code == 200
            except httpx.HTTPError:
                ok = False
            quick = quick + 1 if ok and time.perf_counter() - began < 0.5 else 0
            time.sleep(0 if ok else 0.5)

    def wait_worker(self, name: str, kind: str, timeout: float) -> None:
        """Until the Celery worker answers a ping by its node name."""
        from cadre.celery import app

        node = f"{node_prefix(kind)}@{socket.gethostname()}"
        deadline = time.monotonic() + timeout
        while not app.control.ping(destination=[node], timeout=1.0):
            self._alive(name)
            if time.monotonic() > deadline:
                raise SystemExit(f"{name} did not become ready: see {self.logs / name}.log")

    def _alive(self, name: str) -> None:
        if self.children[name].process.poll() is not None:
            raise SystemExit(f"{name} exited: see {self.logs / name}.log")

    def memory(self, name: str) -> dict[str, float]:
        """MB of the process and its children: RSS (shared pages counted in each), PSS (shared
        pages split between their users) and USS (the process's own)."""
        import psutil

        root = psutil.Process(self.pid(name))
        tree = [root, *root.children(recursive=True)]
        totals = {"processes": len(tree), "rss": 0.0, "pss": 0.0, "uss": 0.0}
        for process in tree:
            with contextlib.suppress(psutil.NoSuchProcess):
                info = process.memory_full_info()
                for key in ("rss", "pss", "uss"):
                    totals[key] += getattr(info, key) / 2**20
        return totals


# --- database connections --------------------------------------------------------------------


class ConnectionSampler:
    """The bench database's backends per application_name, every 0.25 s, the most per phase."""

    def __init__(self, admin_url: str):
        self.admin_url = admin_url
        self.phase = "start"
        self.most: dict[str, dict[str, int]] = {}
        self.last_queries: dict[str, list[str]] = {}
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()

    def _sample(self) -> None:
        with _admin(self.admin_url) as conn:
            while not self.stopped.wait(0.25):
                rows = conn.execute(
                    "SELECT application_name, count(*), array_agg(left(query, 60)) "
                    "FROM pg_stat_activity WHERE datname = %s "
                    "AND backend_type = 'client backend' GROUP BY 1",
                    [BENCH_DB],
                ).fetchall()
                seen = self.most.setdefault(self.phase, {})
                for name, count, queries in rows:
                    if count > seen.get(name, 0):
                        seen[name] = count
                        # What each backend ran last, at the most: whose connections they are.
                        self.last_queries[name] = queries

    def close(self) -> None:
        self.stopped.set()
        self.thread.join(timeout=5)


# --- objects ---------------------------------------------------------------------------------


def create_agents(model_url: str, count: int) -> list[dict]:
    """`count` people, each with their own agent (a template with the product's default hooks)
    and API key, as chat sessions are people's; the loopback model as the organization's
    provider. They are not the webhook events' sender, who has no agent."""
    from cadre.agents import providers
    from cadre.agents import services as agents
    from cadre.tenancy.actors import member_actor
    from cadre.tenancy.models import Member, Organization, Position
    from cadre.tenancy.services.api_keys import api_key_create

    organization = Organization.objects.get(slug="bench")
    owner = Member.objects.get(organization=organization, email="owner@bench.test")
    actor = member_actor(owner)
    providers.provider_config_create(
        actor=actor,
        name="sizing model",
        kind="openai_compatible",
        base_url=model_url,
        api_key="sizing",
        default_model="fake-chat",
        timeout_seconds=30,
    )
    position = Position.objects.create(organization=organization, name="Sales", code="sales")
    # Owners: a member creates their own API keys with `apikey.manage`.
    people = [
        Member.objects.create(
            organization=organization,
            display_name=f"Rep {number}",
            email=f"rep{number}@bench.test",
            roles=["owner"],
        )
        for number in range(count)
    ]
    for person in people:
        person.positions.add(position)
    template = agents.template_create(actor=actor, name="Sales", code="sales", preset="sales")
    version = template.versions.get()
    agents.version_submit(actor=actor, version=version)
    agents.version_publish(actor=actor, version=version)
    deployment = agents.deployment_create(
        actor=actor, name="Sales", template=template, positions=[position]
    )
    sessions = []
    for person in people:
        _, token = api_key_create(
            actor=member_actor(person), name="sizing", scopes=["agents:run", "memory:read"]
        )
        sessions.append({"agent": deployment.agents.get(member=person).pk, "token": token})
    return sessions


# --- runs ------------------------------------------------------------------------------------


def drive_runs(base_url: str, people: list[dict], sessions: int, duration: float) -> dict:
    """Closed loop: each session (a person of `people`, with their agent and key) posts a
    message through the runs API, waits for its run to end (one poller reads every open run's
    state from the database every 50 ms, so the web process serves only the posts) and posts
    the next at once, for `duration` seconds."""
    import httpx
    from django.db import connection

    from cadre.agents.models import Run

    lock = threading.Lock()
    waiting: dict[int, threading.Event] = {}
    ended: dict[int, tuple[str, float]] = {}
    latencies: list[float] = []
    figures = {"completed": 0, "failed": 0, "refused": 0, "last_done": 0.0}
    stop = threading.Event()

    def poll() -> None:
        try:
            while not stop.wait(0.05):
                with lock:
                    ids = list(waiting)
                if not ids:
                    continue
                rows = Run.objects.filter(pk__in=ids, status__in=Run.TERMINAL).values_list(
                    "pk", "status"
                )
                for pk, status in rows:
                    with lock:
                        ended[pk] = (status, time.monotonic())
                        waiting.pop(pk).set()
        finally:
            connection.close()

    def session(index: int) -> None:
        objects = people[index]
        headers = {"Authorization": f"Bearer {objects['token']}"}
        conversation = None
        with httpx.Client(base_url=base_url, headers=headers, timeout=60) as client:
            sent = 0
            while time.monotonic() < deadline:
                data = {"agent": objects["agent"], "text": QUESTIONS[(index + sent) % 4]}
                if conversation:
                    data["session"] = conversation
                posted = time.monotonic()
                try:
                    answer = client.post("/api/v1/runs/", json=data)
                except httpx.HTTPError:
                    answer = None
                if answer is None or answer.status_code != 202:
                    with lock:
                        figures["refused"] += 1
                    time.sleep(0.5)
                    continue
                sent += 1
                run = answer.json()
                conversation = run.get("session") or conversation
                done = threading.Event()
                with lock:
                    waiting[run["id"]] = done
                if not done.wait(180):
                    with lock:
                        figures["failed"] += 1
                    continue
                status, at = ended[run["id"]]
                with lock:
                    if status == Run.Status.COMPLETED:
                        figures["completed"] += 1
                        latencies.append(at - posted)
                        figures["last_done"] = max(figures["last_done"], at)
                    else:
                        figures["failed"] += 1

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    began = time.monotonic()
    deadline = began + duration
    threads = [threading.Thread(target=session, args=(i,)) for i in range(sessions)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stop.set()
    poller.join()
    elapsed = max(figures["last_done"], began + 0.001) - began
    return {
        **figures,
        "elapsed": elapsed,
        "runs_per_s": figures["completed"] / elapsed,
        "p50_s": statistics.median(latencies) if latencies else 0.0,
    }


def runs_phase(installation, model, people: list[dict], concurrency: int, args) -> list[dict]:
    """One worker-runs process at `concurrency`: warmed (each pool process loads the embedding
    model on its first run), then measured at each model delay. CPU per run: the runs worker's
    process tree, and the other worker's (the after-run hooks: memory writing, skills)."""
    base_url = f"http://127.0.0.1:{installation.ports['web-1']}"
    model.delay.value = 0.0
    warm = drive_runs(base_url, people, 2 * concurrency, args.warm_up)
    if not warm["completed"] or warm["failed"]:
        raise SystemExit(f"runs warm-up failed: {warm}")
    results = []
    for delay in args.model_delays:
        model.delay.value = delay
        calls_before = model.calls.value
        cpu_before = {name: cpu_seconds(installation.children[name]) for name in CPU_OF_RUNS}
        sessions = SESSIONS_PER_SLOT * concurrency
        result = drive_runs(base_url, people, sessions, args.runs_duration)
        completed = max(1, result["completed"])
        cpu = {
            name: 1000 * (cpu_seconds(installation.children[name]) - before) / completed
            for name, before in cpu_before.items()
        }
        slot_seconds = concurrency / result["runs_per_s"] if result["runs_per_s"] else 0.0
        results.append(
            {
                **result,
                "concurrency": concurrency,
                "model_delay_s": delay,
                "slot_seconds_per_run": slot_seconds,
                "overhead_s": slot_seconds - delay,
                "runs_per_s_per_process": result["runs_per_s"] / concurrency,
                "cpu_ms_per_run": cpu,
                "model_calls_per_run": (model.calls.value - calls_before) / completed,
                "load_average": os.getloadavg()[0],
            }
        )
    model.delay.value = 0.0
    return results


# --- acks ------------------------------------------------------------------------------------


def _percentile(ordered: list[float], fraction: float) -> float:
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] * 1000 if ordered else 0.0


async def ack_steps(ports: list[int], paths: dict, args, first_event: int, cpu) -> list[dict]:
    """Each rate of `--rates`, split evenly over the web processes at `ports` (one sender per
    process, its own keep-alive connections), merged into one line per rate; `cpu()` is read
    after the warm-up and at the end."""
    loads = [Load("127.0.0.1", port, paths, 0.0, args.connections) for port in ports]
    for number, load in enumerate(loads):  # event ids unique across senders and phases
        load.sequence = first_event + number * 1_000_000
    await asyncio.gather(*(load.step(20, 2) for load in loads))  # warm-up
    cpu()
    results = []
    for rate in args.rates:
        parts = await asyncio.gather(
            *(load.step(rate / len(loads), args.ack_duration) for load in loads)
        )
        latencies = sorted(value for part in parts for value in part["latencies"])
        statuses: dict[int, int] = {}
        for part in parts:
            for status, count in part["statuses"].items():
                statuses[status] = statuses.get(status, 0) + count
        elapsed = max(part["elapsed"] for part in parts)
        result = {
            "rate": rate,
            "web_processes": len(ports),
            "requests": sum(part["requests"] for part in parts),
            "acked": len(latencies),
            "acks_per_s": len(latencies) / elapsed,
            "p50_ms": _percentile(latencies, 0.50),
            "p99_ms": _percentile(latencies, 0.99),
            "lag_p99_ms": max(part["lag_p99"] for part in parts),
            "errors": sum(part["errors"] for part in parts),
            "not_2xx": sum(count for status, count in statuses.items() if not 200 <= status < 300),
        }
        result["sustained"] = (
            result["errors"] == 0
            and result["not_2xx"] == 0
            and result["p99_ms"] + result["lag_p99_ms"] < ACK_LIMIT_MS
            and result["acks_per_s"] >= 0.9 * rate
        )
        results.append(result)
        await asyncio.sleep(1)
    cpu()
    return results


def acks_phase(installation, paths: dict, web: list[str], args, first_event: int) -> dict:
    ports = [installation.ports[name] for name in web]
    marks: list[float] = []

    def cpu() -> None:  # the web processes' CPU seconds so far
        marks.append(sum(cpu_seconds(installation.children[name]) for name in web))

    steps = asyncio.run(ack_steps(ports, paths, args, first_event, cpu))
    cpu_used, acked = marks[1] - marks[0], sum(step["acked"] for step in steps)
    sustained = [step["rate"] for step in steps if step["sustained"]]
    return {
        "web_processes": len(web),
        "steps": steps,
        "max_sustained": max(sustained) if sustained else 0,
        "cpu_ms_per_ack": 1000 * cpu_used / max(1, acked),
    }


def discard_ack_backlog(connector_ids: list[int]) -> int:
    """What the acks queued for the runs worker (stopped meanwhile): their drain tasks and
    the events, so the next runs are measured without them."""
    from django.conf import settings

    from cadre.celery import app
    from connectors.models import InboundEvent

    with app.connection_for_write() as connection:
        connection.default_channel.queue_purge(settings.CADRE_QUEUES["runs"])
    deleted, _ = InboundEvent.objects.filter(connector_id__in=connector_ids).delete()
    return deleted


# --- the run ---------------------------------------------------------------------------------


def expected_connections(settings, concurrency: dict[str, int]) -> dict[str, str]:
    """What docs/operations.md "Database connections" says each process holds at most: a
    runs-pool process its own, its drain threads' and the claim keeper's."""
    from connectors.inbound.drain import DRAIN_THREADS

    pool = settings.DATABASE_POOL_OPTIONS["max_size"]
    per_process = 1 + DRAIN_THREADS + 1
    return {
        "web": f"<= {pool} (DATABASE_POOL_SIZE)",
        "worker-runs": f"<= {per_process} per pool process: "
        + ", ".join(f"{c * per_process} at {c}" for c in concurrency["worker-runs"]),
        "worker": f"{concurrency['worker']} (--concurrency)",
        "beat": "1",
        "streams": "1 (+1 per stream-mode connector)",
    }


def run(args) -> dict:
    load_before = os.getloadavg()
    began = time.monotonic()
    phases: dict[str, float] = {}
    last = [began]

    def phase_over(name: str) -> None:  # where the time goes: seconds per phase
        now = time.monotonic()
        phases[name] = round(now - last[0], 1)
        last[0] = now
        print(f"phase {name}: {phases[name]:.1f} s", flush=True)

    receiver, model = Receiver(), Model()
    phase_over("model")
    logs = Path(tempfile.mkdtemp(prefix="cadre-sizing-"))
    urls = prepare_database(args)
    phase_over("database")
    # Nothing of an earlier run (queued tasks, beat's lock) in the bench's Redis database.
    import redis

    redis.Redis.from_url(os.environ["REDIS_URL"]).flushdb()
    os.environ.update(
        {
            # The loopback platform API and model stand in for the real ones; the outbound
            # guard lets them through in this bench's environment only (docs/connectors.md).
            "CADRE_CONNECTOR_WEBHOOK_ALLOWED_HOSTS": "127.0.0.1",
            "CADRE_CONNECTOR_ALLOWED_HOSTS": "127.0.0.1",
            "CADRE_MODEL_PROVIDER_ALLOWED_HOSTS": "127.0.0.1",
            "LOG_FORMAT": "text",
            "HF_HUB_OFFLINE": "1",
            "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "platform")]),
        }
    )
    import django

    django.setup()
    from django.conf import settings
    from django.db import connections

    sampler = ConnectionSampler(urls["admin"])
    installation = Installation(urls, logs)
    figures: dict = {"memory": {}, "runs": [], "acks": []}
    try:
        # Started first: their imports take a while, the seeding meanwhile.
        for name, kind in (("web-1", "web"), ("web-2", "web"), ("worker", "worker"),
                           ("beat", "beat"), ("streams", "streams")):  # fmt: skip
            installation.start(name, kind)
        installation.start("worker-runs", "worker-runs", concurrency=1)
        paths = create_objects(receiver.url)  # migrate (nothing left to do), the cache
        people = create_agents(model.url, SESSIONS_PER_SLOT * max(args.concurrencies))
        connections.close_all()
        for name in ("web-1", "web-2"):
            installation.wait_web(name, 300)
        installation.wait_worker("worker", "worker", 300)
        installation.wait_worker("worker-runs", "worker-runs", 300)
        figures["startup_s"] = time.monotonic() - began
        print(f"processes ready {figures['startup_s']:.0f} s after the start", flush=True)
        phase_over("processes")
        warm_web_memory(installation, people[0])
        phase_over("warm")

        sampler.phase = "runs-1"
        figures["runs"] += runs_phase(installation, model, people, 1, args)
        figures["memory"]["worker-runs (concurrency 1)"] = installation.memory("worker-runs")
        installation.stop("worker-runs")
        phase_over("runs-1")

        sampler.phase = "acks"
        figures["acks"].append(acks_phase(installation, paths, ["web-1"], args, 0))
        figures["acks"].append(
            acks_phase(installation, paths, ["web-1", "web-2"], args, 10_000_000)
        )
        figures["discarded_events"] = discard_ack_backlog(paths["ids"])
        connections.close_all()
        phase_over("acks")

        if MOST_CONCURRENCY in args.concurrencies:  # the full bench: runs at concurrency 2
            sampler.phase = "runs-2"
            installation.start("worker-runs", "worker-runs", concurrency=MOST_CONCURRENCY)
            installation.wait_worker("worker-runs", "worker-runs", 300)
            figures["runs"] += runs_phase(installation, model, people, MOST_CONCURRENCY, args)
            phase_over("runs-2")
        sampler.phase = "end"
        for name in ("web-1", "web-2", "worker-runs", "worker", "beat", "streams"):
            if name not in installation.children:  # the short variant's stopped runs worker
                continue
            label = "worker-runs (concurrency 2)" if name == "worker-runs" else name
            figures["memory"][label] = installation.memory(name)
    finally:
        installation.stop_all()
        sampler.close()
        model.close()
        receiver.close()
        connections.close_all()
        if not args.keepdb:
            with _admin(urls["admin"]) as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {BENCH_DB} WITH (FORCE)")
    phase_over("stop")
    figures["phase_s"] = phases
    shutil.rmtree(logs)  # the processes' logs are kept only when something failed
    figures["connections"] = sampler.most
    figures["connections_last_queries"] = sampler.last_queries
    figures["expected_connections"] = expected_connections(
        settings, {"worker-runs": args.concurrencies, "worker": 2}
    )
    figures["load_average"] = {"before": load_before[0], "after": os.getloadavg()[0]}
    figures["duration_s"] = time.monotonic() - began
    figures["cpus"] = os.cpu_count()
    figures["model_delays"] = args.model_delays
    figures["concurrencies"] = args.concurrencies
    return figures


def warm_web_memory(installation, objects: dict) -> None:
    """One memory search on each web process: it loads the embedding model, as the console's
    and the APIs' memory search do in production."""
    import httpx

    for name in ("web-1", "web-2"):
        answer = httpx.post(
            f"http://127.0.0.1:{installation.ports[name]}/api/v1/memories/search/",
            json={"query": "discount approval", "force": True},
            headers={"Authorization": f"Bearer {objects['token']}"},
            timeout=120,
        )
        if answer.status_code != 200:
            raise SystemExit(f"memory search on {name}: {answer.status_code} {answer.text[:300]}")


# --- the report ------------------------------------------------------------------------------


def report(figures: dict) -> None:
    load = figures["load_average"]
    print(
        f"\nsizing: {figures['cpus']} CPUs, load average {load['before']:.1f} before / "
        f"{load['after']:.1f} after, {figures['duration_s']:.0f} s in all"
    )
    print(f"\nacks (ack limit {ACK_LIMIT_MS} ms: sustained = all 2xx, p99 + lag p99 under it, "
          ">= 90 % of the rate acknowledged)")  # fmt: skip
    print(f"{'web':>4} {'rate/s':>7} {'ack/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'lag p99':>8} "
          f"{'errors':>6} {'not 2xx':>7}  sustained")  # fmt: skip
    for phase in figures["acks"]:
        for step in phase["steps"]:
            print(
                f"{step['web_processes']:>4} {step['rate']:>7} {step['acks_per_s']:>8.1f} "
                f"{step['p50_ms']:>8.1f} {step['p99_ms']:>8.1f} {step['lag_p99_ms']:>8.1f} "
                f"{step['errors']:>6} {step['not_2xx']:>7}  {'yes' if step['sustained'] else 'no'}"
            )
    for phase in figures["acks"]:
        per_core = 1000 / phase["cpu_ms_per_ack"] if phase["cpu_ms_per_ack"] else 0
        print(
            f"acks_per_s web_processes={phase['web_processes']} "
            f"max_sustained={phase['max_sustained']} cpu_ms_per_ack={phase['cpu_ms_per_ack']:.2f} "
            f"acks_per_cpu_second={per_core:.0f}"
        )
    print("\nruns (one worker-runs process; slot s = concurrency / runs/s; overhead = slot s - "
          "model delay; CPU ms per run of web, the runs worker and the other worker)")  # fmt: skip
    print(f"{'conc':>4} {'model s':>7} {'runs':>5} {'runs/s':>7} {'per proc':>8} {'slot s':>7} "
          f"{'overhead':>8} {'p50 s':>6} {'web':>5} {'runs':>5} {'after':>5} {'calls':>5} "
          f"{'failed':>6} {'load':>5}")  # fmt: skip
    for row in figures["runs"]:
        cpu = row["cpu_ms_per_run"]
        print(
            f"{row['concurrency']:>4} {row['model_delay_s']:>7.1f} {row['completed']:>5} "
            f"{row['runs_per_s']:>7.2f} {row['runs_per_s_per_process']:>8.2f} "
            f"{row['slot_seconds_per_run']:>7.2f} {row['overhead_s']:>8.2f} {row['p50_s']:>6.2f} "
            f"{cpu['web-1']:>5.0f} {cpu['worker-runs']:>5.0f} {cpu['worker']:>5.0f} "
            f"{row['model_calls_per_run']:>5.1f} {row['failed'] + row['refused']:>6} "
            f"{row['load_average']:>5.1f}"
        )
    for row in figures["runs"]:
        print(
            f"runs_per_s concurrency={row['concurrency']} model_delay_s={row['model_delay_s']:g} "
            f"runs_per_s={row['runs_per_s']:.2f} per_process={row['runs_per_s_per_process']:.2f} "
            f"overhead_s={row['overhead_s']:.2f} "
            f"cpu_ms_runs_worker={row['cpu_ms_per_run']['worker-runs']:.0f}"
        )
    print("processes needed = peak runs/s x (model seconds + overhead seconds)")
    print("\nmemory after the loads (MB; the process and its children)")
    print(f"{'process':<28} {'procs':>5} {'RSS':>8} {'PSS':>8} {'USS':>8}")
    for name, memory in figures["memory"].items():
        print(
            f"{name:<28} {memory['processes']:>5} {memory['rss']:>8.0f} {memory['pss']:>8.0f} "
            f"{memory['uss']:>8.0f}"
        )
    for name, memory in figures["memory"].items():
        print(f"memory process={name.split()[0]} rss_mb={memory['rss']:.0f} "
              f"pss_mb={memory['pss']:.0f} uss_mb={memory['uss']:.0f}")  # fmt: skip
    print("\ndatabase connections (most backends seen per phase, pg_stat_activity)")
    phases = [
        phase for phase in ("runs-1", "acks", "runs-2", "end") if phase in figures["connections"]
    ]
    print(f"{'process':<12} " + " ".join(f"{phase:>7}" for phase in phases) + "  docs say")
    expected = figures["expected_connections"]
    for name in ("web-1", "web-2", "worker-runs", "worker", "beat", "streams"):
        seen = [figures["connections"][phase].get(name, 0) for phase in phases]
        kind = name.split("-")[0] if name.startswith("web") else name
        print(f"{name:<12} " + " ".join(f"{count:>7}" for count in seen) + f"  {expected[kind]}")
    for name in ("web-1", "worker-runs", "worker", "beat", "streams"):
        most = max((seen.get(name, 0) for seen in figures["connections"].values()), default=0)
        print(f"connections process={name} most={most}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--short", action="store_true", help="a quick check: one delay, concurrency, rate"
    )
    parser.add_argument("--rates", help="ack rates, events/s (default 100,200,400,600,800)")
    parser.add_argument("--ack-duration", type=float, help="seconds per rate (default 8)")
    parser.add_argument("--model-delays", help="model answer delays, s (default 0,2)")
    parser.add_argument("--runs-duration", type=float, help="seconds per delay (default 20)")
    parser.add_argument("--warm-up", type=float, default=None, help="seconds of warm-up runs")
    parser.add_argument("--connections", type=int, default=64, help="per web process")
    parser.add_argument("--redis-db", type=int, default=15)
    parser.add_argument("--keepdb", action="store_true", help="keep the bench database")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    defaults = (
        {"rates": "50", "ack_duration": 3.0, "model_delays": "0.5", "runs_duration": 4.0,
         "warm_up": 2.0}
        if args.short
        else {"rates": "100,200,400,600,800", "ack_duration": 8.0, "model_delays": "0,2",
              "runs_duration": 20.0, "warm_up": 4.0}
    )  # fmt: skip
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    args.rates = [int(rate) for rate in str(args.rates).split(",")]
    args.model_delays = [float(delay) for delay in str(args.model_delays).split(",")]
    # worker-runs' concurrency in each runs phase: the short variant has the first only.
    args.concurrencies = [1] if args.short else [1, MOST_CONCURRENCY]
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    figures = run(args)
    report(figures)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2, default=str))


if __name__ == "__main__":
    main()
