"""Stream-connector supervision: one child per stream-mode connector, held by a lease in Redis.

A connector in stream mode (Feishu long connection, DingTalk Stream) needs exactly one live
connection across the installation. Every supervisor (`cadre up` on one machine, `cadre streams`
on as many machines as wanted) lists the connectors, and runs a connector's child only while it
holds that connector's lease: a Redis key `cadre:streams:lease:<public id>` whose value names
the holder (host:pid:random), set with NX and a time to live, renewed by its holder every third
of it with a compare-and-set, deleted on a clean stop with a compare-and-delete. A holder that
dies stops renewing: another supervisor takes the lease over when the key expires. A holder that
cannot renew (Redis gone, or the key taken by another after it expired) stops its child when its
own view of the lease ends, so two connections never overlap by more than a child's stop.

Warm standby (`standby=True`, CADRE_STREAM_STANDBY): for a connector another supervisor holds,
this one keeps a child started with `--standby`, which has done everything short of connecting
(Django, the SDK's import: seconds of CPU) and waits on its stdin. Taking the lease over writes
`go` to it, so the connection comes back about when the lease expires instead of a process start
later; closing its stdin without `go` (or the supervisor dying) makes it exit unconnected.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass

import redis
from django.utils.translation import gettext as _

from cadre.runtime.processes import Child, stop_children

STANDBY_FLAG = "--standby"  # connectors_stream's: prepare, connect only on "go" from stdin
GO = b"go\n"

STREAM_REFRESH_SECONDS = 15.0  # how often the list of stream-mode connectors is re-read
RESTART_DELAY_MAX = 60.0  # the longest wait before restarting a stream worker that died
STABLE_AFTER = 60.0  # a worker that ran this long before dying starts again at the first delay
LEASE_RETRY_SECONDS = 2.0  # how often a connector held by nobody here is tried again
LEASE_KEY = "cadre:streams:lease:{public_id}"

# Compare-and-set and compare-and-delete: a holder only ever extends or deletes its own lease,
# never one another supervisor took after it expired.
RENEW_SCRIPT = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
"""
RELEASE_SCRIPT = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0
"""


def restart_delay(failures: int) -> float:
    """1, 2, 4, … seconds up to RESTART_DELAY_MAX after the n-th death in a row."""
    return min(RESTART_DELAY_MAX, 2.0 ** max(0, failures - 1))


def holder_id() -> str:
    """Names this supervisor in its leases: host, pid and a random part (pids are reused)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


class StreamLeases:
    """One supervisor's side of the per-connector leases in Redis.

    `acquire`, `renew` and `release` return whether the lease is (still) ours; they raise
    `redis.RedisError` when Redis does not answer, which the supervisor tells apart from a
    lease lost to another holder.
    """

    def __init__(self, client: redis.Redis, *, ttl: float, holder: str | None = None):
        self.client = client
        self.ttl = ttl
        self.holder = holder or holder_id()
        self._renew = client.register_script(RENEW_SCRIPT)
        self._release = client.register_script(RELEASE_SCRIPT)

    @classmethod
    def from_settings(cls, settings) -> StreamLeases:
        # Short socket timeouts: an unreachable Redis must not stall the loop that renews the
        # other leases and watches the children.
        client = redis.Redis.from_url(
            settings.REDIS_URL, socket_timeout=1.0, socket_connect_timeout=1.0
        )
        return cls(client, ttl=float(settings.CADRE_STREAM_LEASE_SECONDS))

    @staticmethod
    def key(public_id: str) -> str:
        return LEASE_KEY.format(public_id=public_id)

    @property
    def renew_every(self) -> float:
        return self.ttl / 3

    def _ttl_ms(self) -> int:
        return int(self.ttl * 1000)

    def acquire(self, public_id: str) -> bool:
        key = self.key(public_id)
        if self.client.set(key, self.holder, nx=True, px=self._ttl_ms()):
            return True
        # Ours already (Redis came back before the key expired): keep it.
        return self.renew(public_id)

    def renew(self, public_id: str) -> bool:
        return bool(self._renew(keys=[self.key(public_id)], args=[self.holder, self._ttl_ms()]))

    def release(self, public_id: str) -> bool:
        return bool(self._release(keys=[self.key(public_id)], args=[self.holder]))


def lease_holder(client: redis.Redis, public_id: str) -> str | None:
    """Which supervisor (host:pid:random) holds this connector's connection, if any."""
    value = client.get(StreamLeases.key(public_id))
    return value.decode() if value is not None else None


@dataclass
class StreamSlot:
    """One stream-mode connector's worker: its lease, its process (if running) and its restart
    state. Times are the supervisor's clock (monotonic)."""

    public_id: str
    label: str
    fingerprint: str
    child: Child | None = None
    standing_by: bool = False  # the child is a standby, not connected (waiting for "go")
    started_at: float = 0.0
    failures: int = 0
    start_at: float = 0.0  # the next (re)start, once the lease is held
    held_until: float = 0.0  # this supervisor's view of its lease: held while now < held_until
    renew_at: float = 0.0  # the next renewal (held) or acquisition attempt (not held)
    held_elsewhere: bool = False  # the last acquisition attempt found another holder


class StreamSupervisor:
    """Starts, restarts (with backoff) and stops one child per stream-mode connector, for the
    connectors whose lease it holds.

    `workers()` lists what should run (objects with public_id, name, fingerprint, problem,
    fix); `command(public_id)` is the child's command line; `spawn(name, command)` starts it;
    `leases` is a `StreamLeases`. A connector removed, disabled or changed (settings,
    credentials) has its worker stopped (and, if changed, started again with the new
    configuration); a lease lost has its worker stopped at once. With `standby`, a connector
    held elsewhere gets a standby child, `spawn(name, command, standby=True)` with a pipe for
    stdin, which the acquisition of the lease turns into the worker.
    """

    def __init__(
        self,
        *,
        workers: Callable[[], list],
        command: Callable[[str], list[str]],
        spawn: Callable[..., Child],
        leases: StreamLeases,
        standby: bool = False,
        stop_timeout: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        say: Callable[[str], object] = print,
    ):
        self.workers, self.command, self.spawn = workers, command, spawn
        self.leases = leases
        self.standby = standby
        self.stop_timeout = stop_timeout
        self.clock, self.say = clock, say
        self.slots: dict[str, StreamSlot] = {}
        self.reported: set[str] = set()  # connectors whose missing extra was reported
        self.redis_down = False  # reported once per outage
        # Set by the first Redis error of a tick: the other slots skip Redis until the next,
        # so an unreachable server costs one timeout per tick, not one per connector.
        self.failed_this_tick = False

    def children(self) -> list[Child]:
        """Every child, standby ones included."""
        return [slot.child for slot in self.slots.values() if slot.child is not None]

    def refresh(self) -> bool:
        """Match the running workers to the connectors; True when a child was started or
        stopped."""
        wanted = {}
        for worker in self.workers():
            if worker.problem:
                if worker.public_id not in self.reported:
                    self.say(
                        _("cadre: connector %(name)s: %(problem)s (%(fix)s)")
                        % {"name": worker.name, "problem": worker.problem, "fix": worker.fix}
                    )
                    self.reported.add(worker.public_id)
                continue
            wanted[worker.public_id] = worker
        changed = False
        for public_id, slot in list(self.slots.items()):
            worker = wanted.get(public_id)
            if worker is not None and worker.fingerprint == slot.fingerprint:
                continue
            reason = _("its configuration changed") if worker is not None else _("it is off")
            changed |= self._stop(slot, reason)
            self._release(slot)
            del self.slots[public_id]
        for public_id, worker in wanted.items():
            if public_id not in self.slots:
                self.slots[public_id] = StreamSlot(
                    public_id, f"stream {worker.name}", worker.fingerprint
                )
        return self.tick() or changed

    def tick(self) -> bool:
        """Keep the leases, notice dead workers and (re)start those whose time has come;
        True on a change."""
        changed = False
        self.failed_this_tick = False
        for slot in self.slots.values():
            changed |= self._keep_lease(slot)
            now = self.clock()
            if slot.child is not None and slot.child.process.poll() is not None:
                self._died(slot, now)
                changed = True
            held = now < slot.held_until
            if slot.child is not None and slot.standing_by and held:
                changed |= self._go(slot, now)
            if slot.child is not None or now < slot.start_at:
                continue
            if held:
                self.say(_("cadre: starting %(name)s") % {"name": slot.label})
                slot.child = self.spawn(slot.label, self.command(slot.public_id))
                slot.started_at = now
                changed = True
            elif self.standby and slot.held_elsewhere:
                self.say(_("cadre: starting %(name)s on standby") % {"name": slot.label})
                command = [*self.command(slot.public_id), STANDBY_FLAG]
                slot.child = self.spawn(slot.label, command, standby=True)
                slot.standing_by = True
                slot.started_at = now
                changed = True
        return changed

    def _died(self, slot: StreamSlot, now: float) -> None:
        """A worker or standby exited: started again after the backoff's delay."""
        code = slot.child.process.returncode
        slot.failures = 1 if now - slot.started_at >= STABLE_AFTER else slot.failures + 1
        slot.start_at = now + restart_delay(slot.failures)
        self.say(
            _("cadre: %(name)s exited with code %(code)s; restarting in %(seconds).0f s")
            % {"name": slot.label, "code": code, "seconds": slot.start_at - now}
        )
        slot.child, slot.standing_by = None, False

    def _go(self, slot: StreamSlot, now: float) -> bool:
        """The lease is ours: the standby connects. One that cannot be told (it died just now)
        is replaced by a worker started as without standby."""
        try:
            slot.child.process.stdin.write(GO)
            slot.child.process.stdin.close()
        except (OSError, ValueError):  # a broken pipe: it exited meanwhile
            stop_children([slot.child], timeout=self.stop_timeout)
            slot.child, slot.standing_by = None, False
            slot.start_at = now
            return True
        self.say(_("cadre: %(name)s takes over from its standby") % {"name": slot.label})
        slot.standing_by = False
        slot.started_at = now
        return True

    def close(self) -> None:
        """Stop every child, then give their leases back so another supervisor takes over
        at once instead of after the time to live."""
        stop_children(self.children(), timeout=self.stop_timeout)
        for slot in self.slots.values():
            slot.child, slot.standing_by = None, False
            self._release(slot)

    def _keep_lease(self, slot: StreamSlot) -> bool:
        now = self.clock()
        if now < slot.renew_at:
            return self._expire(slot, now)
        held = now < slot.held_until
        keep = self.leases.renew if held else self.leases.acquire
        try:
            if self.failed_this_tick:
                raise redis.ConnectionError("unreachable a moment ago")
            ours = keep(slot.public_id)
        except redis.RedisError as error:
            self.failed_this_tick = True
            if not self.redis_down:
                self.say(
                    _("cadre: cannot reach Redis for the stream leases: %(error)s")
                    % {"error": error}
                )
                self.redis_down = True
            if held:
                # Again within a second, and at every tick in the lease's last half second,
                # so that Redis back just before the end still saves the connection.
                retry = now + min(1.0, self.leases.renew_every)
                slot.renew_at = min(retry, max(now, slot.held_until - 0.5))
            else:
                slot.renew_at = now + LEASE_RETRY_SECONDS
            return self._expire(slot, self.clock())
        if self.redis_down:
            self.say(_("cadre: Redis answers again"))
            self.redis_down = False
        slot.held_elsewhere = not ours
        if ours:
            if not held:
                self.say(_("cadre: holding the lease of %(name)s") % {"name": slot.label})
            # Counted from before the request: Redis started the time to live later.
            slot.held_until = now + self.leases.ttl
            slot.renew_at = now + self.leases.renew_every
            return False
        slot.renew_at = now + LEASE_RETRY_SECONDS
        if held:
            slot.held_until = 0.0
            return self._stop(slot, _("another supervisor holds its lease"))
        return False

    def _expire(self, slot: StreamSlot, now: float) -> bool:
        """The lease ran out without a renewal (Redis unreachable): stop the child, since
        another supervisor may take the lease over now (a standby waits on)."""
        if slot.child is None or slot.standing_by or now < slot.held_until:
            return False
        return self._stop(slot, _("its lease could not be renewed"))

    def _release(self, slot: StreamSlot) -> None:
        if slot.held_until <= 0.0:
            return
        slot.held_until = 0.0
        with contextlib.suppress(redis.RedisError):  # else it expires by itself
            self.leases.release(slot.public_id)

    def _stop(self, slot: StreamSlot, reason: str) -> bool:
        if slot.child is None:
            return False
        self.say(_("cadre: stopping %(name)s: %(reason)s") % {"name": slot.label, "reason": reason})
        stop_children([slot.child], timeout=self.stop_timeout)
        slot.child, slot.standing_by = None, False
        return True
