"""The worker side: process a stored inbound event once, hand it to the agents runtime, reply.

`process_inbound_event` (run by the Celery task `connectors.tasks.inbound_message_received`)
claims the event with a conditional UPDATE, so a redelivered task or a second worker does
nothing. A message from a mapped member starts a run of the member's agent through the agents
runtime (`cadre.agents.runtime.services.run_start`, in a session per chat); the finished run's
reply goes back through `run_reply`. An unmapped sender gets a polite reply and lands in the
console queue.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.db.models import F, Q
from django.utils import timezone

from connectors import services
from connectors.base import ParsedEvent, platform_for
from connectors.models import Connector, InboundEvent, OutboundMessage
from connectors.transport import Recipient, TransportError

logger = logging.getLogger(__name__)

CLAIM_STALE_AFTER = timedelta(minutes=15)  # a claim older than this belongs to a dead worker


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
    )


def _agent_for(connector: Connector, member, chat_id: str):
    """The member's agent this connector serves: a bound deployment first, else one whose
    channels name the platform, else the member's first active agent."""
    from cadre.agents.models import Agent, Deployment

    agents = (
        Agent.objects.filter(
            member=member, status=Agent.Status.ACTIVE, organization_id=connector.organization_id
        )
        .exclude(deployment__status=Deployment.Status.STOPPED)
        .select_related("deployment")
    )
    bound = [
        b.deployment_id
        for b in connector.bindings.all()
        if b.deployment_id and (not b.chat_ids or chat_id in b.chat_ids)
    ]
    if bound:
        agent = agents.filter(deployment_id__in=bound).order_by("id").first()
        if agent is not None:
            return agent
    candidates = list(agents.order_by("id"))
    for agent in candidates:
        if connector.platform in (agent.deployment.channels or []):
            return agent
    return candidates[0] if candidates else None


def start_run(event: InboundEvent, member, message: ParsedEvent):
    """Hand the message to the agents runtime: one run in the chat's session. None: no agent."""
    from cadre.agents.models import Session
    from cadre.agents.runtime.services import run_start
    from cadre.tenancy.actors import system_actor

    connector = event.connector
    agent = _agent_for(connector, member, message.chat_id)
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
    return run_start(
        actor=actor, agent=agent, text=message.text, session=session, channel=connector.platform
    )


NO_AGENT_REPLY = (
    "Hello! You do not have an assistant on this channel yet. Please ask your "
    "administrator to set one up for you."
)


def process_inbound_event(event_id: int) -> str:
    """Process one stored event exactly once; returns the resulting status."""
    if not _claim(event_id):
        return "skipped"
    event = InboundEvent.objects.select_related("connector", "connector__organization").get(
        pk=event_id
    )
    connector = event.connector
    try:
        if event.kind == "card_action":
            from connectors.decisions import decision_apply

            outcome = decision_apply(event)
            if outcome.startswith("refused: "):
                reply_text(event, outcome.removeprefix("refused: "), key=f"refused:{event.pk}")
            _finish(event, InboundEvent.Status.PROCESSED)
            return event.status
        if event.kind != "message" or not event.sender_id:
            _finish(event, InboundEvent.Status.IGNORED)
            return event.status
        message = parsed(event)
        member = _resolve_sender(connector, message)
        if member is None:
            services.unmapped_record(connector, message)
            reply_text(event, services.UNMAPPED_REPLY, key=f"unmapped:{event.pk}")
            _finish(event, InboundEvent.Status.UNMAPPED)
            return event.status
        event.member = member
        run = start_run(event, member, message)
        if run is None:
            reply_text(event, NO_AGENT_REPLY, key=f"no-agent:{event.pk}")
            _finish(
                event,
                InboundEvent.Status.PROCESSED,
                member=member,
                error="no agent for this member",
            )
            return event.status
        _finish(event, InboundEvent.Status.PROCESSED, member=member, run_ref=str(run.pk))
        return event.status
    except TransportError as error:
        services.record_failure(connector, str(error))
        if error.retryable:
            InboundEvent.objects.filter(pk=event.pk).update(
                status=InboundEvent.Status.QUEUED, error=str(error)[:300]
            )
            raise
        _finish(event, InboundEvent.Status.FAILED, error=str(error))
        return event.status
    except Exception as error:
        services.record_failure(connector, f"{type(error).__name__}: {error}")
        _finish(event, InboundEvent.Status.FAILED, error=f"{type(error).__name__}: {error}")
        raise


def _resolve_sender(connector: Connector, message: ParsedEvent):
    member = services.identity_resolve(
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
        profile = platform_for(connector).transport().lookup_user(message.sender_id)
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
    return services.identity_resolve(
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
) -> OutboundMessage:
    """Send once per idempotency key (a retried task does not send twice) and log the result."""
    message, pending = services.outbound_claim(
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
    transport = platform_for(connector).transport()
    to = Recipient(recipient, recipient_type)
    try:
        if kind == "card":
            result = transport.send_card(to, body["card"], context=context)
        elif kind == "markdown":
            result = transport.send_markdown(
                to, body["text"], title=body.get("title", ""), context=context
            )
        elif thread_ref and platform_for(connector).capabilities.threads:
            result = transport.reply_in_thread(thread_ref, body["text"], context=context)
        else:
            result = transport.send_text(to, body["text"], context=context)
    except TransportError as error:
        services.outbound_mark(message, sent=False, error=str(error))
        raise
    services.outbound_mark(
        message, sent=True, platform_message_id=result.message_id, extra=result.extra
    )
    return message


def reply_text(
    event: InboundEvent, text: str, *, key: str, markdown: bool = False
) -> OutboundMessage:
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
    )


def deliver_reply(
    inbound_event_id: int, text: str, *, markdown: bool = False, key: str = ""
) -> OutboundMessage:
    """The runtime's way to answer a message it was handed (idempotent per key)."""
    event = InboundEvent.objects.select_related("connector").get(pk=inbound_event_id)
    return reply_text(event, text, markdown=markdown, key=key or f"reply:{event.pk}")


def confirmation_lookup(confirmation_id: str):
    """The confirmation by id: a runtime wait ("wait:<id>") or governance's confirmation."""
    from connectors.decisions import WAIT_PREFIX, wait_confirmation

    if confirmation_id.startswith(WAIT_PREFIX):
        return wait_confirmation(confirmation_id)
    try:
        from cadre.governance import confirmations
    except ImportError:
        return None
    getter = getattr(confirmations, "confirmation_get", None)
    return getter(confirmation_id) if getter is not None else None


def decision_refused_notice(event_id: int) -> None:
    event = InboundEvent.objects.select_related("connector").get(pk=event_id)
    message = parsed(event)
    text = event.error or "This button cannot be used."
    transport = platform_for(event.connector).transport()
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
    )


def run_reply(run_id: int) -> OutboundMessage | None:
    """Send a finished run's reply to the chat its message came from (once per run).

    Called by the agents runtime when a run started from a connector finishes (task
    `connectors.tasks.deliver_run_reply`).
    """
    from cadre.agents.models import Run

    event = InboundEvent.objects.filter(run_ref=str(run_id)).select_related("connector").first()
    if event is None:
        return None
    run = Run.objects.get(pk=run_id)
    if run.status == "completed":
        text = run.output.get("text", "")
    elif run.status in ("failed", "cancelled"):
        text = "Sorry, I could not finish that. Please try again later."
    else:
        return None
    if not text:
        return None
    return reply_text(event, text, key=f"run:{run_id}", markdown=False)
