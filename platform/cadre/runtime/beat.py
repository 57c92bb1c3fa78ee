"""The beat's state in Redis: celery-redbeat's lock (one beat at a time) and its schedule.

The beat that holds the lock renews it to CELERY_REDBEAT_LOCK_TIMEOUT seconds at the start of
every tick, so the lock's remaining time tells how long ago the holder last ticked; an entry
past its time that is still unsent tells that the ticks send nothing. `cadre manage beat_health`
and `cadre doctor` read both.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from django.conf import settings
from redbeat.schedulers import RedBeatSchedulerEntry, ensure_conf, get_redis

from cadre.celery import app


@dataclass(frozen=True)
class BeatStatus:
    held: bool  # a beat holds the lock
    tick_age: float | None  # seconds since the holder last renewed the lock
    entries: int  # entries in the schedule
    late: float  # seconds the latest due entry has waited past its time (0: none has)

    def healthy(self, max_age: float) -> bool:
        return self.held and (self.tick_age or 0) <= max_age and self.late <= max_age


def default_max_age() -> float:
    """How stale a tick may be: the holder ticks at least every CELERY_BEAT_MAX_LOOP_INTERVAL."""
    return 3.0 * settings.CELERY_BEAT_MAX_LOOP_INTERVAL


def beat_status() -> BeatStatus:
    conf = ensure_conf(app)
    client = get_redis(app)
    remaining_ms = client.pttl(conf.lock_key)  # -2: no lock; -1: no expiry (never set so)
    held = remaining_ms > 0 or remaining_ms == -1
    tick_age = None
    if remaining_ms > 0:
        tick_age = max(0.0, float(settings.CELERY_REDBEAT_LOCK_TIMEOUT) - remaining_ms / 1000)
    entries = client.zcard(conf.schedule_key)
    return BeatStatus(held=held, tick_age=tick_age, entries=entries, late=_late(client, conf))


def _late(client, conf) -> float:
    """How long the most overdue entry has waited. The scores only shortlist: after a restart
    redbeat scores an entry early by the time since its last run, so each scored as due is
    asked when its schedule says it is due (never-run and disabled entries wait for nothing)."""
    late = 0.0
    for key in client.zrangebyscore(conf.schedule_key, 0, time.time()):
        try:
            entry = RedBeatSchedulerEntry.from_key(key, app=app)
        except KeyError:  # removed meanwhile
            continue
        if not entry.enabled or entry.last_run_at is None:
            continue
        remaining = entry.schedule.remaining_estimate(entry.last_run_at)
        if remaining is not None:
            late = max(late, -remaining.total_seconds())
    return late
