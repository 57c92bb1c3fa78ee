"""Every bench that starts Celery workers starts them on every queue its work is routed to.

Tasks go to a queue by kind of work (cadre.celery.route_task): a bench whose workers consume
only some queues waits forever for the rest (agent runs and inbound drains went to `runs`
while the benches still consumed only `celery`). Nothing is started here: each bench's worker
commands are built (its own function, or its start function with Popen recorded) and their
`-Q` compared with the queue of every task the product registers or schedules — a bench drives
the whole product, so any of them may be sent.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest
from django.conf import settings

from cadre.celery import app, task_queue, task_queues

BENCH = Path(__file__).resolve().parent.parent / "bench"


def _load(name: str):
    """A bench script as a module (bench/ is no package); sys.path as it was afterwards."""
    path = BENCH / f"{name}.py"
    saved = list(sys.path)
    spec = importlib.util.spec_from_file_location(f"bench_{name}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = saved
    return module


class _Recorded:
    """Stands in for subprocess.Popen: keeps the command, starts nothing."""

    commands: list[list[str]]

    def __init__(self, command, *args, **kwargs):
        type(self).commands.append(list(command))
        self.pid = 0


def _recorded(monkeypatch, module, start) -> list[list[str]]:
    recorder = type("Recorder", (_Recorded,), {"commands": []})
    monkeypatch.setattr(module.subprocess, "Popen", recorder)
    start()
    return recorder.commands


# How to read each bench's worker layout: a list of worker command lines.
LAYOUTS = {
    "agent_overhead": lambda module, _mp: module.worker_commands(4),
    "connectors_load": lambda module, _mp: [
        *module.worker_commands(2),
        *module.worker_commands(2, worker_nice=10),
    ],
    "chat_under_connector_retry": lambda module, mp: [
        command
        for layout in ("split", "shared")
        for command in _recorded(mp, module, lambda kind=layout: module.start_workers({}, kind))
    ],
    "audit_append": lambda module, mp: _recorded(
        mp, module, lambda: module.start_worker({}, "WARNING")
    ),
    # The shared worker command of the benches above (bench/environment.py).
    "environment": lambda module, _mp: [module.worker_command(1, "bench")],
}

_STARTS_WORKERS = re.compile(r'"celery"[\s\S]*?"worker"|worker_command\(')


def benches_starting_workers() -> list[str]:
    return sorted(
        path.stem
        for path in BENCH.glob("*.py")
        if _STARTS_WORKERS.search(path.read_text(encoding="utf-8"))
    )


def consumed(command: list[str]) -> set[str]:
    """The queues a `celery -A cadre worker` command line consumes: its -Q, else every queue
    of CELERY_TASK_QUEUES (what a worker without -Q takes)."""
    assert "worker" in command, command
    for flag in ("-Q", "--queues"):
        if flag in command:
            return set(command[command.index(flag) + 1].split(","))
    return {queue.name for queue in settings.CELERY_TASK_QUEUES}


def routed_queues() -> dict[str, str]:
    """{task name: the queue apply_async sends it to} for every task the product registers
    or beat schedules."""
    app.loader.import_default_modules()
    names = {name for name in app.tasks if not name.startswith("celery.")}
    names |= {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    return {name: app.amqp.router.route({}, name, (), {})["queue"].name for name in names}


def missing(commands: list[list[str]]) -> dict[str, list[str]]:
    """{queue without a consumer: the tasks routed to it}."""
    served = set().union(*(consumed(command) for command in commands)) if commands else set()
    left: dict[str, list[str]] = {}
    for name, queue in sorted(routed_queues().items()):
        if queue not in served:
            left.setdefault(queue, []).append(name)
    return left


def test_every_bench_that_starts_workers_has_a_readable_layout():
    found = benches_starting_workers()
    assert {"agent_overhead", "connectors_load"} <= set(found)
    assert sorted(LAYOUTS) == found, (
        "a bench under bench/ starts Celery workers: add how to read its worker commands to "
        "LAYOUTS so the queues they consume are checked"
    )


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_bench_workers_consume_every_queue_their_work_is_routed_to(name, monkeypatch):
    commands = LAYOUTS[name](_load(name), monkeypatch)
    assert commands, f"{name} starts no worker"
    assert missing(commands) == {}, f"{name}: queues with no consumer"


def test_the_product_lists_every_queue_it_routes_to():
    """task_queues() is what the benches consume: it must name every routed queue."""
    routes = routed_queues()
    assert set(routes.values()) <= set(task_queues())
    assert task_queues()[0] == settings.CELERY_TASK_DEFAULT_QUEUE
    assert len(task_queues()) == len(set(task_queues()))
    assert {name: task_queue(name) for name in routes} == routes


def test_a_layout_that_leaves_a_queue_without_consumer_fails():
    """The layout the benches had before the queue split: runs and drains went unserved."""
    before = [[sys.executable, "-m", "celery", "-A", "cadre", "worker", "-Q", "celery"]]
    left = missing(before)
    assert "cadre.agents.tasks.run_execute" in left[settings.CADRE_QUEUES["runs"]]
    assert "connectors.tasks.inbound_events_drain" in left[settings.CADRE_QUEUES["runs"]]
    assert settings.CELERY_TASK_DEFAULT_QUEUE not in left
