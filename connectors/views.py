"""The one inbound view: verify → parse → de-duplicate → store → acknowledge (enqueue on commit).

Nothing slow happens before the answer: a signature check, maybe an AES decryption, one
indexed lookup of the connector and one INSERT … ON CONFLICT DO NOTHING per event. A bad or
missing signature is 401 with the API error envelope (never a 500, unlike the Feishu SDK).
"""

from __future__ import annotations

import logging
import time

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt

from cadre.api.errors import error_response
from connectors import services
from connectors.base import (
    DecisionOutcome,
    InboundRequest,
    PayloadInvalid,
    Reply,
    SignatureInvalid,
    registry,
)
from connectors.models import Connector

logger = logging.getLogger(__name__)


def _as_inbound(request: HttpRequest, body: bytes) -> InboundRequest:
    headers = {name.lower(): value for name, value in request.headers.items()}
    query = {key: request.GET.get(key, "") for key in request.GET}
    return InboundRequest(
        method=request.method or "GET",
        headers=headers,
        query=query,
        body=body,
        content_type=request.content_type or "",
    )


def _response(reply: Reply) -> HttpResponse:
    response = HttpResponse(reply.body, status=reply.status, content_type=reply.content_type)
    for name, value in reply.headers.items():
        response[name] = value
    return response


def _read_body(request: HttpRequest, limit: int) -> bytes | None:
    """The body, or None when it is larger than `limit` (checked before and after reading)."""
    length = request.META.get("CONTENT_LENGTH")
    if length and length.isdigit() and int(length) > limit:
        return None
    body = request.body
    return None if len(body) > limit else body


CONNECTOR_CACHE_SECONDS = 5.0
_connectors: dict[tuple[str, str], tuple[float, Connector | None, dict]] = {}


def _connector(
    platform: str, public_id: str, *, reload: bool = False
) -> tuple[Connector, dict] | None:
    """The active connector and its decrypted credentials, cached in-process for a few
    seconds (saves a query and a decryption per event; disabling takes effect within that)."""
    key = (platform, public_id)
    now = time.monotonic()
    hit = _connectors.get(key)
    if hit is not None and not reload and now - hit[0] < CONNECTOR_CACHE_SECONDS:
        return (hit[1], hit[2]) if hit[1] is not None else None
    connector = Connector.objects.filter(
        platform=platform, public_id=public_id, status=Connector.Status.ACTIVE
    ).first()
    credentials = connector.credentials if connector is not None else {}
    if len(_connectors) > 10_000:
        _connectors.clear()
    _connectors[key] = (now, connector, credentials)
    return (connector, credentials) if connector is not None else None


def _shared_threads() -> bool:
    return getattr(settings, "CONNECTORS_SHARED_THREADS", not settings.TESTING)


@csrf_exempt
async def inbound(request: HttpRequest, platform: str, public_id: str) -> HttpResponse:
    """Under ASGI, Django gives every sync request a thread of its own, and with it a new
    database connection that is never reused. The ack path instead runs in the shared
    executor's few long-lived threads, each keeping one connection (CONN_MAX_AGE) — bounded
    connections, no connect per request. Tests (one connection, one transaction) stay on the
    request's thread."""
    if _shared_threads():
        return await sync_to_async(_inbound_in_pool, thread_sensitive=False)(
            request, platform, public_id
        )
    return await sync_to_async(inbound_sync)(request, platform, public_id)


def _inbound_in_pool(request: HttpRequest, platform: str, public_id: str) -> HttpResponse:
    close_old_connections()  # what request_started does for a request's own thread
    return inbound_sync(request, platform, public_id)


def inbound_sync(request: HttpRequest, platform: str, public_id: str) -> HttpResponse:
    platform_class = registry().get(platform)
    if platform_class is None or request.method not in ("GET", "POST"):
        return error_response(404, "not_found", "No such connector.")
    cached = _connector(platform, public_id)
    if cached is None:
        return error_response(404, "not_found", "No such connector.")
    connector, credentials = cached
    body = _read_body(request, platform_class.max_body_bytes)
    if body is None:
        return error_response(
            413,
            "payload_too_large",
            f"The request body is larger than {platform_class.max_body_bytes} bytes.",
            {"limit": platform_class.max_body_bytes},
        )
    inbound_request = _as_inbound(request, body)
    adapter = platform_class(connector, credentials=credentials)
    try:
        try:
            verified = adapter.verify(inbound_request)
        except SignatureInvalid:
            # Maybe the credentials were rotated since this process cached them: reload once.
            fresh = _connector(platform, public_id, reload=True)
            if fresh is None or fresh[1] == credentials:
                raise
            connector, credentials = fresh
            adapter = platform_class(connector, credentials=credentials)
            verified = adapter.verify(inbound_request)
    except SignatureInvalid as error:
        services.record_signature_rejection(connector)
        logger.warning(
            "connectors: signature rejected for %s connector %s: %s", platform, connector.pk, error
        )
        return error_response(
            401, "signature_invalid", "The request signature is missing, invalid or expired."
        )
    except PayloadInvalid as error:
        return error_response(400, "invalid", f"Unreadable request: {error}")

    handshake = adapter.handshake(verified)
    if handshake is not None:
        return _response(handshake)
    try:
        events = adapter.parse(verified)
    except PayloadInvalid as error:
        return error_response(400, "invalid", f"Unreadable event: {error}")

    decisions: dict[str, DecisionOutcome] = {}
    if events:
        stored = services.inbound_store(
            connector, events, notify_refusals=not adapter.ack_shows_decisions
        )
        decisions = {item.event.event_key: item.decision for item in stored if item.decision}
    return _response(adapter.acknowledge(verified, events, decisions))
