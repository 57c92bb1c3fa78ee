"""Stream workers (`cadre up`, `cadre streams`): one child per stream-mode connector whose lease
is held, restarted with a growing delay when it dies, stopped (with its whole process group) on
shutdown or when the connector goes away or changes; `cadre doctor` flags a stream-mode
connector whose SDK is missing. The leases themselves: tests/runtime/test_stream_leases.py."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass

import psutil
import pytest
import redis
from django.conf import settings

from cadre.runtime import cli
from cadre.runtime.processes import Child, stop_children
from cadre.runtime.streams import STABLE_AFTER, StreamLeases, StreamSupervisor, restart_delay

CRASH = [sys.executable, "-c", "import sys; sys.exit(3)"]
# A worker that starts a process of its own (as SDK clients may) and then waits.
WITH_GRANDCHILD = [
    sys.executable,
    "-c",
    "import subprocess, sys, time; "
    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); "
    "print('ready', flush=True); time.sleep(600)",
]


@dataclass(frozen=True)
class Worker:
    public_id: str
    name: str
    fingerprint: str = "v1"
    problem: str = ""
    fix: str = ""


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Harness:
    def __init__(self, command):
        self.clock = Clock()
        self.said: list[str] = []
        self.listed: list[Worker] = []
        self.spawned: list[Child] = []
        self.command = command
        # Real leases in the test Redis, long-lived: the fake clock moves faster than Redis's.
        self.supervisor = StreamSupervisor(
            workers=lambda: list(self.listed),
            command=lambda public_id: self.command,
            spawn=self.spawn,
            leases=StreamLeases(redis.Redis.from_url(settings.REDIS_URL), ttl=600),
            stop_timeout=10,
            clock=self.clock,
            say=self.said.append,
        )

    def spawn(self, name: str, command: list[str]) -> Child:
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, process_group=0
        )
        self.spawned.append(Child(name, process))
        return self.spawned[-1]

    def at(self, seconds: float) -> bool:
        self.clock.now = seconds
        return self.supervisor.tick()

    def cleanup(self) -> None:
        self.supervisor.close()  # gives the leases back
        stop_children([c for c in self.spawned if c.process.poll() is None], timeout=10)


@pytest.fixture
def harness():
    made: list[Harness] = []

    def make(command) -> Harness:
        made.append(Harness(command))
        return made[-1]

    yield make
    for item in made:
        item.cleanup()


def test_restart_delay_doubles_up_to_a_minute():
    assert [restart_delay(n) for n in (1, 2, 3, 4, 7, 8, 20)] == [1, 2, 4, 8, 60, 60, 60]


def test_dead_stream_worker_is_restarted_after_a_growing_delay(harness):
    run = harness(CRASH)
    run.listed = [Worker("pub-1", "Feishu")]

    assert run.supervisor.refresh() is True
    assert len(run.spawned) == 1 and run.spawned[0].name == "stream Feishu"
    run.spawned[0].process.wait(60)

    assert run.at(1) is True  # noticed: restart in 1 s
    assert len(run.spawned) == 1
    run.at(2)
    assert len(run.spawned) == 2
    run.spawned[1].process.wait(60)
    run.at(3)  # second death in a row: 2 s
    run.at(4.9)
    assert len(run.spawned) == 2
    run.at(5)
    assert len(run.spawned) == 3
    assert [line for line in run.said if "exited" in line] == [
        "cadre: stream Feishu exited with code 3; restarting in 1 s",
        "cadre: stream Feishu exited with code 3; restarting in 2 s",
    ]
    assert run.said.count("cadre: starting stream Feishu") == 3


def test_worker_that_ran_long_before_dying_restarts_at_the_first_delay(harness):
    run = harness(CRASH)
    run.listed = [Worker("pub-1", "Feishu")]
    run.supervisor.refresh()
    run.supervisor.slots["pub-1"].failures = 6  # it had been failing before
    run.spawned[0].process.wait(60)

    run.at(STABLE_AFTER + 10)

    assert run.said[-1].endswith("restarting in 1 s")


def test_stopping_stream_workers_leaves_no_process_behind(harness):
    run = harness(WITH_GRANDCHILD)
    run.listed = [Worker("pub-1", "Feishu"), Worker("pub-2", "DingTalk")]
    run.supervisor.refresh()
    pids = []
    for child in run.supervisor.children():
        assert child.process.stdout.readline().strip() == b"ready"
        pids.append(child.pid)
        pids.extend(p.pid for p in psutil.Process(child.pid).children(recursive=True))
    assert len(pids) == 4

    stop_children(run.supervisor.children(), timeout=10)

    def alive(pid: int) -> bool:
        try:
            return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    assert [pid for pid in pids if alive(pid)] == []


def test_connector_turned_off_or_changed_has_its_worker_stopped_or_restarted(harness):
    run = harness(WITH_GRANDCHILD)
    run.listed = [Worker("pub-1", "Feishu"), Worker("pub-2", "DingTalk")]
    run.supervisor.refresh()
    first, second = run.spawned

    run.listed = [Worker("pub-1", "Feishu", fingerprint="v2")]  # rotated; DingTalk disabled
    assert run.supervisor.refresh() is True

    assert first.process.poll() is not None and second.process.poll() is not None
    assert [c.name for c in run.supervisor.children()] == ["stream Feishu"]
    assert run.supervisor.children()[0] is run.spawned[2]
    assert "cadre: stopping stream DingTalk: it is off" in run.said
    assert "cadre: stopping stream Feishu: its configuration changed" in run.said


def test_connector_whose_sdk_is_missing_is_reported_once_and_not_started(harness):
    run = harness(CRASH)
    run.listed = [
        Worker("pub-1", "Feishu", problem="needs lark_oapi", fix="pip install 'cadre[feishu]'")
    ]
    run.supervisor.refresh()
    run.supervisor.refresh()

    assert run.spawned == []
    assert run.said == ["cadre: connector Feishu: needs lark_oapi (pip install 'cadre[feishu]')"]


def test_stream_command_line_reaches_the_management_command(settings):
    import os

    command = cli._stream_command("abc")
    assert command[-2:] == ["connectors_stream", "abc"]
    shown = subprocess.run(  # the same line with Django's help instead of a connector id
        [*command[:-2], "help", "connectors_stream"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cli._working_dir(),
        # As `cadre up` gives its children: attach to the running database, start none.
        env={**os.environ, "DATABASE_URL": settings.DATABASE_URL},
    )
    assert shown.returncode == 0, shown.stderr
    assert "Hold a connector's long connection" in shown.stdout


@pytest.mark.django_db
def test_doctor_fails_a_stream_connector_whose_sdk_is_missing(alice, monkeypatch):
    from connectors.base.health import doctor_checks
    from connectors.feishu.inbound import FeishuPlatform
    from connectors.inbound.streams import stream_workers
    from connectors.tests.helpers import make_connector

    make_connector(
        alice, "feishu", {"app_id": "a", "app_secret": "s"}, {"mode": "long_connection"}, "Lark"
    )
    monkeypatch.setattr(FeishuPlatform, "extra_module", "lark_oapi_not_installed")

    [check] = [c for c in doctor_checks() if c.name == "connector Lark"]
    assert check.status == "FAIL"
    assert "pip install 'cadre[feishu]'" in check.fix
    [worker] = stream_workers()
    assert worker.problem and worker.fix == "pip install 'cadre[feishu]'"
