"""Cluster mode: secrets never generated per machine, and one beat even when two are started.

The beat tests start real `celery -A cadre beat` processes (settings: tests.runtime.beat_settings,
one probe every second to a queue no worker reads) against the test's own Redis database, and
tell which process sent each probe by the message's `origin` header (gen<pid>@host).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import redis
from celery.schedules import maybe_schedule
from cryptography.fernet import Fernet
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.conf import settings
from kombu import Exchange, Queue
from redbeat.decoder import RedBeatJSONDecoder
from redbeat.schedulers import RedBeatScheduler, RedBeatSchedulerEntry

from cadre.celery import app
from cadre.runtime.beat import beat_status, default_max_age
from cadre.runtime.doctor import FAIL, OK, WARN, check_cluster, check_generated_secrets
from tests.runtime import beat_settings
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
QUEUE = beat_settings.BEAT_PROBE_QUEUE
PREFIX = beat_settings.CELERY_REDBEAT_KEY_PREFIX
LOCK_TIMEOUT = beat_settings.CELERY_REDBEAT_LOCK_TIMEOUT
SECRET_FILES = ("secret_key", "encryption_key", "signing_ed25519.pem")


def _child_env(**extra: str) -> dict[str, str]:
    env = {key: val for key, val in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"}
    env.update(
        {
            "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "platform")]),
            # the test's own database and Redis database: nothing embedded is started
            "DATABASE_URL": settings.DATABASE_URL,
            "REDIS_URL": settings.REDIS_URL,
            **extra,
        }
    )
    return env


@pytest.fixture
def redis_client():
    client = redis.Redis.from_url(settings.REDIS_URL, decode_responses=True)

    def clean():
        for key in client.scan_iter(match=f"{PREFIX}*"):
            client.delete(key)
        client.delete(QUEUE)

    clean()
    # On Redis a message routed to a queue nobody declared is dropped: declare the probes'.
    with app.connection_for_write() as connection:
        Queue(QUEUE, Exchange(QUEUE, "direct"), routing_key=QUEUE)(
            connection.default_channel
        ).declare()
    yield client
    clean()
    client.close()


class Beats:
    """`celery -A cadre beat` processes with beat_settings; all killed at the end."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.processes: list[subprocess.Popen] = []

    def start(self, **env: str) -> subprocess.Popen:
        log = self.folder / f"beat-{len(self.processes)}.log"
        with open(log, "wb") as handle:
            process = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "cadre", "beat", "--loglevel", "INFO"],
                cwd=ROOT,
                env=_child_env(
                    DJANGO_SETTINGS_MODULE="tests.runtime.beat_settings", LOG_LEVEL="INFO", **env
                ),
                stdout=handle,
                stderr=subprocess.STDOUT,
            )
        process.log = log
        self.processes.append(process)
        return process

    def started(self, process: subprocess.Popen) -> bool:
        """The process reached beat_init, where it takes the lock or waits for it."""
        assert process.poll() is None, process.log.read_text(errors="replace")
        return "beat: Starting..." in process.log.read_text(errors="replace")

    def stop_all(self):
        for process in self.processes:
            if process.poll() is None:
                process.kill()
            process.wait(timeout=30)


@pytest.fixture
def beats(tmp_path):
    group = Beats(tmp_path)
    yield group
    group.stop_all()


def senders(client) -> Counter:
    """How many probes each beat process (by pid) has sent."""
    counts: Counter = Counter()
    for raw in client.lrange(QUEUE, 0, -1):
        origin = json.loads(raw)["headers"]["origin"]  # gen<pid>@<host>
        counts[int(origin.split("@")[0].removeprefix("gen"))] += 1
    return counts


def beat_health(**env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", "beat_health"],
        cwd=ROOT,
        env=_child_env(DJANGO_SETTINGS_MODULE="tests.runtime.beat_settings", **env),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_second_beat_waits_and_takes_over_when_the_first_is_killed(beats, redis_client):
    first = beats.start()
    wait_until(lambda: senders(redis_client)[first.pid] >= 2, 90, "the first beat sends")
    assert redis_client.exists(f"{PREFIX}:lock")

    second = beats.start()
    wait_until(lambda: beats.started(second), 90, "the second beat starts")
    # The second beat tries for the lock every second (CELERY_BEAT_MAX_LOOP_INTERVAL) while
    # the first sends five more probes: it never sends one.
    sent = senders(redis_client)[first.pid]
    wait_until(lambda: senders(redis_client)[first.pid] >= sent + 5, 30, "five more probes")
    counts = senders(redis_client)
    assert counts[second.pid] == 0
    assert set(counts) == {first.pid}
    assert beat_health().returncode == 0

    first.send_signal(signal.SIGKILL)  # no chance to release the lock
    first.wait(timeout=30)
    killed_at = time.monotonic()
    # The lock lapses LOCK_TIMEOUT seconds after the last renewal; the second beat tries again
    # every second, then sends what is due.
    wait_until(
        lambda: senders(redis_client)[second.pid] >= 1, LOCK_TIMEOUT + 20, "the second sends"
    )
    takeover = time.monotonic() - killed_at
    assert takeover >= 1  # it waited for the killed holder's lock to lapse
    print(f"takeover after SIGKILL: {takeover:.1f} s (lock timeout {LOCK_TIMEOUT} s)")
    wait_until(lambda: senders(redis_client)[second.pid] >= 3, 30, "the second keeps sending")


def test_a_restart_takes_a_changed_interval_and_beat_health_follows_the_lock(beats, redis_client):
    key = f"{PREFIX}beat-probe"
    first = beats.start(CADRE_TEST_BEAT_INTERVAL="1")
    wait_until(lambda: senders(redis_client)[first.pid] >= 1, 90, "the beat sends")
    health = beat_health()
    assert health.returncode == 0, health.stderr
    assert "lock held: yes" in health.stdout

    first.send_signal(signal.SIGTERM)  # a clean stop releases the lock at once
    first.wait(timeout=30)
    assert not redis_client.exists(f"{PREFIX}:lock")
    health = beat_health()
    assert health.returncode == 1
    assert "lock held: no" in health.stderr

    second = beats.start(CADRE_TEST_BEAT_INTERVAL="600")

    def interval() -> float:
        definition = json.loads(redis_client.hget(key, "definition"), cls=RedBeatJSONDecoder)
        return definition["schedule"].run_every.total_seconds()

    wait_until(lambda: beats.started(second) and interval() == 600, 90, "the new interval")
    entry = RedBeatSchedulerEntry.from_key(key, app=app)
    # next due: the last run (kept across the restart) plus the new interval
    due, remaining = entry.is_due()
    assert not due
    last_run = entry.last_run_at.timestamp()
    assert remaining == pytest.approx(last_run + 600 - time.time(), abs=2)
    sent = sum(senders(redis_client).values())
    wait_until(lambda: beat_health().returncode == 0, 60, "the new beat holds the lock")
    assert sum(senders(redis_client).values()) == sent  # nothing due for ten minutes


def test_every_entry_of_the_settings_schedule_is_in_redis_and_none_is_due_at_once():
    client = redis.Redis.from_url(settings.REDIS_URL, decode_responses=True)
    prefix = settings.CELERY_REDBEAT_KEY_PREFIX
    try:
        RedBeatScheduler(app=app)  # not lazy: writes the static schedule, as beat's start does
        stored = {
            key.removeprefix(prefix)
            for key in client.zrange(f"{prefix}:schedule", 0, -1)
            if key.startswith(prefix)
        }
        assert set(settings.CELERY_BEAT_SCHEDULE) <= stored
        now = time.time()
        for name, expected in settings.CELERY_BEAT_SCHEDULE.items():
            entry = RedBeatSchedulerEntry.from_key(prefix + name, app=app)
            assert entry.task == expected["task"]
            assert entry.schedule == maybe_schedule(expected["schedule"]), name
            assert entry.score > now - 1, name  # first run one period after the first start
    finally:
        for key in client.scan_iter(match=f"{prefix}*"):
            client.delete(key)
        client.close()


def _settings_process(data_dir: Path, **env: str) -> subprocess.CompletedProcess:
    child = {
        key: val
        for key, val in os.environ.items()
        if not key.startswith(("SECRET_KEY", "CADRE_ENCRYPTION_KEY", "CADRE_SIGNING_KEY"))
    }
    child.update(
        {
            "DJANGO_SETTINGS_MODULE": "cadre.settings",
            "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "platform")]),
            "CADRE_DATA_DIR": str(data_dir),
            # valid but unused service URLs: settings never connect at import
            "DATABASE_URL": "postgresql://cadre@127.0.0.1:9/cadre",
            "REDIS_URL": "redis://127.0.0.1:9/0",
            **env,
        }
    )
    return subprocess.run(
        [sys.executable, "-c", "import django; django.setup(); print('settings ok')"],
        cwd=ROOT,
        env=child,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _signing_pem() -> str:
    return (
        Ed25519PrivateKey.generate()
        .private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        .decode()
    )


def test_cluster_mode_refuses_to_generate_secrets_naming_each(data_dir):
    result = _settings_process(data_dir, CADRE_CLUSTER="1")
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    for name in ("SECRET_KEY", "CADRE_ENCRYPTION_KEY", "CADRE_SIGNING_KEY"):
        assert f"  {name}: make one with " in result.stderr
    assert not [name for name in SECRET_FILES if (data_dir / name).exists()]

    # one missing: only that one is named
    result = _settings_process(
        data_dir,
        CADRE_CLUSTER="1",
        SECRET_KEY="s" * 50,
        CADRE_ENCRYPTION_KEY=Fernet.generate_key().decode(),
    )
    assert result.returncode != 0
    assert "  CADRE_SIGNING_KEY: make one with " in result.stderr
    assert "  SECRET_KEY:" not in result.stderr
    assert not [name for name in SECRET_FILES if (data_dir / name).exists()]


def test_cluster_mode_starts_with_the_secrets_set_and_writes_none(data_dir, tmp_path):
    pem = tmp_path / "signing.pem"
    pem.write_text(_signing_pem())
    result = _settings_process(
        data_dir,
        CADRE_CLUSTER="1",
        SECRET_KEY="s" * 50,
        CADRE_ENCRYPTION_KEY=Fernet.generate_key().decode(),
        CADRE_SIGNING_KEY_FILE=str(pem),
    )
    assert result.returncode == 0, result.stderr
    assert "settings ok" in result.stdout
    assert not [name for name in SECRET_FILES if (data_dir / name).exists()]

    # one machine (cluster mode off) still generates its own
    result = _settings_process(data_dir)
    assert result.returncode == 0, result.stderr
    assert (data_dir / "secret_key").exists() and (data_dir / "encryption_key").exists()


def test_doctor_reports_cluster_mode_and_fails_on_a_machine_generated_secret(settings, monkeypatch):
    monkeypatch.delenv("CADRE_SIGNING_KEY", raising=False)
    monkeypatch.delenv("CADRE_SIGNING_KEY_FILE", raising=False)
    settings.CLUSTER = False
    settings.SECRET_KEY_GENERATED = True
    [cluster] = check_cluster()
    assert (cluster.status, cluster.name) == (OK, "cluster")
    assert cluster.detail.startswith("off")
    assert [(c.status, c.name) for c in check_generated_secrets() if c.name == "secret key"] == [
        (WARN, "secret key")
    ]

    settings.CLUSTER = True
    settings.CADRE_ENCRYPTION_KEY_GENERATED = False
    settings.DATABASE_EMBEDDED = False
    settings.REDIS_EMBEDDED = True
    checks = check_cluster()
    assert (checks[0].status, checks[0].name) == (OK, "cluster")
    assert checks[0].detail.startswith("on")
    assert [(c.status, c.name) for c in checks[1:]] == [(FAIL, "cluster services")]
    assert "REDIS_URL" in checks[1].detail and "DATABASE_URL" not in checks[1].detail

    failures = check_generated_secrets()
    named = {c.detail.split(" ")[0] for c in failures if c.status == FAIL}
    assert named == {"SECRET_KEY", "CADRE_SIGNING_KEY"}  # the encryption key came from env

    monkeypatch.setenv("CADRE_SIGNING_KEY", _signing_pem())
    settings.SECRET_KEY_GENERATED = False
    settings.CADRE_ENCRYPTION_KEY_GENERATED = False
    settings.REDIS_EMBEDDED = False
    assert not [c for c in check_generated_secrets() if c.status == FAIL]
    assert [c.status for c in check_cluster()] == [OK]


def test_beat_status_reports_a_stale_lock_and_a_late_entry_as_unhealthy():
    client = redis.Redis.from_url(settings.REDIS_URL, decode_responses=True)
    prefix = settings.CELERY_REDBEAT_KEY_PREFIX
    timeout_ms = settings.CELERY_REDBEAT_LOCK_TIMEOUT * 1000
    max_age = default_max_age()
    try:
        assert not beat_status().held
        assert not beat_status().healthy(max_age)

        client.set(f"{prefix}:lock", "a-token", px=timeout_ms)  # just renewed
        entry = RedBeatSchedulerEntry("probe", "tests.beat_probe", timedelta(seconds=10), app=app)
        entry.last_run_at = datetime.now(UTC) - timedelta(seconds=5)
        entry.save()
        status = beat_status()
        assert status.held and status.tick_age < 2 and status.late == 0
        assert status.healthy(max_age)

        # renewed long ago: the holder stopped ticking
        client.pexpire(f"{prefix}:lock", timeout_ms - int(max_age * 1000) - 5000)
        assert not beat_status().healthy(max_age)

        # ticking, but an entry waits two minutes past its time
        client.pexpire(f"{prefix}:lock", timeout_ms)
        entry.reschedule(last_run_at=datetime.now(UTC) - timedelta(seconds=130))
        status = beat_status()
        assert status.late == pytest.approx(120, abs=5)
        assert not status.healthy(max_age)
    finally:
        for key in client.scan_iter(match=f"{prefix}*"):
            client.delete(key)
        client.close()


def test_cluster_mode_never_generates_a_signing_key(settings, monkeypatch, tmp_path):
    from django.core.exceptions import ImproperlyConfigured

    from cadre import signing

    monkeypatch.delenv("CADRE_SIGNING_KEY", raising=False)
    monkeypatch.delenv("CADRE_SIGNING_KEY_FILE", raising=False)
    monkeypatch.setattr(signing, "_cached", None)
    settings.DATA_DIR = tmp_path
    settings.CLUSTER = True
    with pytest.raises(ImproperlyConfigured, match="CADRE_SIGNING_KEY"):
        signing.private_key()
    assert not (tmp_path / signing.KEY_FILE_NAME).exists()

    settings.CLUSTER = False  # one machine: generated once, then reused
    assert signing.sign(b"x")
    assert (tmp_path / signing.KEY_FILE_NAME).exists()
