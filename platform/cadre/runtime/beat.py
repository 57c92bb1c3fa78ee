"""The beat's state in Redis: celery-redbeat's lock (one beat at a time) and its schedule.

The beat that holds the lock renews it to CELERY_REDBEAT_LOCK_TIMEOUT seconds at the start of
every tick, so the lock's remaining time tells how long ago the holder last ticked; an entry
past its time that is still unsent tells that the ticks send nothing. `cadre manage beat_health`
and `cadre doctor` read both. `Scheduler` is the beat's scheduler (CELERY_BEAT_SCHEDULER).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from django.conf import settings
from redbeat.schedulers import RedBeatScheduler, RedBeatSchedulerEntry, ensure_conf, get_redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import LockNotOwnedError
from redis.exceptions import TimeoutError as RedisTimeoutError

from cadre.celery import app

logger = logging.getLogger(__name__)


class Scheduler(RedBeatScheduler):
    """celery-redbeat's scheduler, riding out a lost Redis instead of exiting.

    celery-redbeat lets a Redis error out of a tick, which ends `celery beat`. Here a tick that
    cannot reach Redis sends nothing and is tried again after CELERY_BEAT_MAX_LOOP_INTERVAL
    seconds, in the same process. A lock that lapsed meanwhile (Redis lost it, or another beat
    took it over while this one could not renew it) is taken again before anything is sent, and
    only if no other beat holds it: still one beat at a time."""

    _lock_lost = False

    def tick(self, *args, **kwargs):
        try:
            if self._lock_lost:
                if not self.lock.acquire(blocking=False):
                    return self.max_interval  # another beat holds it: wait, as at the start
                self._lock_lost = False
                logger.warning("beat: lock taken again")
            return super().tick(*args, **kwargs)
        except LockNotOwnedError:
            self._lock_lost = True
            logger.warning("beat: lost the lock; sending nothing until it is taken again")
        except (RedisConnectionError, RedisTimeoutError) as error:
            logger.warning(
                "beat: Redis unreachable (%s); trying again in %s s", error, self.max_interval
            )
        return self.max_interval


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
