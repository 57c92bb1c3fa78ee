"""The worker side: process a stored inbound event once, hand it to the agents runtime, reply.

Stored events are processed in batches by `inbound_drain` (Celery task
`connectors.tasks.inbound_events_drain`): it claims up to `DRAIN_BATCH` queued events with one
`UPDATE … FOR UPDATE SKIP LOCKED`, so concurrent drains and redelivered tasks never share an
event, and processes them with per-batch caches (identity, agent, transport). The inbound edge
asks for a drain after each commit of new events (`drain_request`, coalesced: at most one drain
task waits in the queue). `process_inbound_event` processes one event by id the same way.

A message from a mapped member starts a run of the member's agent through the agents runtime
(`cadre.agents.runtime.services.run_start`, in a session per chat), in the same transaction
that marks the event processed; the finished run's reply goes back through `run_reply`. An
unmapped sender gets a polite reply and lands in the console queue.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta

import httpx
from django.conf import settings
from django.core.cache import cache
from django.db import DatabaseError, connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from cadre.agents.runtime.delivery import Reply
from connectors import identities, services
from connectors.base import ParsedEvent, platform_for, registry
from connectors.models import Connector, Delivery, InboundEvent
from connectors.threadpool import ConnectionThreads
from connectors.transport import Recipient, Transport, TransportError

logger = logging.getLogger(__name__)

CLAIM_STALE_AFTER = timedelta(minutes=15)  # a claim older than this belongs to a dead worker
DRAIN_BATCH = 8  # events claimed per statement by each drain thread
DRAIN_THREADS = 4  # drain threads per worker process (settings.CONNECTORS_DRAIN_THREADS)
DRAIN_SLICE_SECONDS = 10.0  # a drain hands its worker back (and asks for a successor) after this
MAX_ATTEMPTS = 8  # retryable failures (platform 429/5xx) before an event is marked failed
RETRY_BACKOFF_MAX = 300.0  # seconds


def _claim(event_id: int) -> bool:
    now = timezone.now()
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


def _claim_batch(limit: int) -> list[int]:
    now = timezone.now()
    with connection.cursor() as cursor:
        cursor.execute(_CLAIM_BATCH, [now, now - CLAIM_STALE_AFTER, limit])
        return [row[0] for row in cursor.fetchall()]


def _finish(event: InboundEvent, status: str, *, error: str = "", **fields) -> None:
    event.status = status
    event.error = error[:300]
    event.processed_at = timezone.now()
    for name, value in fields.items():
        setattr(event, name, value)
    event.save(update_fields=["status", "error", "processed_at", *fields])


def parsed(event: InboundEvent) -> ParsedEvent:
    payload = event.payload or {}
    return ParsedEvent(
        event_key=event.event_key,
        kind=event.kind,
        sender_id=event.sender_id,
        chat_id=event.chat_id,
        sender_name=payload.get("sender_name", ""),
        sender_email=payload.get("sender_email", ""),
        sender_mobile=payload.get("sender_mobile", ""),
        tenant_key=payload.get("tenant_key", ""),
        chat_type=payload.get("chat_type", "p2p"),
        text=payload.get("text", ""),
        message_id=payload.get("message_id", ""),
        thread_ref=payload.get("thread_ref", ""),
        action=payload.get("action", {}),
        context=payload.get("context", {}),
        attachments=payload.get("attachments", []),
    )


# --- outbound HTTP: one client per process --------------------------------------------------

_client_lock = threading.Lock()
_client: tuple[int, httpx.Client] | None = None


def shared_client() -> httpx.Client:
    """One HTTP client per process (thread-safe, keeps connections alive): building one costs
    tens of milliseconds of CPU (TLS context), more than the rest of processing an event."""
    global _client
    pid = os.getpid()
    if _client is None or _client[0] != pid:  # a forked worker builds its own
        with _client_lock:
            if _client is None or _client[0] != pid:
                _client = (pid, httpx.Client(timeout=Transport.timeout))
    return _client[1]


def transport_for(connector: Connector) -> Transport:
    return platform_for(connector).transport(client=shared_client())


@dataclass
class Batch:
    """What the events of one batch share: looked up once, not once per event."""

    identities: dict = field(default_factory=dict)
    agents: dict = field(default_factory=dict)
    bindings: dict = field(default_factory=dict)
    transports: dict = field(default_factory=dict)
    settled: list = field(default_factory=list)

    def transport(self, connector: Connector) -> Transport:
        if connector.pk not in self.transports:
            self.transports[connector.pk] = transport_for(connector)
        return self.transports[connector.pk]

    def settle(self, event: InboundEvent, status: str, *, error: str = "") -> None:
        """Mark an event whose only effect was a reply: written with the batch's others in
        one statement (`flush`). Safe to delay: should the worker die first, the event is
        claimed again later and its reply, already logged as sent, is not sent twice."""
        event.status, event.error, event.processed_at = status, error[:300], timezone.now()
        self.settled.append(event)

    def flush(self) -> None:
        if self.settled:
            settled, self.settled = self.settled, []
            InboundEvent.objects.bulk_update(settled, ["status", "error", "processed_at", "member"])


def _agent_for(connector: Connector, member, chat_id: str, batch: Batch | None = None):
    """The member's agent this connector serves: a bound deployment first, else one whose
    channels name the platform, else the member's first active agent."""
    from cadre.agents.models import Agent, Deployment

    batch = batch or Batch()
    cache_key = (connector.pk, member.pk, chat_id)
    if cache_key in batch.agents:
        return batch.agents[cache_key]
    if connector.pk not in batch.bindings:
        batch.bindings[connector.pk] = list(connector.bindings.all())
    agents = (
        Agent.objects.filter(
            member=member, status=Agent.Status.ACTIVE, organization_id=connector.organization_id
        )
        .exclude(deployment__status=Deployment.Status.STOPPED)
        .select_related("deployment")
    )
    bound = [
        b.deployment_id
        for b in batch.bindings[connector.pk]
        if b.deployment_id and (not b.chat_ids or chat_id in b.chat_ids)
    ]
    agent = None
    if bound:
        agent = agents.filter(deployment_id__in=bound).order_by("id").first()
    if agent is None:
        candidates = list(agents.order_by("id"))
        agent = next(
            (a for a in candidates if connector.platform in (a.deployment.channels or [])),
            candidates[0] if candidates else None,
        )
    batch.agents[cache_key] = agent
    return agent


def start_run(event: InboundEvent, member, message: ParsedEvent, batch: Batch | None = None):
    """Hand the message to the agents runtime: one run in the chat's session. None: no agent."""
    from cadre.agents.models import Session
    from cadre.agents.runtime.services import run_start
    from cadre.tenancy.actors import system_actor

    connector = event.connector
    agent = _agent_for(connector, member, message.chat_id, batch)
    if agent is None:
        return None
    external_id = f"{connector.pk}:{message.chat_id or message.sender_id}"
    session = (
        Session.objects.filter(agent=agent, channel=connector.platform, external_id=external_id)
        .order_by("-last_activity_at")
        .first()
    )
    if session is None:
        session = Session.objects.create(
            organization_id=agent.organization_id,
            agent=agent,
            member=member,
            channel=connector.platform,
            external_id=external_id,
            title=message.text[:80],
        )
    actor = system_actor(connector.organization, label=f"connector {connector.name}")
    # Files arrive as lines of the text (the model sees them) and as references on the run
    # (`connectors.attachments.attachment_download(event, index)` fetches one on demand).
    attachments = [
        {**attachment, "inbound_event": event.pk, "index": index}
        for index, attachment in enumerate(message.attachments)
    ]
    return run_start(
        actor=actor,
        agent=agent,
        text=message.text,
        session=session,
        channel=connector.platform,
        attachments=attachments,
    )


NO_AGENT_REPLY = (
    "Hello! You do not have an assistant on this channel yet. Please ask your "
    "administrator to set one up for you."
)


def process_inbound_event(event_id: int) -> str:
    """Process one stored event exactly once; returns the resulting status.

    A retryable platform failure puts the event back in the queue and is raised (the task
    retries with backoff)."""
    if not _claim(event_id):
        return "skipped"
    event = InboundEvent.objects.select_related("connector", "connector__organization").get(
        pk=event_id
    )
    batch = Batch()
    try:
        return _process(event, batch)
    except TransportError as error:  # retryable: _process handled the others
        InboundEvent.objects.filter(pk=event.pk).update(
            status=InboundEvent.Status.QUEUED, error=str(error)[:300]
        )
        raise
    finally:
        batch.flush()


def _process(event: InboundEvent, batch: Batch) -> str:
    """The work on a claimed event. Raises a retryable TransportError (event left claimed) or
    any unexpected error (event marked failed)."""
    connector = event.connector
    try:
        if event.kind == "card_action":
            from connectors.decisions import decision_apply

            outcome = decision_apply(event)
            if outcome.startswith("refused: "):
                reply_text(
                    event,
                    outcome.removeprefix("refused: "),
                    key=f"refused:{event.pk}",
                    transport=batch.transport(connector),
                )
            _finish(event, InboundEvent.Status.PROCESSED)
            return event.status
        if event.kind != "message" or not event.sender_id:
            batch.settle(event, InboundEvent.Status.IGNORED)
            return event.status
        message = parsed(event)
        member = _resolve_sender(connector, message, batch)
        if member is None:
            identities.unmapped_record(connector, message)
            reply_text(
                event,
                identities.UNMAPPED_REPLY,
                key=f"unmapped:{event.pk}",
                transport=batch.transport(connector),
            )
            batch.settle(event, InboundEvent.Status.UNMAPPED)
            return event.status
        event.member = member
        # The run and the event's "processed" commit together: a worker dying in between
        # leaves neither, so the event is claimed again and its run is started once.
        with transaction.atomic():
            run = start_run(event, member, message, batch)
            if run is not None:
                _finish(event, InboundEvent.Status.PROCESSED, member=member, run_ref=str(run.pk))
        if run is None:
            reply_text(
                event,
                NO_AGENT_REPLY,
                key=f"no-agent:{event.pk}",
                transport=batch.transport(connector),
            )
            batch.settle(event, InboundEvent.Status.PROCESSED, error="no agent for this member")
        return event.status
    except TransportError as error:
        services.record_failure(connector, str(error))
        if error.retryable:
            raise
        _finish(event, InboundEvent.Status.FAILED, error=str(error))
        return event.status
    except Exception as error:
        services.record_failure(connector, f"{type(error).__name__}: {error}")
        _finish(event, InboundEvent.Status.FAILED, error=f"{type(error).__name__}: {error}")
        raise


def _retry_later(event: InboundEvent, error: TransportError) -> float | None:
    """A drained event met a retryable failure: keep it claimed until its backoff is over (the
    claim is dated to turn stale then), or mark it failed after MAX_ATTEMPTS. The delay, or None."""
    if event.attempts >= MAX_ATTEMPTS:
        _finish(event, InboundEvent.Status.FAILED, error=str(error))
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
    from connectors.tasks import inbound_events_drain

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
                status = _process(event, batch)
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
        transaction.on_commit(
            lambda: inbound_events_drain.apply_async(countdown=min(retry_in) + 0.5)
        )
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
        claimed = _claim_batch(batch_size)
        if not claimed:
            return done
        if len(claimed) == batch_size:
            drain_request()
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
    from connectors.tasks import inbound_events_drain

    if inbound_events_drain.app.conf.task_always_eager:
        inbound_events_drain.delay()
        return
    if getattr(_deferral, "active", False):
        _deferral.wanted = True
        return
    key = _drain_flag_key()
    if not cache.add(key, 1, timeout=DRAIN_FLAG_TTL):
        return
    try:
        inbound_events_drain.delay()
    except Exception:
        cache.delete(key)
        raise


def _resolve_sender(connector: Connector, message: ParsedEvent, batch: Batch | None = None):
    batch = batch or Batch()
    cache_key = (
        connector.pk,
        message.sender_id,
        message.tenant_key,
        message.sender_email,
        message.sender_mobile,
    )
    if cache_key not in batch.identities:
        batch.identities[cache_key] = _resolve_sender_uncached(connector, message, batch)
    return batch.identities[cache_key]


def _resolve_sender_uncached(connector: Connector, message: ParsedEvent, batch: Batch):
    member = identities.identity_resolve(
        connector,
        platform_user_id=message.sender_id,
        tenant_key=message.tenant_key,
        email=message.sender_email,
        mobile=message.sender_mobile,
        display_name=message.sender_name,
    )
    if member is not None or message.sender_email or message.sender_mobile:
        return member
    try:
        profile = batch.transport(connector).lookup_user(message.sender_id)
    except (TransportError, NotImplementedError) as error:
        logger.info("connectors: profile lookup failed for %s: %s", message.sender_id, error)
        return None
    if not profile:
        return None
    message.sender_email = profile.get("email", "")
    message.sender_mobile = profile.get("mobile", "")
    message.sender_name = message.sender_name or profile.get("name", "")
    if not (message.sender_email or message.sender_mobile):
        return None
    return identities.identity_resolve(
        connector,
        platform_user_id=message.sender_id,
        tenant_key=message.tenant_key,
        email=message.sender_email,
        mobile=message.sender_mobile,
        display_name=message.sender_name,
    )


# --- outbound ------------------------------------------------------------------------------


def send(
    connector: Connector,
    *,
    kind: str,
    recipient: str,
    body: dict,
    idempotency_key: str,
    recipient_type: str = "user",
    thread_ref: str = "",
    confirmation_ref: str = "",
    inbound_event_id: int | None = None,
    context: dict | None = None,
    transport: Transport | None = None,
) -> Delivery:
    """Send once per idempotency key (a retried task does not send twice) and log the result."""
    message, pending = services.claim_delivery(
        connector,
        idempotency_key=idempotency_key,
        kind=kind,
        recipient=recipient,
        recipient_type=recipient_type,
        body=body,
        thread_ref=thread_ref,
        confirmation_ref=confirmation_ref,
        inbound_event_id=inbound_event_id,
    )
    if not pending:
        return message
    transport = transport or transport_for(connector)
    to = Recipient(recipient, recipient_type)
    try:
        if kind == "card":
            result = transport.send_card(to, body["card"], context=context)
        elif kind == "markdown":
            result = transport.send_markdown(
                to, body["text"], title=body.get("title", ""), context=context
            )
        elif thread_ref and registry()[connector.platform].capabilities.threads:
            result = transport.reply_in_thread(thread_ref, body["text"], context=context)
        else:
            result = transport.send_text(to, body["text"], context=context)
    except TransportError as error:
        services.mark_delivery(message, sent=False, error=str(error))
        raise
    services.mark_delivery(
        message, sent=True, platform_message_id=result.message_id, extra=result.extra
    )
    return message


def reply_text(
    event: InboundEvent,
    text: str,
    *,
    key: str,
    markdown: bool = False,
    transport: Transport | None = None,
) -> Delivery:
    """Answer an inbound message where it came from (same chat, thread when supported)."""
    message = parsed(event)
    if message.chat_type == "group" and message.chat_id:
        recipient, recipient_type = message.chat_id, "chat"
    else:
        recipient, recipient_type = message.sender_id, "user"
        if message.chat_id and event.connector.platform in ("slack", "webhook"):
            recipient, recipient_type = message.chat_id, "chat"
    return send(
        event.connector,
        kind="markdown" if markdown else "text",
        recipient=recipient,
        recipient_type=recipient_type,
        body={"text": text},
        idempotency_key=key,
        thread_ref=message.thread_ref if message.chat_type == "group" else "",
        inbound_event_id=event.pk,
        context=message.context,
        transport=transport,
    )


def decision_refused_notice(event_id: int) -> None:
    event = InboundEvent.objects.select_related("connector").get(pk=event_id)
    message = parsed(event)
    text = event.error or "This button cannot be used."
    transport = transport_for(event.connector)
    response_url = message.context.get("response_url", "")
    if response_url and hasattr(transport, "respond"):
        transport.respond(response_url, text)
        return
    send(
        event.connector,
        kind="text",
        recipient=message.sender_id,
        body={"text": text},
        idempotency_key=f"refused:{event.pk}",
        inbound_event_id=event.pk,
        transport=transport,
    )


def run_reply(reply: Reply) -> Delivery | None:
    """Send a finished run's reply to the chat its message came from (once per run).

    The agents runtime hands it over when a run started from a connector finishes (through
    the delivery channel the connectors register, task `connectors.tasks.deliver_run_reply`).
    """
    event = (
        InboundEvent.objects.filter(run_ref=str(reply.run_id)).select_related("connector").first()
    )
    if event is None:
        return None
    if reply.status == "completed":
        text = reply.text
    elif reply.status in ("failed", "cancelled"):
        text = "Sorry, I could not finish that. Please try again later."
    else:
        return None
    if not text:
        return None
    return reply_text(event, text, key=f"run:{reply.run_id}", markdown=False)
