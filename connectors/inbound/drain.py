"""The worker side's intake: claim stored inbound events and drain them in batches.

Stored events are processed in batches by `inbound_drain` (Celery task
`connectors.tasks.inbound_events_drain`): it claims up to `DRAIN_BATCH` queued events with one
`UPDATE … FOR UPDATE SKIP LOCKED`, so concurrent drains and redelivered tasks never share an
event, and processes them with per-batch caches (identity, agent, transport). The inbound edge
asks for a drain after each commit of new events (`drain_request`, coalesced: at most one drain
task waits in the queue). `process_inbound_event` processes one event by id the same way.

A claim is held by renewing it: while a process works on claimed events, `claim_keeper` dates
their claims again every CLAIM_RENEW_SECONDS, so a claim that has not been renewed for
CLAIM_STALE_AFTER belongs to a process that died holding it, and the next drain takes it. A
holder alive but stuck stops renewing after CLAIM_MAX_HOLD, so its events are taken too; should
it wake up, the event's row decides which of the two starts the run (`dispatch`).
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta

from celery import current_app
from django.conf import settings
from django.core.cache import cache
from django.db import DatabaseError, connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from cadre.queues import enqueue, enqueue_with
from connectors.base.threadpool import ConnectionThreads
from connectors.base.transport import TransportError
from connectors.inbound.dispatch import finish_event, process_claimed
from connectors.inbound.sessions import Batch
from connectors.models import InboundEvent

logger = logging.getLogger(__name__)

CLAIM_RENEW_SECONDS = 10.0  # a process renews the claims it holds this often
# A claim not renewed for this long belongs to a dead process (four renewals missed: a database
# restart or a busy machine delays one, not four). With the beat's drain every minute, a dead
# worker's events are answered within about two minutes.
CLAIM_STALE_AFTER = timedelta(seconds=40)
# Claims are renewed for at most this long: far more than a batch's work takes (each platform
# call is bounded by the outbound client's 10 s timeout, a retryable failure hands the claim
# back), so a holder still working then is stuck, and its events go to another drain.
CLAIM_MAX_HOLD = timedelta(minutes=15)
# The drain task, enqueued by name (connectors.tasks imports this module).
DRAIN_TASK = "connectors.tasks.inbound_events_drain"
DRAIN_BATCH = 8  # events claimed per statement by each drain thread
DRAIN_THREADS = 4  # drain threads per worker process (settings.CONNECTORS_DRAIN_THREADS)
DRAIN_SLICE_SECONDS = 10.0  # a drain hands its worker back (and asks for a successor) after this
MAX_ATTEMPTS = 8  # retryable failures (platform 429/5xx) before an event is marked failed
RETRY_BACKOFF_MAX = 300.0  # seconds


def _claim(event_id: int, now: datetime) -> bool:
    claimable = Q(status=InboundEvent.Status.QUEUED) | Q(
        status=InboundEvent.Status.PROCESSING, claimed_at__lt=now - CLAIM_STALE_AFTER
    )
    return bool(
        InboundEvent.objects.filter(claimable, pk=event_id).update(
            status=InboundEvent.Status.PROCESSING, claimed_at=now, attempts=F("attempts") + 1
        )
    )


# Claim a batch in one statement. SKIP LOCKED: a row another drain (or `_claim`) is claiming is
# left to it; the outer UPDATE re-checks the locked rows, so an event is claimed exactly once.
# A retried event waits as a `processing` claim dated so that it turns stale after its backoff.
_CLAIM_BATCH = (
    "UPDATE connectors_inboundevent SET status = 'processing', claimed_at = %s, "
    "attempts = attempts + 1 WHERE id IN ("
    "SELECT id FROM connectors_inboundevent WHERE status = 'queued' "
    "OR (status = 'processing' AND claimed_at < %s) "
    "ORDER BY received_at, id LIMIT %s FOR UPDATE SKIP LOCKED) RETURNING id"
)


def _claim_batch(limit: int, now: datetime) -> list[int]:
    with connection.cursor() as cursor:
        cursor.execute(_CLAIM_BATCH, [now, now - CLAIM_STALE_AFTER, limit])
        return [row[0] for row in cursor.fetchall()]


def process_inbound_event(event_id: int) -> str:
    """Process one stored event exactly once; returns the resulting status.

    A retryable platform failure puts the event back in the queue and is raised (the task
    retries with backoff)."""
    claimed_at = timezone.now()
    if not _claim(event_id, claimed_at):
        return "skipped"
    event = InboundEvent.objects.select_related("connector", "connector__organization").get(
        pk=event_id
    )
    batch = Batch()
    with claim_keeper.hold([event_id], claimed_at):
        try:
            return process_claimed(event, batch)
        except TransportError as error:  # retryable: process_claimed handled the others
            InboundEvent.objects.filter(pk=event.pk).update(
                status=InboundEvent.Status.QUEUED, error=str(error)[:300]
            )
            raise
        finally:
            batch.flush()


def _retry_later(event: InboundEvent, error: TransportError) -> float | None:
    """A drained event met a retryable failure: keep it claimed until its backoff is over (the
    claim is dated to turn stale then, which also ends its renewals), or mark it failed after
    MAX_ATTEMPTS. The delay, or None."""
    if event.attempts >= MAX_ATTEMPTS:
        finish_event(event, InboundEvent.Status.FAILED, error=str(error))
        return None
    delay = error.retry_after
    if delay is None:
        delay = min(RETRY_BACKOFF_MAX, 2.0**event.attempts) * (0.5 + random.random() / 2)
    delay = min(max(delay, 1.0), RETRY_BACKOFF_MAX)
    InboundEvent.objects.filter(pk=event.pk).update(
        claimed_at=timezone.now() - CLAIM_STALE_AFTER + timedelta(seconds=delay),
        error=str(error)[:300],
    )
    return delay


def process_inbound_events(event_ids: list[int], batch: Batch | None = None) -> dict[str, int]:
    """Process events this caller has claimed, in arrival order; counts per resulting status.

    One event's failure does not stop the others: an unexpected error marks that event
    failed, a retryable platform failure schedules it again after a backoff."""
    batch = batch or Batch()
    events = (
        InboundEvent.objects.select_related("connector", "connector__organization")
        .filter(pk__in=event_ids)
        .order_by("received_at", "id")
    )
    counts: dict[str, int] = {}
    retry_in: list[float] = []
    try:
        for event in events:
            try:
                status = process_claimed(event, batch)
            except TransportError as error:
                delay = _retry_later(event, error)
                status = "retrying" if delay is not None else InboundEvent.Status.FAILED
                if delay is not None:
                    retry_in.append(delay)
            except Exception:
                logger.exception("connectors: processing inbound event %s failed", event.pk)
                status = InboundEvent.Status.FAILED
            counts[status] = counts.get(status, 0) + 1
    finally:
        batch.flush()
    if retry_in:
        transaction.on_commit(lambda: enqueue_with(DRAIN_TASK, countdown=min(retry_in) + 0.5))
    return counts


def _drain_thread_count() -> int:
    # Tests run the drain in the test's own transaction, on its one connection.
    return getattr(settings, "CONNECTORS_DRAIN_THREADS", 1 if settings.TESTING else DRAIN_THREADS)


drain_threads = ConnectionThreads("connectors-drain", _drain_thread_count)


def inbound_drain(
    *,
    batch_size: int = DRAIN_BATCH,
    max_seconds: float = DRAIN_SLICE_SECONDS,
    threads: int | None = None,
) -> int:
    """Claim and process queued events, batch after batch, until none is left; the count.

    Several threads drain side by side (each with its own connection): processing an event
    mostly waits on the database and the platform's API, so they overlap those waits. A full
    batch means a backlog: another drain is requested, so the other worker processes join in.
    After `max_seconds` the drain stops and requests a successor, so other tasks (agent runs,
    replies) get the worker in between."""
    _drain_flag_clear()
    deadline = time.monotonic() + max_seconds
    threads = _drain_thread_count() if threads is None else threads
    if threads <= 1:
        return _drain_loop(batch_size, deadline)
    futures = [
        drain_threads.submit(_drain_loop_in_thread, batch_size, deadline) for _ in range(threads)
    ]
    return sum(future.result() for future in futures)


def _drain_loop(batch_size: int, deadline: float) -> int:
    done = 0
    batch = Batch()  # lookups shared by every batch of this loop (at most max_seconds old)
    while True:
        claimed_at = timezone.now()
        claimed = _claim_batch(batch_size, claimed_at)
        if not claimed:
            return done
        if len(claimed) == batch_size:
            drain_request()
        with claim_keeper.hold(claimed, claimed_at):
            process_inbound_events(claimed, batch)
        done += len(claimed)
        if time.monotonic() > deadline:
            drain_request()
            return done


def _drain_loop_in_thread(batch_size: int, deadline: float) -> int:
    try:
        return _drain_loop(batch_size, deadline)
    except DatabaseError:
        drain_threads.connection_lost()
        raise


# --- holding claims: renewed while their process lives ---------------------------------------

# Renew a holder's claims that are still as it left them: a claim re-dated for a retry's
# backoff, or finished, no longer matches and drops out of the holder's set.
_RENEW = (
    "UPDATE connectors_inboundevent SET claimed_at = %s "
    "WHERE id = ANY(%s) AND status = 'processing' AND claimed_at = ANY(%s) RETURNING id"
)


@dataclass
class _Held:
    ids: list[int]
    # What this holder last wrote on them: one date, or two after a renewal whose answer was
    # lost (its UPDATE may have committed before the connection broke).
    dates: list[datetime]
    since: datetime  # when it claimed them


class ClaimKeeper:
    """Renews the claims this process holds, from a thread of its own (with its own database
    connection) that runs only while some are held: a drain thread busy on one event for
    minutes keeps its batch, and a process that dies stops renewing at once."""

    def __init__(self) -> None:
        self._forked()
        # A forked child (a prefork worker process) holds nothing and has no thread yet.
        os.register_at_fork(after_in_child=self._forked)

    def _forked(self) -> None:
        self._held: list[_Held] = []
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None

    @contextmanager
    def hold(self, ids: list[int], claimed_at: datetime) -> Iterator[None]:
        """Keep these claims (written with `claimed_at`) renewed until the block ends.

        Inside a transaction there is nothing to renew: the claim's row locks hold it until
        the commit, and other connections could not see a renewal's rows before it."""
        if connection.in_atomic_block:
            yield
            return
        held = _Held(list(ids), [claimed_at], claimed_at)
        with self._changed:
            self._held.append(held)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._keep, name="connectors-claims", daemon=True
                )
                self._thread.start()
        try:
            yield
        finally:
            with self._changed:
                self._held.remove(held)
                self._changed.notify_all()

    def idle(self) -> bool:
        """No renewing thread runs (it stops, closing its connection, when nothing is held)."""
        with self._changed:
            return self._thread is None

    def _keep(self) -> None:
        while True:
            renew_at = time.monotonic() + CLAIM_RENEW_SECONDS
            with self._changed:
                while self._held and time.monotonic() < renew_at:
                    self._changed.wait(renew_at - time.monotonic())
                if not self._held:
                    # Decided under the lock, so a `hold` starting now starts a new thread.
                    connection.close()
                    self._thread = None
                    return
                held = list(self._held)
            self._renew(held)

    def _renew(self, held: list[_Held]) -> None:
        now = timezone.now()
        for claim in held:
            if claim.ids and now - claim.since > CLAIM_MAX_HOLD:
                logger.warning(
                    "connectors: inbound events %s held for over %s: their holder looks stuck, "
                    "their claims are no longer renewed and another drain takes them",
                    claim.ids,
                    CLAIM_MAX_HOLD,
                )
                claim.ids = []
        pending = [claim for claim in held if claim.ids]
        try:
            with connection.cursor() as cursor:
                while pending:
                    claim = pending[0]
                    cursor.execute(_RENEW, [now, claim.ids, claim.dates])
                    claim.ids = [row[0] for row in cursor.fetchall()]
                    claim.dates = [now]
                    pending.pop(0)
        except Exception:
            # Tried again at the next renewal, on a new connection: only CLAIM_STALE_AFTER
            # without one lets another process take these claims. The renewal may have been
            # written before its answer was lost: either date is this holder's.
            logger.warning("connectors: renewing inbound event claims failed", exc_info=True)
            for claim in pending:
                claim.dates = [claim.dates[-1], now]
            connection.close()


claim_keeper = ClaimKeeper()


# --- asking for a drain: at most one waits in the queue --------------------------------------

DRAIN_FLAG_TTL = 60  # seconds: a lost drain task stops blocking new requests after this


def _drain_flag_key() -> str:
    # Per database: test runs and the benchmark share Redis but not the database.
    return f"connectors:drain-pending:{connection.settings_dict.get('NAME', '')}"


def _drain_flag_clear() -> None:
    cache.delete(_drain_flag_key())


_deferral = threading.local()


@contextmanager
def drain_requests_deferred() -> Iterator[threading.local]:
    """Within this block `drain_request` only notes that a drain is wanted (`.wanted`): the
    inbound edge answers the platform first and asks for the drain afterwards."""
    _deferral.active, _deferral.wanted = True, False
    try:
        yield _deferral
    finally:
        _deferral.active = False


def drain_request() -> None:
    """Make sure a drain starts after this moment (call it after committing new events).

    The flag is set when a drain task is queued and cleared when it starts, before it claims
    anything: if the flag is already set, the queued drain has not started yet and will see
    what was committed before now, so no second task is needed."""
    if current_app.conf.task_always_eager:
        enqueue(DRAIN_TASK)
        return
    if getattr(_deferral, "active", False):
        _deferral.wanted = True
        return
    key = _drain_flag_key()
    if not cache.add(key, 1, timeout=DRAIN_FLAG_TTL):
        return
    try:
        enqueue(DRAIN_TASK)
    except Exception:
        cache.delete(key)
        raise
