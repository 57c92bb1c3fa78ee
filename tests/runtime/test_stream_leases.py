"""The per-connector stream leases in Redis (cadre.runtime.streams), on the test Redis: one
holder at a time, renewed only by its holder, released only by its holder; a supervisor runs a
connector's child only while it holds the lease, keeps it through a Redis outage shorter than
the lease and stops it at once when the lease is lost or runs out; with standby, it keeps a
prepared child for a connector held elsewhere and tells it "go" when the lease comes."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid

import pytest
import redis
from django.conf import settings

from cadre.runtime.processes import Child, stop_children
from cadre.runtime.streams import (
    LEASE_RETRY_SECONDS,
    STANDBY_FLAG,
    StreamLeases,
    StreamSupervisor,
    holder_id,
    lease_holder,
)
from connectors.tests.test_stream_supervision import Clock, Worker

SLEEPER = [sys.executable, "-c", "import time; time.sleep(600)"]
# A stand-in for `connectors_stream`: echoes its first line of stdin (a standby's "go", or ""
# at the end of input), then waits as a connected worker would.
ECHO_STDIN = [
    sys.executable,
    "-c",
    "import sys, time; print(repr(sys.stdin.readline()), flush=True); time.sleep(600)",
]
DEAD_REDIS = "redis://127.0.0.1:1/0"  # nothing listens on port 1: refused at once


@pytest.fixture
def client():
    connection = redis.Redis.from_url(settings.REDIS_URL)
    yield connection
    connection.close()


@pytest.fixture
def public_id(client):
    value = f"lease-test-{uuid.uuid4().hex[:8]}"
    yield value
    client.delete(StreamLeases.key(value))


def wait_until(condition, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def test_holder_id_names_the_host_and_the_process():
    host, pid, random_part = holder_id().split(":")
    assert host == socket.gethostname() and pid == str(os.getpid()) and len(random_part) == 8
    assert holder_id() != holder_id()


def test_only_one_holder_acquires_and_the_key_names_it(client, public_id):
    first = StreamLeases(client, ttl=10)
    second = StreamLeases(client, ttl=10)

    assert first.acquire(public_id) is True
    assert second.acquire(public_id) is False
    assert lease_holder(client, public_id) == first.holder
    assert 9000 < client.pttl(StreamLeases.key(public_id)) <= 10000
    assert first.acquire(public_id) is True  # its own lease: kept, not refused


def test_renew_extends_only_the_holders_lease(client, public_id):
    holder = StreamLeases(client, ttl=10)
    other = StreamLeases(client, ttl=10)
    key = StreamLeases.key(public_id)
    holder.acquire(public_id)
    client.pexpire(key, 2000)

    assert other.renew(public_id) is False
    assert client.pttl(key) <= 2000
    assert holder.renew(public_id) is True
    assert client.pttl(key) > 9000


def test_release_never_deletes_another_holders_lease(client, public_id):
    holder = StreamLeases(client, ttl=10)
    other = StreamLeases(client, ttl=10)
    holder.acquire(public_id)

    assert other.release(public_id) is False
    assert lease_holder(client, public_id) == holder.holder
    assert holder.release(public_id) is True
    assert lease_holder(client, public_id) is None


def test_an_expired_lease_goes_to_the_next_and_the_old_holder_cannot_renew_it(client, public_id):
    old = StreamLeases(client, ttl=0.3)
    new = StreamLeases(client, ttl=10)
    assert old.acquire(public_id)
    assert wait_until(lambda: lease_holder(client, public_id) is None, timeout=5)

    assert new.acquire(public_id) is True
    assert old.renew(public_id) is False
    assert old.release(public_id) is False
    assert lease_holder(client, public_id) == new.holder


class Node:
    """A supervisor with a fake clock, real leases and real (sleeping) children."""

    def __init__(self, client: redis.Redis, public_id: str, ttl: float = 10, standby: bool = False):
        self.clock = Clock()
        self.said: list[str] = []
        self.spawned: list[Child] = []
        self.commands: list[list[str]] = []
        self.standbys: list[Child] = []  # spawned with standby=True
        self.leases = StreamLeases(client, ttl=ttl)
        # The same holder, on a Redis that refuses every connection: an outage.
        self.outage = StreamLeases(
            redis.Redis.from_url(DEAD_REDIS), ttl=ttl, holder=self.leases.holder
        )
        self.supervisor = StreamSupervisor(
            workers=lambda: [Worker(public_id, "Feishu")],
            command=lambda _: ECHO_STDIN if standby else SLEEPER,
            spawn=self.spawn,
            leases=self.leases,
            standby=standby,
            clock=self.clock,
            say=self.said.append,
        )

    def spawn(self, name: str, command: list[str], standby: bool = False) -> Child:
        process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE if standby else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            process_group=0,
        )
        self.spawned.append(Child(name, process))
        self.commands.append(command)
        if standby:
            self.standbys.append(self.spawned[-1])
        return self.spawned[-1]

    def at(self, seconds: float, *, redis_down: bool = False) -> bool:
        self.clock.now = seconds
        self.supervisor.leases = self.outage if redis_down else self.leases
        return self.supervisor.tick()

    def running(self) -> list[Child]:
        return [child for child in self.spawned if child.process.poll() is None]

    def cleanup(self) -> None:
        self.supervisor.leases = self.leases
        self.supervisor.close()
        stop_children(self.running(), timeout=10)


@pytest.fixture
def nodes(client, public_id):
    made: list[Node] = []

    def make(**options) -> Node:
        made.append(Node(client, public_id, **options))
        return made[-1]

    yield make
    for node in made:
        node.cleanup()


def test_only_the_lease_holder_starts_the_child(nodes, client, public_id):
    first, second = nodes(), nodes()
    first.supervisor.refresh()
    second.supervisor.refresh()

    assert len(first.running()) == 1
    assert second.spawned == []
    assert lease_holder(client, public_id) == first.leases.holder

    first.supervisor.close()  # a clean stop gives the lease back: taken over at the next try
    assert first.running() == []
    assert lease_holder(client, public_id) is None
    second.at(2)
    assert len(second.running()) == 1
    assert lease_holder(client, public_id) == second.leases.holder


def test_a_lost_lease_stops_the_child_at_once_and_is_not_taken_back(nodes, client, public_id):
    node = nodes()
    node.supervisor.refresh()
    [child] = node.running()
    # Another supervisor holds it now (ours expired while this one was frozen).
    client.set(StreamLeases.key(public_id), "elsewhere:1:abcd", px=60000)

    assert node.at(4) is True  # the renewal is due (every ttl/3) and fails

    assert child.process.poll() is not None
    assert "cadre: stopping stream Feishu: another supervisor holds its lease" in node.said
    node.at(7)
    node.at(10)
    assert node.running() == []
    assert lease_holder(client, public_id) == "elsewhere:1:abcd"  # compare-and-delete: kept

    client.delete(StreamLeases.key(public_id))
    node.at(12)
    assert len(node.running()) == 1


def test_a_redis_outage_shorter_than_the_lease_keeps_the_child(nodes, client, public_id):
    node = nodes(ttl=10)
    node.supervisor.refresh()
    [child] = node.running()

    for second in (3.5, 5, 7, 9.5):
        node.at(second, redis_down=True)
    assert child.process.poll() is None
    assert len([line for line in node.said if "cannot reach Redis" in line]) == 1  # once

    node.at(9.8)  # Redis is back before the lease ran out: renewed
    assert child.process.poll() is None
    assert "cadre: Redis answers again" in node.said
    node.at(19, redis_down=True)  # the renewal at 9.8 counts
    assert node.running() == [child]


def test_a_redis_outage_longer_than_the_lease_stops_the_child_until_it_returns(
    nodes, client, public_id
):
    node = nodes(ttl=10)
    node.supervisor.refresh()
    [child] = node.running()

    node.at(5, redis_down=True)
    assert child.process.poll() is None
    node.at(10.1, redis_down=True)

    assert child.process.poll() is not None
    assert "cadre: stopping stream Feishu: its lease could not be renewed" in node.said
    node.at(15, redis_down=True)
    assert node.running() == []

    # Redis returns (here its key even outlived the fake clock's outage): taken again.
    node.at(16.9)  # unheld connectors are tried every LEASE_RETRY_SECONDS
    assert node.running() == []
    node.at(17)
    assert len(node.running()) == 1 and node.running()[0] is not child
    assert lease_holder(client, public_id) == node.leases.holder


def first_line(child: Child) -> str:
    """What the ECHO_STDIN child read first (it answers once told, or at the end of input)."""
    return child.process.stdout.readline().decode().strip()


def test_a_standby_waits_while_another_holds_the_lease_and_takes_over_on_go(
    nodes, client, public_id
):
    holder, waiting = nodes(), nodes(standby=True)
    holder.supervisor.refresh()
    waiting.supervisor.refresh()

    [standby] = waiting.standbys
    assert waiting.commands == [[*ECHO_STDIN, STANDBY_FLAG]]
    assert waiting.supervisor.children() == [standby]
    assert "cadre: starting stream Feishu on standby" in waiting.said
    assert lease_holder(client, public_id) == holder.leases.holder
    waiting.at(LEASE_RETRY_SECONDS)  # still held elsewhere: the standby just waits
    assert waiting.spawned == [standby] and standby.process.poll() is None

    holder.supervisor.close()  # gives the lease back
    assert waiting.at(2 * LEASE_RETRY_SECONDS) is True

    assert lease_holder(client, public_id) == waiting.leases.holder
    assert first_line(standby) == repr("go\n")
    assert waiting.spawned == [standby]  # no new process: the standby is the worker now
    assert waiting.supervisor.children() == [standby]
    assert "cadre: stream Feishu takes over from its standby" in waiting.said
    waiting.at(2 * LEASE_RETRY_SECONDS + 4)  # renewed, nothing else
    assert waiting.running() == [standby] and waiting.spawned == [standby]


def test_without_standby_nothing_runs_until_the_lease_is_taken(nodes, client, public_id):
    holder, waiting = nodes(), nodes(standby=False)
    holder.supervisor.refresh()
    waiting.supervisor.refresh()
    waiting.at(LEASE_RETRY_SECONDS)

    assert waiting.spawned == [] and waiting.supervisor.children() == []

    holder.supervisor.close()
    waiting.at(2 * LEASE_RETRY_SECONDS)
    assert waiting.commands == [SLEEPER]  # started as a worker, no standby flag


def test_a_standby_that_died_is_started_again_after_the_backoff(nodes, client, public_id):
    holder, waiting = nodes(), nodes(standby=True)
    holder.supervisor.refresh()
    waiting.supervisor.refresh()
    [first] = waiting.standbys
    first.process.kill()
    first.process.wait(10)

    assert waiting.at(0.5) is True  # noticed; restarted after 1 s (the first delay)
    assert any("exited with code -9; restarting in 1 s" in line for line in waiting.said)
    assert waiting.running() == []
    waiting.at(1.5)
    [_, second] = waiting.standbys
    assert second.process.poll() is None and waiting.supervisor.children() == [second]
    assert waiting.commands[-1][-1] == STANDBY_FLAG


def test_close_stops_the_standby_which_never_hears_go(nodes, client, public_id):
    holder, waiting = nodes(), nodes(standby=True)
    holder.supervisor.refresh()
    waiting.supervisor.refresh()
    [standby] = waiting.standbys

    waiting.supervisor.close()

    assert standby.process.poll() is not None
    assert waiting.supervisor.children() == []
    assert lease_holder(client, public_id) == holder.leases.holder  # not ours to give back


def test_a_changed_connector_replaces_its_standby(nodes, client, public_id):
    holder, waiting = nodes(), nodes(standby=True)
    holder.supervisor.refresh()
    waiting.supervisor.refresh()
    [old] = waiting.standbys
    waiting.supervisor.workers = lambda: [Worker(public_id, "Feishu", fingerprint="v2")]

    waiting.supervisor.refresh()

    assert old.process.poll() is not None
    [_, new] = waiting.standbys
    assert waiting.supervisor.children() == [new] and new.process.poll() is None
