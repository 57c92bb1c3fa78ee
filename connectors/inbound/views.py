"""The one inbound path: verify → parse → de-duplicate → store → acknowledge (drain on commit).

Two doors lead to it. In a served process, `InboundEdge` (mounted by `cadre.asgi` in front of
Django) answers `/connectors/<platform>/<public id>/events` straight from ASGI: the request
never enters Django's middleware stack (sessions, CSRF, auth, messages — none of which a
platform callback uses), and its work runs in a few long-lived threads that each keep one
database connection. `inbound` is the same route as a Django view (the test client, and any
server that does not mount the edge). Both call `inbound_handle`.

Nothing slow happens before the answer: a signature check, maybe an AES decryption, the
connector from an in-process cache, and one INSERT … ON CONFLICT DO NOTHING per event. A bad or
missing signature is 401 with the API error envelope (never a 500, unlike the Feishu SDK); a
body over the platform's limit is 413 before it is read in full. An authentic request that
cannot be read (fields of the wrong type, nesting too deep for the JSON parser) is 400
`invalid` — with the platform's "do not retry" header where it has one — and stores nothing;
503 means a dependency (database, Redis) is down and the platform should deliver again.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
import threading
import time
from collections.abc import Awaitable, Callable
from urllib.parse import parse_qsl

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse
from django.http.request import split_domain_port, validate_host
from django.views.decorators.csrf import csrf_exempt
from redis.exceptions import RedisError

from cadre.api.errors import envelope
from cadre.observability import tracer
from connectors.base import (
    DecisionOutcome,
    InboundRequest,
    PayloadInvalid,
    Reply,
    SignatureInvalid,
    registry,
    services,
)
from connectors.base.threadpool import ConnectionThreads
from connectors.inbound import drain
from connectors.inbound.store import inbound_store
from connectors.models import Connector

logger = logging.getLogger(__name__)


def _error(status: int, code: str, message: str, details: dict | None = None) -> Reply:
    return Reply.json(envelope(code, message, details), status=status)


def _not_found() -> Reply:
    return _error(404, "not_found", "No such connector.")


def _too_large(limit: int) -> Reply:
    return _error(
        413,
        "payload_too_large",
        f"The request body is larger than {limit} bytes.",
        {"limit": limit},
    )


# --- the connector and its decrypted credentials, cached per process -----------------------

CONNECTOR_CACHE_SECONDS = 5.0
_connectors: dict[tuple[str, str], tuple[float, Connector | None, dict]] = {}


def _connector(
    platform: str, public_id: str, *, reload: bool = False
) -> tuple[Connector, dict] | None:
    """The active connector and its decrypted credentials, cached in-process for a few
    seconds (saves a query and a decryption per event; disabling takes effect within that,
    a rotated secret at once: a signature failure on a cached entry reloads it)."""
    key = (platform, public_id)
    now = time.monotonic()
    hit = _connectors.get(key)
    if hit is not None and not reload and now - hit[0] < CONNECTOR_CACHE_SECONDS:
        return (hit[1], hit[2]) if hit[1] is not None else None
    connector = Connector.objects.filter(
        platform=platform, public_id=public_id, status=Connector.Status.ACTIVE
    ).first()
    credentials = connector.credentials if connector is not None else {}
    if len(_connectors) > 10_000:  # unknown ids probed at random must not grow it forever
        _connectors.clear()
    _connectors[key] = (now, connector, credentials)
    return (connector, credentials) if connector is not None else None


# --- the path both doors share ---------------------------------------------------------------


def inbound_handle(platform: str, public_id: str, request: InboundRequest) -> Reply:
    """Authenticate, parse and store one platform request; the answer to give it."""
    platform_class = registry().get(platform)
    if platform_class is None or request.method not in ("GET", "POST"):
        return _not_found()
    cached = _connector(platform, public_id)
    if cached is None:
        return _not_found()
    if len(request.body) > platform_class.max_body_bytes:
        return _too_large(platform_class.max_body_bytes)
    connector, credentials = cached
    adapter = platform_class(connector, credentials=credentials)
    try:
        try:
            verified = adapter.verify(request)
        except SignatureInvalid:
            # Maybe the credentials were rotated since this process cached them: reload once.
            fresh = _connector(platform, public_id, reload=True)
            if fresh is None or fresh[1] == credentials:
                raise
            connector, credentials = fresh
            adapter = platform_class(connector, credentials=credentials)
            verified = adapter.verify(request)
    except SignatureInvalid as error:
        services.record_signature_rejection(connector)
        logger.warning(
            "connectors: signature rejected for %s connector %s: %s", platform, connector.pk, error
        )
        return _error(
            401, "signature_invalid", "The request signature is missing, invalid or expired."
        )
    except PayloadInvalid as error:
        return _unreadable(adapter, f"Unreadable request: {error}")
    except RecursionError:
        return _unreadable(adapter, "Unreadable request: nested too deeply.")

    try:
        handshake = adapter.handshake(verified)
        if handshake is not None:
            return handshake
        events = adapter.parse(verified)
    except PayloadInvalid as error:
        return _unreadable(adapter, f"Unreadable event: {error}")
    except (TypeError, AttributeError, KeyError, ValueError, RecursionError) as error:
        # Parsing is a pure function of the authentic payload: whatever it trips on is the
        # payload's shape (a field of the wrong type), not a reason to make the platform retry.
        logger.warning("connectors: unreadable %s event: %r", platform, error)
        return _unreadable(adapter, "Unreadable event: a field has an unexpected type.")

    decisions: dict[str, DecisionOutcome] = {}
    if events:
        stored = inbound_store(connector, events, notify_refusals=not adapter.ack_shows_decisions)
        decisions = {item.event.event_key: item.decision for item in stored if item.decision}
    return adapter.acknowledge(verified, events, decisions)


def _unreadable(adapter, message: str) -> Reply:
    """400 `invalid` for an authentic request we cannot read, plus the platform's headers
    that stop redeliveries (an unreadable event stays unreadable)."""
    reply = _error(400, "invalid", message)
    headers = adapter.no_retry_headers
    return dataclasses.replace(reply, headers=dict(headers)) if headers else reply


# --- where the work runs: a few long-lived threads, each with its own connection ---------------

EDGE_THREADS = 4  # per process; each holds one database connection (settings override)

edge_threads = ConnectionThreads(
    "connectors-edge", lambda: getattr(settings, "CONNECTORS_EDGE_THREADS", EDGE_THREADS)
)


def _in_pool(platform: str, public_id: str, request: InboundRequest) -> Reply:
    deferred = None
    try:
        with (
            tracer().start_as_current_span(
                "connectors.inbound.store", attributes={"cadre.connector.platform": platform}
            ),
            drain.drain_requests_deferred() as deferred,
        ):
            return inbound_handle(platform, public_id, request)
    except (DatabaseError, RedisError, OSError) as error:
        # A dependency went away: answer 503 so the platform delivers again, and drop this
        # thread's connection so the next request reconnects.
        logger.exception("connectors: a dependency of the inbound path failed")
        if isinstance(error, DatabaseError):
            edge_threads.connection_lost()
        return _error(503, "unavailable", "Temporarily unavailable; deliver again later.")
    except Exception:
        # A bug, not an outage: 500, and the log says where.
        logger.exception("connectors: the inbound path failed")
        return _error(500, "internal_error", "The event could not be processed.")
    finally:
        if deferred is not None and deferred.wanted:
            _drain_soon()  # queued behind this job: the answer goes out first


# Asking the worker for a drain costs a Redis round trip (and, when none is waiting, a task
# publish). The edge does it after answering, once for all the requests of this process that
# committed events meanwhile: a request finding one already scheduled relies on it, since that
# job clears its mark before asking, so it asks after this request's commit.
_drain_soon_lock = threading.Lock()
_drain_soon_scheduled = False


def _drain_soon() -> None:
    global _drain_soon_scheduled
    with _drain_soon_lock:
        if _drain_soon_scheduled:
            return
        _drain_soon_scheduled = True
    edge_threads.submit(_drain_soon_job)


def _drain_soon_job() -> None:
    global _drain_soon_scheduled
    with _drain_soon_lock:
        _drain_soon_scheduled = False
    try:
        drain.drain_request()
    except Exception:
        # The events are stored; the periodic drain (Celery beat) processes them.
        logger.exception("connectors: could not request a drain of the inbound events")


def edge_threads_stop() -> None:
    """Close the edge threads' database connections (tests; the next request reopens)."""
    edge_threads.stop()


def _shared_threads() -> bool:
    return getattr(settings, "CONNECTORS_SHARED_THREADS", not settings.TESTING)


async def _handle_async(platform: str, public_id: str, request: InboundRequest) -> Reply:
    if _shared_threads():
        return await asyncio.wrap_future(
            edge_threads.submit(_in_pool, platform, public_id, request)
        )
    # Tests: the request's own thread and the test's transaction.
    return await sync_to_async(inbound_handle)(platform, public_id, request)


# --- door 1: the Django view -------------------------------------------------------------------


def _from_django(request: HttpRequest, body: bytes) -> InboundRequest:
    return InboundRequest(
        method=request.method or "GET",
        headers={name.lower(): value for name, value in request.headers.items()},
        query={key: request.GET.get(key, "") for key in request.GET},
        body=body,
        content_type=request.content_type or "",
    )


def _django_response(reply: Reply) -> HttpResponse:
    response = HttpResponse(reply.body, status=reply.status, content_type=reply.content_type)
    for name, value in reply.headers.items():
        response[name] = value
    return response


@csrf_exempt
async def inbound(request: HttpRequest, platform: str, public_id: str) -> HttpResponse:
    """The inbound route as a Django view (the edge answers it first when mounted)."""
    platform_class = registry().get(platform)
    if platform_class is not None:
        limit = platform_class.max_body_bytes
        length = request.META.get("CONTENT_LENGTH")
        if length and length.isdigit() and int(length) > limit:
            return _django_response(_too_large(limit))
        body = request.body
    else:
        body = b""
    reply = await _handle_async(platform, public_id, _from_django(request, body))
    return _django_response(reply)


# --- door 2: the ASGI edge -------------------------------------------------------------------

_ROUTE = re.compile(r"^/connectors/(?P<platform>[-a-zA-Z0-9_]+)/(?P<public_id>[^/]+)/events$")

ASGIApp = Callable[
    [dict, Callable[[], Awaitable[dict]], Callable[[dict], Awaitable[None]]], Awaitable[None]
]


class InboundEdge:
    """ASGI middleware: platform callbacks answered before Django, everything else passed on.

    What the edge keeps from the full stack: the Host check (ALLOWED_HOSTS), the body bound
    (Content-Length, then the bytes actually received), the error envelope, and a trace span.
    """

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: dict, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope["path"]
        root = scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root) :]
        match = _ROUTE.match(path)
        if match is None:
            return await self.app(scope, receive, send)
        reply = await self.handle(scope, receive, match["platform"], match["public_id"])
        await _send_reply(send, reply)

    async def handle(self, scope: dict, receive, platform: str, public_id: str) -> Reply:
        headers: dict[str, str] = {}
        for raw_name, raw_value in scope.get("headers", []):
            name, value = raw_name.decode("latin-1").lower(), raw_value.decode("latin-1")
            headers[name] = f"{headers[name]},{value}" if name in headers else value
        if not _host_allowed(headers):
            return _error(400, "invalid", "The Host header is not allowed.")
        platform_class = registry().get(platform)
        method = scope.get("method", "GET")
        if platform_class is None or method not in ("GET", "POST"):
            return _not_found()
        limit = platform_class.max_body_bytes
        length = headers.get("content-length", "")
        if length:
            if not length.isdigit():
                return _error(400, "invalid", "Content-Length is not a number.")
            if int(length) > limit:
                return _too_large(limit)
        body = await _read_body(receive, limit)
        if body is None:
            return _too_large(limit)
        request = InboundRequest(
            method=method,
            headers=headers,
            query=dict(parse_qsl(scope.get("query_string", b"").decode("latin-1"), True)),
            body=body,
            content_type=headers.get("content-type", "").split(";")[0].strip().lower(),
        )
        return await _handle_async(platform, public_id, request)


async def _read_body(receive, limit: int) -> bytes | None:
    """The request body, or None as soon as more than `limit` bytes arrived."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _host_allowed(headers: dict[str, str]) -> bool:
    """Django's own Host check (ALLOWED_HOSTS), which the full stack runs for every request."""
    if settings.USE_X_FORWARDED_HOST and "x-forwarded-host" in headers:
        host = headers["x-forwarded-host"].split(",")[-1].strip()
    else:
        host = headers.get("host", "")
    domain, _port = split_domain_port(host)
    allowed = settings.ALLOWED_HOSTS
    if settings.DEBUG and not allowed:
        allowed = [".localhost", "127.0.0.1", "[::1]"]
    return bool(domain) and validate_host(domain, allowed)


async def _send_reply(send, reply: Reply) -> None:
    headers = [
        (b"content-type", reply.content_type.encode("latin-1")),
        (b"content-length", str(len(reply.body)).encode()),
    ]
    headers += [
        (name.encode("latin-1"), value.encode("latin-1")) for name, value in reply.headers.items()
    ]
    await send({"type": "http.response.start", "status": reply.status, "headers": headers})
    await send({"type": "http.response.body", "body": reply.body})
