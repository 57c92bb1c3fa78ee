"""bench/sizing.py's short variant: every process kind started with its command line, loaded,
measured; each figure printed, and the bounds docs/operations.md states hold. The short variant
measures each figure once: runs at one model delay (0.5 s, so a run's slot can be checked
against it) on worker-runs at concurrency 1, acks at one rate on one web process and on two.

It runs the bench as a subprocess (its own database copied from a migrated template, its own
Redis database), so the first run on a machine also migrates that template (a minute or two);
later runs take under a minute.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "sizing.py"
TIMEOUT = 420  # seconds: a first run migrates the template database on two busy cores

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(TIMEOUT + 60)]


@pytest.fixture(scope="module")
def sizing(tmp_path_factory) -> tuple[str, dict]:
    """The short variant's output and figures (one run for every test of this module)."""
    figures = tmp_path_factory.mktemp("sizing") / "figures.json"
    # The bench's settings are its own, not this test run's (no CADRE_TESTING, no test
    # database name); the servers it may attach to are passed on.
    keep = ("PATH", "HOME", "LANG", "DATABASE_URL", "REDIS_URL", "CADRE_DATA_DIR")
    env = {key: os.environ[key] for key in keep if key in os.environ}
    result = subprocess.run(
        [sys.executable, str(BENCH), "--short", "--json", str(figures)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT, check=False,
    )  # fmt: skip
    output = result.stdout + result.stderr[-4000:]
    assert result.returncode == 0, output[-6000:]
    return result.stdout, json.loads(figures.read_text())


def _value(output: str, pattern: str) -> float:
    match = re.search(pattern, output)
    assert match, f"not printed: {pattern}\n{output}"
    return float(match.group(1))


def test_each_figure_is_printed(sizing):
    output, _ = sizing
    for processes in (1, 2):
        assert _value(output, rf"acks_per_s web_processes={processes} max_sustained=(\d+)") > 0
        assert _value(output, rf"web_processes={processes} .*cpu_ms_per_ack=([\d.]+)") > 0
    line = r"runs_per_s concurrency=1 model_delay_s=0.5 runs_per_s=([\d.]+)"
    assert _value(output, line) > 0
    assert "processes needed = peak runs/s x (model seconds + overhead seconds)" in output
    for process in ("web-1", "worker-runs", "worker", "beat", "streams"):
        assert _value(output, rf"memory process={process} rss_mb=(\d+)") > 0
        assert re.search(rf"connections process={process} most=\d+", output), process
    assert re.search(r"load average [\d.]+ before / [\d.]+ after", output)


def test_every_run_completes_and_holds_its_slot_at_least_the_model_time(sizing):
    _, figures = sizing
    rows = {(row["concurrency"], row["model_delay_s"]): row for row in figures["runs"]}
    assert set(rows) == {(1, 0.5)}
    for (concurrency, delay), row in rows.items():
        assert row["completed"] >= 1 and row["failed"] == row["refused"] == 0, row
        assert row["model_calls_per_run"] >= 1  # each run reached the loopback model
        assert row["slot_seconds_per_run"] >= delay
        assert row["runs_per_s_per_process"] == pytest.approx(row["runs_per_s"] / concurrency)
        assert row["cpu_ms_per_run"]["worker-runs"] > 0


def test_connections_stay_within_what_the_docs_say(sizing):
    """docs/operations.md: a web process at most DATABASE_POOL_SIZE, a runs-pool process up to
    6 (its own, its drain threads' and the claim keeper's), the other worker --concurrency,
    beat and streams 1."""
    _, figures = sizing
    seen = figures["connections"]
    pool_size = 10  # DATABASE_POOL_SIZE's default
    for name in ("runs-1", "acks"):
        phase = seen[name]
        for web in ("web-1", "web-2"):
            assert 1 <= phase.get(web, 0) <= pool_size, (name, web, phase)
        assert phase.get("worker", 0) <= 2, (name, phase)
        assert phase.get("beat", 0) <= 1, (name, phase)
        assert phase.get("streams", 0) <= 1, (name, phase)
    assert 1 <= seen["runs-1"].get("worker-runs", 0) <= 6  # one pool process
