"""Two `cadre streams` replicas on one database and one Redis, with a Feishu connector in
long-connection mode against a loopback endpoint: exactly one real `connectors_stream` child
holds the connection while the other replica keeps a standby (`--standby`, prepared, not
connected); SIGKILL of the holder's process group (a node gone) hands the connection to that
standby within the lease's time to live and a few seconds; SIGTERM stops the last one, its
child with it, and gives the lease back."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import psutil
import pytest
import redis
from django.conf import settings
from django.db import connection

from cadre.runtime.cli import REPO_ROOT
from cadre.runtime.streams import LEASE_RETRY_SECONDS, lease_holder
from connectors.feishu.tests.fake_api import APP_ID, APP_SECRET
from connectors.tests.fakes import FakePlatformServer
from connectors.tests.helpers import make_connector

pytestmark = pytest.mark.e2e
pytest.importorskip("lark_oapi")

from connectors.tests.fake_longconn import FakeLongConnection  # noqa: E402

LEASE_SECONDS = 3  # the shortest CADRE_STREAM_LEASE_SECONDS allows: a fast takeover
# From the SIGKILL to the standby's handshake: the lease's expiry, one acquisition attempt, and
# the standby's connection (measured: ~5 s on a loaded 2-core machine; a cold start took 14).
RECONNECT_BOUND = LEASE_SECONDS + LEASE_RETRY_SECONDS + 5


def wait_until(condition, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


def the_test_database_url() -> str:
    db = connection.settings_dict
    url = f"postgresql://{quote(db['USER'])}:{quote(db['PASSWORD'] or '')}@/{db['NAME']}"
    url += f"?host={quote(db['HOST'] or '127.0.0.1', safe='/')}"
    return url + (f"&port={db['PORT']}" if db["PORT"] else "")


class Replica:
    """One `cadre streams` process (its own process group) with its output in a file."""

    def __init__(self, name: str, log: Path):
        self.name, self.log = name, log
        env = {
            **os.environ,
            "DATABASE_URL": the_test_database_url(),
            "REDIS_URL": settings.REDIS_URL,
            "CADRE_DATA_DIR": str(settings.DATA_DIR),
            "CADRE_STREAM_LEASE_SECONDS": str(LEASE_SECONDS),
            "PYTHONUNBUFFERED": "1",
            "LOG_LEVEL": "INFO",
        }
        with log.open("wb") as output:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "cadre.runtime.cli", "streams", "--stop-timeout", "5"],
                cwd=REPO_ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                process_group=0,
            )
        self.pid = self.process.pid

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stream_children(self) -> list[psutil.Process]:
        """Its live `connectors_stream` processes."""
        try:
            children = psutil.Process(self.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []
        found = []
        for child in children:
            try:
                if "connectors_stream" in child.cmdline() and child.status() != "zombie":
                    found.append(child)
            except psutil.Error:
                continue
        return found


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_cadre_streams_refuses_to_run_on_embedded_services(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env["CADRE_DATA_DIR"] = str(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "cadre.runtime.cli", "streams"],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2
    assert "set DATABASE_URL and REDIS_URL" in done.stdout
    assert list(tmp_path.iterdir()) == []  # no embedded server was started


def test_two_stream_replicas_hold_one_connection_and_take_over_when_the_holder_dies(
    transactional_db, alice, tmp_path, record_property
):
    api = FakePlatformServer().start()
    endpoint = FakeLongConnection(api, app_id=APP_ID, app_secret=APP_SECRET).start()
    client = redis.Redis.from_url(settings.REDIS_URL)
    connector = make_connector(
        alice,
        "feishu",
        {"app_id": APP_ID, "app_secret": APP_SECRET},
        {"mode": "long_connection", "api_base_url": api.url},
        "Lark",
    )
    public_id = connector.public_id
    replicas = [Replica(name, tmp_path / f"{name}.log") for name in ("one", "two")]
    everything: set[int] = set()

    def outputs() -> str:
        return "\n".join(f"--- {r.name}\n{r.output()}" for r in replicas)

    try:
        assert wait_until(lambda: endpoint.live == 1, timeout=180), outputs()
        # Both replicas are up and looking (each says so before its first look).
        assert wait_until(
            lambda: all("holding stream connections as" in r.output() for r in replicas), 60
        ), outputs()
        time.sleep(LEASE_SECONDS + LEASE_RETRY_SECONDS)  # the other had its chances to take it

        children = {r.name: r.stream_children() for r in replicas}
        everything.update(p.pid for found in children.values() for p in found)
        assert sorted(len(found) for found in children.values()) == [1, 1], outputs()
        assert endpoint.live == 1 and endpoint.most_live == 1 and endpoint.handshakes == 1
        holder_pid = int(lease_holder(client, public_id).split(":")[1])
        [holder] = [r for r in replicas if r.pid == holder_pid]
        [other] = [r for r in replicas if r is not holder]
        [holder_child] = children[holder.name]
        [standby] = children[other.name]
        assert "--standby" not in holder_child.cmdline()
        assert "--standby" in standby.cmdline()

        os.killpg(holder.pid, signal.SIGKILL)  # the node is gone: no clean stop, no release
        killed_at = time.monotonic()
        holder.process.wait(10)

        # Its child dies with it (it gets SIGTERM when its supervisor dies).
        assert wait_until(lambda: not alive(holder_child.pid), timeout=10), outputs()

        # The other replica takes the lease over within its time to live (+ one retry).
        def other_holds() -> bool:
            holder_id = lease_holder(client, public_id)
            return holder_id is not None and holder_id.split(":")[1] == str(other.pid)

        assert wait_until(other_holds, timeout=LEASE_SECONDS + LEASE_RETRY_SECONDS + 5), outputs()
        took_over = time.monotonic() - killed_at
        record_property("takeover_seconds", round(took_over, 2))
        print(f"lease taken over by the other replica {took_over:.1f} s after the SIGKILL")
        assert took_over < LEASE_SECONDS + LEASE_RETRY_SECONDS + 5
        [new_child] = other.stream_children()
        assert new_child.pid == standby.pid  # the standby connects: no process started
        assert wait_until(lambda: endpoint.handshakes >= 2 and endpoint.live == 1, 120), outputs()
        reconnected = time.monotonic() - killed_at
        record_property("reconnect_seconds", round(reconnected, 2))
        print(f"connected again {reconnected:.1f} s after the SIGKILL")
        assert reconnected < RECONNECT_BOUND, outputs()
        assert endpoint.most_live == 1  # never two connections at once

        other.process.send_signal(signal.SIGTERM)
        assert other.process.wait(30) == 0, outputs()
        assert not alive(new_child.pid)
        assert lease_holder(client, public_id) is None  # given back: a takeover at once
        assert wait_until(lambda: endpoint.live == 0, timeout=10)
        assert "cadre: stopped." in other.output()
    finally:
        for replica in replicas:
            if replica.process.poll() is None:
                os.killpg(replica.pid, signal.SIGKILL)
                replica.process.wait(10)
        for pid in everything:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        client.delete(f"cadre:streams:lease:{public_id}")
        client.close()
        endpoint.stop()
        api.stop()
