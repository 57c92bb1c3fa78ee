"""The worker side: process a claimed inbound event once, hand it to the agents runtime, reply.

A message from a mapped member starts a run of the member's agent through the agents runtime
(`cadre.agents.runtime.lifecycle.services.run_start`, in a session per chat), in the same
transaction that marks the event processed; the finished run's reply goes back through
`run_reply`. An unmapped sender gets a polite reply and lands in the console queue. Events are
claimed and drained in batches by `connectors.inbound.drain`.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from cadre.agents.runtime.records.delivery import FOLLOW_UP, Reply
from cadre.queues import enqueue
from connectors.base import ParsedEvent, identities, registry, services
from connectors.base.language import speaking_to
from connectors.base.transport import Transport, TransportError
from connectors.cards.decisions import decision_apply
from connectors.inbound.sessions import Batch, resolve_sender, start_run
from connectors.models import Delivery, InboundEvent
from connectors.outbound.sending import send, transport_for


def finish_event(event: InboundEvent, status: str, *, error: str = "", **fields) -> None:
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
        sender_locale=payload.get("sender_locale", ""),
        tenant_key=payload.get("tenant_key", ""),
        chat_type=payload.get("chat_type", "p2p"),
        text=payload.get("text", ""),
        message_id=payload.get("message_id", ""),
        thread_ref=payload.get("thread_ref", ""),
        action=payload.get("action", {}),
        context=payload.get("context", {}),
        attachments=payload.get("attachments", []),
    )


def _directory_changes(event: InboundEvent, changes: list) -> None:
    """A contact-change event: each change is applied by a task (it reads the platform)."""
    with transaction.atomic():
        finish_event(event, InboundEvent.Status.PROCESSED)
        for change in changes:
            if isinstance(change, dict) and change.get("kind") and change.get("object_id"):
                transaction.on_commit(
                    lambda change=change: enqueue(
                        "connectors.tasks.directory_change_apply",
                        event.connector_id,
                        {"kind": str(change["kind"]), "object_id": str(change["object_id"])},
                    )
                )


NO_AGENT_REPLY = gettext_lazy(
    "Hello! You do not have an assistant on this channel yet. Please ask your "
    "administrator to set one up for you."
)


def process_claimed(event: InboundEvent, batch: Batch) -> str:
    """The work on a claimed event. Raises a retryable TransportError (event left claimed) or
    any unexpected error (event marked failed)."""
    connector = event.connector
    try:
        if event.kind == "card_action":
            # The clicker is told why a decision was refused in their language.
            with speaking_to(event.member, organization=connector.organization):
                outcome = decision_apply(event)
            if outcome.startswith("refused: "):
                reply_text(
                    event,
                    outcome.removeprefix("refused: "),
                    key=f"refused:{event.pk}",
                    transport=batch.transport(connector),
                )
            finish_event(event, InboundEvent.Status.PROCESSED)
            return event.status
        changes = ((event.payload or {}).get("context") or {}).get("directory")
        if event.kind == "event" and changes and connector.settings.get("directory_sync"):
            _directory_changes(event, changes)
            return event.status
        if event.kind != "message" or not event.sender_id:
            batch.settle(event, InboundEvent.Status.IGNORED)
            return event.status
        message = parsed(event)
        member = resolve_sender(connector, message, batch)
        if member is None:
            # A stranger: the language their event states, else the organization's.
            with speaking_to(organization=connector.organization, locale=message.sender_locale):
                identities.unmapped_record(connector, message)
                unmapped_reply = str(identities.UNMAPPED_REPLY)
            reply_text(
                event,
                unmapped_reply,
                key=f"unmapped:{event.pk}",
                transport=batch.transport(connector),
            )
            batch.settle(event, InboundEvent.Status.UNMAPPED)
            return event.status
        event.member = member
        # The run and the event's "processed" commit together: a worker dying in between
        # leaves neither, so the event is claimed again and its run is started once. The row is
        # locked and read again first: a holder that was stuck past its claim (drain's
        # CLAIM_MAX_HOLD) finds the event finished by the drain that took it over, or the
        # other way round, so two holders never both start a run.
        with transaction.atomic():
            current = (
                InboundEvent.objects.select_for_update().only("status", "run_ref").get(pk=event.pk)
            )
            if current.status != InboundEvent.Status.PROCESSING or current.run_ref:
                return current.status
            run = start_run(event, member, message, batch)
            if run is not None:
                finish_event(
                    event, InboundEvent.Status.PROCESSED, member=member, run_ref=str(run.pk)
                )
        if run is None:
            with speaking_to(member):
                no_agent_reply = str(NO_AGENT_REPLY)
            reply_text(
                event,
                no_agent_reply,
                key=f"no-agent:{event.pk}",
                transport=batch.transport(connector),
            )
            batch.settle(event, InboundEvent.Status.PROCESSED, error="no agent for this member")
        return event.status
    except TransportError as error:
        services.record_failure(connector, str(error))
        if error.retryable:
            raise
        finish_event(event, InboundEvent.Status.FAILED, error=str(error))
        return event.status
    except Exception as error:
        services.record_failure(connector, f"{type(error).__name__}: {error}")
        finish_event(event, InboundEvent.Status.FAILED, error=f"{type(error).__name__}: {error}")
        raise


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
        platform = registry().get(event.connector.platform)
        if message.chat_id and platform is not None and platform.supports_direct_chat_replies:
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
    event = InboundEvent.objects.select_related(
        "connector", "connector__organization", "member"
    ).get(pk=event_id)
    message = parsed(event)
    if event.error:
        text = event.error  # told in the clicker's language when the click was refused
    else:
        with speaking_to(event.member, organization=event.connector.organization):
            text = _("This button cannot be used.")
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
    """Send a finished run's reply, or the notice of a run that ended without one, to the chat
    its message came from (once per run: a redelivered hand-off sends nothing more).

    The agents runtime hands it over when a run started from a connector finishes (through
    the delivery channel the connectors register, task `connectors.tasks.deliver_run_reply`);
    each platform's transport renders the text its own way.
    """
    event = (
        InboundEvent.objects.filter(run_ref=str(reply.run_id)).select_related("connector").first()
    )
    if event is None or not reply.text:
        return None
    key = f"run:{reply.run_id}"
    if reply.notice.startswith(FOLLOW_UP):  # a line after the reply: once per run and kind
        key = f"{key}:{reply.notice}"
    return reply_text(event, reply.text, key=key, markdown=False)
