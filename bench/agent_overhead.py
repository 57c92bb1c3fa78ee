"""Platform overhead per agent run with the offline provider, at 1, 10 and 50 concurrent sessions.

Latency = from message accepted (`run_start` returned: the run is stored and its task
published, what the API's 202 means) to reply ready (the worker marked the run completed:
`Run.finished_at`). The offline provider answers in microseconds, so this is the platform:
queueing, the Celery hop, hooks (input policy, context base, memory retrieval with its query
embedding and ContextRecord), the model step, step/event persistence and completion.

Each session is a member chatting with their own agent: send a message, wait for the reply,
think, send the next. Think times are drawn uniformly from 0.5x to 1.5x --think (mean
--think) and each session's first message comes at a random moment within one think time —
people do not type in lockstep; without it every session sends at the same instant and each
"wave" of 50 runs queues behind itself. The draws are seeded, so both paths and every
invocation see the same arrival pattern. Real Celery workers (prefork, --workers processes
in one pool consuming every queue the product routes to: `runs`, `after`, ...) on Redis,
against a separate database (`cadre_agents_bench` on the same PostgreSQL) and a separate
Redis database.

Under each figure, the CPU spent per completed run while measuring: the worker processes,
the bench database's PostgreSQL backends and the harness (which starts the runs, as the web
process would, and polls). After-run hooks queued at the lowest priority may still be
running when a measurement ends; their CPU then counts in the next one.

    .venv/bin/python bench/agent_overhead.py                      # 1, 10, 50 sessions
    .venv/bin/python bench/agent_overhead.py --sessions 50 --messages 10 --workers 4
    .venv/bin/python bench/agent_overhead.py --no-memory          # without memory retrieval
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "platform")]

from bench.environment import worker_command, worker_queues  # noqa: E402

BENCH_DB = "cadre_agents_bench"
REDIS_DB = 12
QUESTIONS = [
    "What is the standard discount?",
    "How do I prepare a customer visit?",
    "What should I record after a meeting?",
    "Who approves discounts above the limit?",
]


def prepare_environment() -> dict[str, str]:
    from urllib.parse import urlsplit, urlunsplit

    data_dir = Path(os.environ.get("CADRE_DATA_DIR", ROOT / "var")).resolve()
    database_url = os.environ.get("DATABASE_URL")
    if not database_url:
        from cadre.runtime.embedded import start_postgres

        database_url = start_postgres(data_dir)
    import psycopg

    parts = urlsplit(database_url)
    admin_url = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(
        admin_url.replace("postgresql://", "postgres://", 1), autocommit=True
    ) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [BENCH_DB]).fetchone():
            conn.execute(f"DROP DATABASE {BENCH_DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {BENCH_DB}")
    bench_url = urlunsplit(parts._replace(path=f"/{BENCH_DB}"))
    redis_url = os.environ.get("REDIS_URL")
    if not redis_url:
        from cadre.runtime.embedded import start_redis

        redis_url = start_redis(data_dir)
    if redis_url.startswith("unix://"):
        redis_url = redis_url.split("?")[0] + f"?db={REDIS_DB}"
    else:
        redis_url = redis_url.rsplit("/", 1)[0] + f"/{REDIS_DB}"
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
            "CADRE_CACHE_PREFIX": "cadre-agents-bench",
            "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "platform")]),
            "HF_HUB_OFFLINE": "1",
        }
    )
    os.environ.update(env)
    return env


# The baseline: the same runtime with every built-in hook off (no retrieval, skills, memory
# writing or backflow) — what the learning platform adds on top. The organization's input
# policy runs in both: it is the runtime's, not a hook a template can switch off.
BARE_HOOKS = {
    "assemble_context": [
        {"name": "memory_retrieval", "enabled": False},
        {"name": "skills", "enabled": False},
    ],
    "process_memory": [{"name": "memory_write", "enabled": False}],
    "post_process": [{"name": "skill_backflow", "enabled": False}],
}


def create_agents(count: int, memory: bool) -> dict[str, list]:
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    import redis
    from django.conf import settings

    redis.Redis.from_url(settings.REDIS_URL).flushdb()  # the bench Redis database only
    from cadre.agents import services
    from cadre.tenancy.actors import member_actor
    from cadre.tenancy.models import Member, Organization, Position

    organization = Organization.objects.create(name="Bench", slug="agents-bench")
    owner = Member.objects.create(
        organization=organization, display_name="Owner", email="owner@bench.test", roles=["owner"]
    )
    actor = member_actor(owner)
    position = Position.objects.create(organization=organization, name="Sales", code="sales")
    members = [
        Member(
            organization=organization,
            display_name=f"Rep {i}",
            email=f"rep{i}@bench.test",
            roles=["employee"],
        )
        for i in range(count)
    ]
    Member.objects.bulk_create(members)
    members = list(Member.objects.filter(organization=organization, roles=["employee"]))
    for member in members:
        member.positions.add(position)
    hooks = {} if memory else {"assemble_context": [{"name": "memory_retrieval", "enabled": False}]}
    agents = {}
    for code, template_hooks in (("full", hooks), ("bare", BARE_HOOKS)):
        template = services.template_create(
            actor=actor, name=f"Sales {code}", code=code, preset="sales", hooks=template_hooks
        )
        version = template.versions.get()
        services.version_submit(actor=actor, version=version)
        services.version_publish(actor=actor, version=version)
        deployment = services.deployment_create(
            actor=actor, name=f"Sales {code}", template=template, positions=[position]
        )
        agents[code] = list(
            deployment.agents.select_related("member", "deployment", "version").order_by("id")
        )
    return agents


def worker_commands(workers: int = 4) -> list[list[str]]:
    """The Celery workers this bench starts: one prefork pool of `workers` processes consuming
    every queue, one task at a time per process."""
    return [
        worker_command(workers, "agents-bench", "--pool", "prefork", "--prefetch-multiplier", "1")
    ]


def start_workers(env: dict, workers: int) -> subprocess.Popen:
    (command,) = worker_commands(workers)
    return subprocess.Popen(command, cwd=ROOT, env=env, process_group=0)  # noqa: S603


def stop_workers(child: subprocess.Popen) -> None:
    if child.poll() is None:  # warm shutdown: the main process lets running tasks finish
        os.kill(child.pid, signal.SIGTERM)
    try:
        child.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)


def cpu_snapshot(worker_group: int) -> dict:
    """CPU seconds so far: the Celery workers (their process group), each PostgreSQL backend
    of the bench database (by pid, so one that ends in between is left out rather than
    subtracted), and the harness from its own clock; read from /proc."""
    workers, backends = 0.0, {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
            command = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        fields = text.rsplit(")", 1)[1].split()
        seconds = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        if int(fields[2]) == worker_group:
            workers += seconds
        elif command.startswith(b"postgres:") and BENCH_DB.encode() in command:
            backends[int(stat.parent.name)] = seconds
    return {"workers": workers, "database": backends, "harness": time.process_time()}


def cpu_used(before: dict, after: dict) -> dict[str, float]:
    database = sum(
        seconds - before["database"].get(pid, 0.0) for pid, seconds in after["database"].items()
    )
    return {
        "workers": after["workers"] - before["workers"],
        "database": database,
        "harness": after["harness"] - before["harness"],
    }


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    index = max(0, min(len(ordered) - 1, round(fraction * len(ordered) + 0.5) - 1))
    return ordered[index]


def drive(agents: list, sessions: int, messages: int, think: float, timeout: float) -> dict:
    """Closed loop: each session sends, waits for its reply, thinks, sends again."""
    import random

    draw = random.Random(sessions * 1000 + messages)  # a load pattern, the same every time
    from django.utils import timezone

    from cadre.agents.models import Run
    from cadre.agents.runtime.lifecycle import services as runtime
    from cadre.tenancy.actors import member_actor

    active = agents[:sessions]
    state = {
        agent.pk: {"sent": 0, "run": None, "accepted": None, "next_at": 0.0, "session": None}
        for agent in active
    }
    begin = time.monotonic()
    for slot in state.values():  # staggered first messages
        slot["next_at"] = begin + draw.uniform(0, think)
    latencies: list[float] = []
    failures = 0
    started = time.monotonic()
    deadline = started + timeout
    while time.monotonic() < deadline:
        now = time.monotonic()
        for agent in active:
            slot = state[agent.pk]
            if slot["run"] is None and slot["sent"] < messages and now >= slot["next_at"]:
                run = runtime.run_start(
                    actor=member_actor(agent.member),
                    agent=agent,
                    text=QUESTIONS[slot["sent"] % len(QUESTIONS)],
                    session=slot["session"],
                )
                slot.update(
                    run=run.pk, accepted=timezone.now(), session=run.session, sent=slot["sent"] + 1
                )
        inflight = {slot["run"]: pk for pk, slot in state.items() if slot["run"]}
        if not inflight and all(s["sent"] >= messages for s in state.values()):
            break
        done = Run.objects.filter(pk__in=list(inflight), status__in=Run.TERMINAL).values_list(
            "pk", "status", "finished_at"
        )
        for run_id, status, finished_at in done:
            slot = state[inflight[run_id]]
            if status == Run.Status.COMPLETED:
                latencies.append((finished_at - slot["accepted"]).total_seconds() * 1000)
            else:
                failures += 1
            slot.update(run=None, next_at=time.monotonic() + draw.uniform(0.5, 1.5) * think)
        time.sleep(0.02)  # the harness polls too: keep its own CPU out of the figures
    elapsed = time.monotonic() - started
    return {
        "latencies": latencies,
        "failures": failures,
        "elapsed": elapsed,
        "unfinished": sum(1 for s in state.values() if s["run"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, nargs="+", default=[1, 10, 50])
    parser.add_argument("--messages", type=int, default=10, help="messages per session")
    parser.add_argument("--workers", type=int, default=4, help="Celery worker processes")
    parser.add_argument(
        "--think",
        type=float,
        default=1.0,
        help="seconds a session waits after a reply before its next message",
    )
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument(
        "--no-memory", action="store_true", help="disable the memory retrieval hook"
    )
    args = parser.parse_args()

    env = prepare_environment()
    fleets = create_agents(max(args.sessions), memory=not args.no_memory)
    worker = start_workers(env, args.workers)
    try:
        # Warm every worker process (imports, embedding model, connections) before measuring.
        for agents in fleets.values():
            warm = drive(agents, min(len(agents), args.workers * 2), 2, 0.0, 180)
            if warm["failures"] or warm["unfinished"]:
                raise SystemExit(f"warm-up failed: {warm}")
        print(
            f"agent_overhead: {args.workers} Celery worker processes (prefork, one pool on "
            f"{','.join(worker_queues())}, {os.cpu_count()} CPUs), offline provider, "
            f"memory retrieval {'off' if args.no_memory else 'on'}, think time {args.think:.1f} s, "
            f"{args.messages} messages per session"
        )
        print("path=full: every built-in hook; path=bare: the same runtime, hooks off (baseline)")
        for sessions in args.sessions:
            for path in ("full", "bare"):
                before = cpu_snapshot(worker.pid)
                result = drive(fleets[path], sessions, args.messages, args.think, args.timeout)
                after = cpu_snapshot(worker.pid)
                result["cpu"] = cpu_used(before, after)
                report(path, sessions, result)
    finally:
        stop_workers(worker)


def report(path: str, sessions: int, result: dict) -> None:
    values = result["latencies"]
    if not values:
        print(f"sessions={sessions}: no completed runs ({result})")
        return
    print(
        f"path={path} sessions={sessions:>3} runs={len(values):>4} "
        f"p50_ms={statistics.median(values):.0f} "
        f"p95_ms={percentile(values, 0.95):.0f} max_ms={max(values):.0f} "
        f"throughput={len(values) / result['elapsed']:.1f}/s "
        f"failed={result['failures']} unfinished={result['unfinished']}"
    )
    if "cpu" in result:  # CPU per completed run while measuring (after-run work may lag)
        cpu = {name: seconds / len(values) * 1000 for name, seconds in result["cpu"].items()}
        print(
            f"    cpu_ms_per_run workers={cpu['workers']:.1f} database={cpu['database']:.1f} "
            f"harness={cpu['harness']:.1f} total={sum(cpu.values()):.1f}"
        )


if __name__ == "__main__":
    main()
