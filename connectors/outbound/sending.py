"""Outbound: send a message once per idempotency key through the connector's transport, over
the process's shared guarded HTTP client (connectors.base.transport.shared_client)."""

from __future__ import annotations

from connectors.base import platform_for, registry, services
from connectors.base.transport import Recipient, Transport, TransportError
from connectors.models import Connector, Delivery


def transport_for(connector: Connector) -> Transport:
    return platform_for(connector).transport()


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
