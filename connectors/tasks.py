"""Celery tasks of the connectors: thin, idempotent adapters around dispatch and decisions."""

from __future__ import annotations

from contextlib import contextmanager
from datetime import timedelta

from celery import shared_task
from django.utils import timezone

from cadre.agents.models import AgentMessage
from cadre.agents.runtime.records.delivery import Reply
from connectors.base.transport import TransportError
from connectors.directory.contacts import ContactChange
from connectors.directory.sync import (
    contact_change_apply,
    directory_reconcile_all,
    directory_sync_execute,
)
from connectors.inbound.dispatch import decision_refused_notice as refused_notice_send
from connectors.inbound.dispatch import run_reply
from connectors.inbound.drain import inbound_drain
from connectors.models import Connector, DirectorySync, InboundEvent
from connectors.outbound import agent_messages, notices


class RetryableSend(Exception):
    """A retryable transport failure, re-raised for Celery's autoretry."""


@contextmanager
def retry_transient_sends():
    """Turn a retryable transport failure (429, 5xx, network) into a Celery retry."""
    try:
        yield
    except TransportError as error:
        if error.retryable:
            raise RetryableSend(str(error)) from error
        raise


# How a task that sends to a platform retries: transient failures (5xx, 429, network) back
# off exponentially with jitter, up to about half an hour in all.
SEND_RETRIES = {
    "bind": True,
    "acks_late": True,
    "autoretry_for": (RetryableSend,),
    "retry_backoff": 2,
    "retry_backoff_max": 300,
    "retry_jitter": True,
    "max_retries": 8,
}


@shared_task(acks_late=True)
def inbound_events_drain() -> int:
    """Process the stored inbound events in batches until none is queued (exactly once each:
    every batch is claimed in one statement). The inbound edge asks for one after each commit."""
    return inbound_drain()


@shared_task(
    bind=True,
    acks_late=True,
    autoretry_for=(RetryableSend,),
    retry_backoff=2,
    retry_jitter=True,
    max_retries=5,
)
def decision_refused_notice(self, event_id: int) -> None:
    """Tell the person who clicked why their click was refused (platforms without ack text)."""
    with retry_transient_sends():
        refused_notice_send(event_id)


@shared_task(**SEND_RETRIES)
def deliver_run_reply(self, reply: dict) -> None:
    """A run started from an IM message finished: send its reply (`Reply.to_dict()`, handed
    over by the runtime's delivery channel)."""
    with retry_transient_sends():
        run_reply(Reply.from_dict(reply))


@shared_task(**SEND_RETRIES)
def notice_deliver(self, notice_id: int) -> int:
    """Text a member's notice to them over IM (`tenancy.services.notices`)."""
    with retry_transient_sends():
        return notices.notice_deliver(notice_id)


@shared_task(ignore_result=True)
def inbound_events_prune(days: int = 14) -> int:
    """Beat: delete handled inbound events older than `days` (kept well beyond every
    platform's replay window, so a replayed old event still meets its de-duplication row)."""
    cutoff = timezone.now() - timedelta(days=max(days, 2))
    deleted, _ = InboundEvent.objects.filter(
        received_at__lt=cutoff,
        status__in=[
            InboundEvent.Status.PROCESSED,
            InboundEvent.Status.UNMAPPED,
            InboundEvent.Status.IGNORED,
            InboundEvent.Status.FAILED,
        ],
    ).delete()
    return deleted


@shared_task(**SEND_RETRIES)
def agent_message_deliver(self, message_id: int) -> str:
    """Deliver a message an agent sent with `im_send` (an `AgentMessage`) once per
    recipient; a retry skips recipients already sent. Returns the message's status."""
    try:
        with retry_transient_sends():
            return agent_messages.deliver(message_id)
    except agent_messages.DeliveryBusy:
        return "busy"  # another worker holds it and will finish it
    except RetryableSend as error:
        if self.request.retries >= SEND_RETRIES["max_retries"]:
            return agent_messages.finish(message_id, [f"gave up after retries: {error}"])
        raise


@shared_task(ignore_result=True)
def agent_messages_deliver_queued(max_age_hours: int = 24, limit: int = 500) -> int:
    """Beat: enqueue a delivery for every agent message still queued (new ones, and ones whose
    delivery task was lost); a delivery already running is left alone by its lock."""
    since = timezone.now() - timedelta(hours=max_age_hours)
    queued = list(
        AgentMessage.objects.filter(status=AgentMessage.Status.QUEUED, created_at__gte=since)
        .order_by("created_at")
        .values_list("pk", flat=True)[:limit]
    )
    for message_id in queued:
        agent_message_deliver.delay(message_id)
    return len(queued)


@shared_task(acks_late=True, ignore_result=True)
def directory_sync_run(sync_id: int) -> str:
    """Run a queued directory sync (full or reconciliation); a run already finished is left
    as it is, so a redelivered task does nothing."""
    sync = DirectorySync.objects.select_related("connector__organization").filter(pk=sync_id)
    found = sync.first()
    if found is None:
        return "missing"
    return directory_sync_execute(found).status


@shared_task(
    acks_late=True,
    ignore_result=True,
    autoretry_for=(RetryableSend,),
    retry_backoff=2,
    retry_jitter=True,
    max_retries=5,
)
def directory_change_apply(connector_id: int, change: dict) -> str:
    """Apply one contact-change event (handed over by the inbound drain)."""
    connector = Connector.objects.select_related("organization").filter(pk=connector_id).first()
    if connector is None:
        return "missing"
    sync = contact_change_apply(connector, ContactChange(change["kind"], change["object_id"]))
    if sync.error_code == "rate_limited":
        raise RetryableSend(sync.error)
    return sync.status


@shared_task(ignore_result=True)
def directory_reconcile() -> int:
    """Beat, nightly: a full read of every connector with directory sync turned on."""
    return directory_reconcile_all()
