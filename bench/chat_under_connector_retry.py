"""Chat reply latency, quiet and with a connector retrying an unreachable platform, side by side.

The workers are the ones `cadre up` starts (cadre.runtime.cli.worker_pools: a pool for agent
runs, a pool for every other queue). Quiet: one member chats with their agent, --runs
messages one after another (offline provider; latency = from `run_start` returned to the
run's `finished_at`, as in agent_overhead.py). Then a Feishu connector whose platform black-holes
every request (a loopback port that accepts connections and never answers, so each send
hangs until the transport's timeout and is retried by Celery with backoff) is given --sends
agent messages to deliver, and the same chat is measured again while they hang and retry.

--layout shared runs the same with the pre-split layout instead: one pool of as many
processes consuming every queue (what `celery -A cadre worker` without -Q does), for contrast.

    .venv/bin/python bench/chat_under_connector_retry.py              # 60 runs each
    .venv/bin/python bench/chat_under_connector_retry.py --layout shared --runs 20
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "bench"), str(ROOT), str(ROOT / "platform")]

import agent_overhead  # noqa: E402 - the same harness
from agent_overhead import create_agents, drive, percentile, prepare_environment  # noqa: E402

# A database and Redis database of its own (agent_overhead.py's may be in use).
agent_overhead.BENCH_DB = "cadre_chat_retry_bench"
agent_overhead.REDIS_DB = int(os.environ.get("BENCH_REDIS_DB", "13"))


class UnreachablePlatform:
    """Accepts TCP connections on loopback and never answers."""

    def __init__(self):
        self.listener = socket.create_server(("127.0.0.1", 0), backlog=256)
        self.held: list[socket.socket] = []
        self.stopped = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}"

    def _accept(self) -> None:
        self.listener.settimeout(0.2)
        while not self.stopped.is_set():
            try:
                connection, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.held.append(connection)

    def close(self) -> None:
        self.stopped.set()
        for connection in self.held:
            connection.close()
        self.listener.close()


def start_workers(env: dict, layout: str) -> list[subprocess.Popen]:
    from django.conf import settings

    from cadre.runtime.cli import NICENESS, worker_command, worker_pools

    pools = worker_pools(settings)
    if layout == "shared":
        queues = [queue for _name, names, _n in pools for queue in names]
        pools = [("worker", queues, sum(n for _name, _queues, n in pools))]
    children = []
    for name, queues, processes in pools:
        command = worker_command(queues, processes, f"bench-{name}-{os.getpid()}")
        command[command.index("INFO")] = "WARNING"
        niceness = NICENESS.get(name, 0)
        children.append(
            subprocess.Popen(  # noqa: S603 - our interpreter, fixed arguments
                command,
                cwd=ROOT,
                env=env,
                process_group=0,
                preexec_fn=lambda n=niceness: os.nice(n),
            )
        )
    return children


def stop_workers(children: list[subprocess.Popen]) -> None:
    for child in children:  # warm shutdown: the main process lets running tasks finish
        if child.poll() is None:
            os.kill(child.pid, signal.SIGTERM)
    for child in children:
        try:
            child.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)


def retrying_connector(owner_agent, sends: int, url: str) -> list[int]:
    """A Feishu connector on the black hole, and `sends` messages for it to deliver."""
    from cadre.agents.models import AgentMessage
    from cadre.tenancy.actors import member_actor
    from cadre.tenancy.models import IMIdentity, Member
    from connectors.base import services
    from connectors.tasks import agent_message_deliver

    organization = owner_agent.organization
    owner = Member.objects.get(organization=organization, roles=["owner"])
    services.connector_create(
        actor=member_actor(owner),
        platform="feishu",
        name="Feishu (unreachable)",
        credentials={"app_id": "cli_bench", "app_secret": "bench-secret"},
        settings={"api_base_url": url},
    )
    IMIdentity.objects.create(
        organization=organization, member=owner, platform="feishu", platform_user_id="ou_owner"
    )
    ids = []
    for index in range(sends):
        message = AgentMessage.objects.create(
            organization_id=organization.pk,
            agent=owner_agent,
            recipients=[{"member": owner.pk}],
            text=f"Report {index} is ready.",
            channel="console",
            idempotency_key=f"bench-retry-{index}",
        )
        agent_message_deliver.delay(message.pk)
        ids.append(message.pk)
    return ids


def line(label: str, result: dict) -> str:
    values = result["latencies"]
    if not values:
        return f"{label:<22} no completed runs ({result['unfinished']} unfinished)"
    return (
        f"{label:<22} runs={len(values):>3} p50_ms={statistics.median(values):>6.0f} "
        f"p95_ms={percentile(values, 0.95):>6.0f} max_ms={max(values):>6.0f} "
        f"failed={result['failures']} unfinished={result['unfinished']}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=60, help="chat messages per measurement")
    parser.add_argument("--sends", type=int, default=8, help="agent messages to the platform")
    parser.add_argument("--think", type=float, default=0.2, help="seconds between messages")
    parser.add_argument("--layout", choices=["split", "shared"], default="split")
    parser.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args()

    env = prepare_environment()
    agents = create_agents(1, memory=True)["full"]
    workers = start_workers(env, args.layout)
    platform = UnreachablePlatform()
    try:
        warm = drive(agents, 1, 4, 0.0, 180)
        if warm["failures"] or warm["unfinished"]:
            raise SystemExit(f"warm-up failed: {warm}")
        quiet = drive(agents, 1, args.runs, args.think, args.timeout)
        messages = retrying_connector(agents[0], args.sends, platform.url)
        deadline = time.monotonic() + 60
        while not platform.held and time.monotonic() < deadline:
            time.sleep(0.1)
        held_before = len(platform.held)
        busy = drive(agents, 1, args.runs, args.think, args.timeout)
        from cadre.agents.models import AgentMessage
        from connectors.models import Delivery

        still_queued = AgentMessage.objects.filter(
            pk__in=messages, status=AgentMessage.Status.QUEUED
        ).count()
        attempts = len(platform.held)
        pools = " + ".join(
            f"{w.args[w.args.index('--concurrency') + 1]} x {w.args[w.args.index('-Q') + 1]}"
            for w in workers
        )
        print(
            f"chat_under_connector_retry: layout={args.layout} ({pools}), "
            f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end, "
            f"offline provider, memory retrieval on, think {args.think:.1f} s"
        )
        print(line("quiet", quiet))
        print(line("connector retrying", busy))
        ratio = percentile(busy["latencies"], 0.95) / max(
            1e-9, percentile(quiet["latencies"], 0.95)
        )
        print(
            f"p95 ratio {ratio:.2f}x; the platform held {held_before} connection(s) when the "
            f"second measurement began and {attempts} by its end; {still_queued} of "
            f"{len(messages)} messages still queued (retrying), deliveries recorded: "
            f"{Delivery.objects.count()}"
        )
    finally:
        platform.close()
        stop_workers(workers)


if __name__ == "__main__":
    main()
