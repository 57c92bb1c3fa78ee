"""Limits on request bodies. Size (413), enforced on the bytes actually received, not on what
the client declares: an ASGI wrapper in front of Django, and Django middleware behind it for the
servers and test paths that do not mount the wrapper. Nesting (400): cadre.api.parsers.

`Content-Length` over the limit is refused before anything is read. A body without one
(`Transfer-Encoding: chunked`) is read at most to the limit, then refused (413) or handed to
Django with its real length. A body longer than its `Content-Length` never reaches a view: the
ASGI wrapper refuses it (400), and Django reads no more than the declared length.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Awaitable, Callable

from django.conf import settings
from django.core.handlers.wsgi import LimitedStream
from django.utils import translation
from django.utils.translation import gettext as _

from cadre.api.errors import envelope, error_response
from cadre.languages import browser_language, scope_language

# Paths with their own, larger limits (bundle uploads) register a prefix here.
BODY_LIMIT_OVERRIDES: dict[str, int] = {}

REPLAY_CHUNK = 64 * 1024

ASGIApp = Callable[
    [dict, Callable[[], Awaitable[dict]], Callable[[dict], Awaitable[None]]], Awaitable[None]
]


def body_limit_for(path: str) -> int:
    """The largest request body accepted at `path`, in bytes."""
    for prefix, limit in BODY_LIMIT_OVERRIDES.items():
        if path.startswith(prefix):
            return limit
    return settings.CADRE_MAX_BODY_BYTES


def _too_large(limit: int, size: int | None = None) -> tuple[int, str, str, dict]:
    if size is not None:
        message = _("The request body is %(size)s bytes; the limit is %(limit)s bytes.") % {
            "size": size,
            "limit": limit,
        }
    else:
        message = _(
            "The request body is larger than %(limit)s bytes; the limit is %(limit)s bytes."
        ) % {"limit": limit}
    return (413, "payload_too_large", message, {"limit": limit})


def _not_a_number() -> tuple[int, str, str, dict]:
    return (400, "invalid", _("Content-Length is not a number."), {})


def _longer_than_declared() -> tuple[int, str, str, dict]:
    return (400, "invalid", _("The request body is longer than its Content-Length."), {})


def _scope_language(scope: dict) -> str:
    """The language the browser asks for, from an ASGI scope (these answers come before
    Django, its sessions and the member: the switcher's cookie, Accept-Language, else the
    default)."""
    return scope_language(scope) or settings.LANGUAGE_CODE


class BodySizeLimitMiddleware:
    """Django's side: the declared length checked, the read bounded by it, and a body without
    one read at most to the limit (under WSGI or an ASGI server without the wrapper)."""

    # Kept as the registration point the apps use (`overrides[prefix] = limit`).
    overrides = BODY_LIMIT_OVERRIDES

    def __init__(self, get_response):
        self.get_response = get_response

    def limit_for(self, path: str) -> int:
        return body_limit_for(path)

    def __call__(self, request):
        limit = self.limit_for(request.path)
        length = request.META.get("CONTENT_LENGTH")
        if length:
            try:
                size = int(length)
            except ValueError:
                size = -1
            if size < 0:
                with translation.override(browser_language(request) or settings.LANGUAGE_CODE):
                    return error_response(*_not_a_number())
            if size > limit:
                with translation.override(browser_language(request) or settings.LANGUAGE_CODE):
                    return error_response(*_too_large(limit, size))
            # WSGI bounds the stream by the declared length; Django's ASGI request hands over
            # all it received. Either way nothing past the declared length is read.
            request._stream = LimitedStream(request._stream, size)
            return self.get_response(request)
        # No length declared: read at most one byte past the limit now, and give Django and DRF
        # the body with its real length (DRF reads a body only when a length is declared).
        body = request.read(limit + 1)
        if len(body) > limit:
            with translation.override(browser_language(request) or settings.LANGUAGE_CODE):
                return error_response(*_too_large(limit))
        request._body = body  # Django's cache of the body: .body, POST and FILES read from it
        if body:
            request.META["CONTENT_LENGTH"] = str(len(body))
        return self.get_response(request)


def _unusable_text(text: str) -> bool:
    """NUL (PostgreSQL stores none) or a lone surrogate (not a character; no text column or
    encoder takes it)."""
    if "\x00" in text:
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


class URLTextMiddleware:
    """A path or query string carrying NUL (`%00`) or a lone surrogate is a 400 before any
    view: otherwise each lookup that sends the text to PostgreSQL answered 500. SCIM answers
    these itself, in the error format identity providers read (cadre.tenancy.scim)."""

    own_answers = ("/scim/",)

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.path.startswith(self.own_answers):
            return self.get_response(request)
        if _unusable_text(request.path) or any(
            _unusable_text(key) or any(_unusable_text(value) for value in values)
            for key, values in request.GET.lists()
        ):
            with translation.override(browser_language(request) or settings.LANGUAGE_CODE):
                return error_response(
                    400,
                    "bad_request",
                    _("The URL contains a NUL character or a lone surrogate."),
                )
        return self.get_response(request)


class ASGIBodySizeLimit:
    """The ASGI edge in front of Django: the limit on the `http.request` chunks received.

    With a `Content-Length`: over the limit is 413 at once; otherwise the chunks stream through
    to Django, counted, and a body that turns out longer than declared is cut off (Django sees
    a disconnect) and answered 400. Without one (chunked): the body is received here, at most
    to the limit (spooled to disk past FILE_UPLOAD_MAX_MEMORY_SIZE, as Django does), then
    refused with 413 before Django sees any of it, or handed on with its real Content-Length.
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
        limit = body_limit_for(path)
        declared = {value for name, value in scope.get("headers", []) if name == b"content-length"}
        if not declared:
            return await self._chunked(scope, receive, send, limit)
        raw = next(iter(declared))
        if len(declared) > 1 or not raw.isdigit():
            with translation.override(_scope_language(scope)):
                answer = _not_a_number()
            return await _answer(send, *answer)
        size = int(raw)
        if size > limit:
            with translation.override(_scope_language(scope)):
                answer = _too_large(limit, size)
            return await _answer(send, *answer)
        return await self._counted(scope, receive, send, size)

    async def _counted(self, scope: dict, receive, send, size: int) -> None:
        state = {"received": 0, "over": False, "started": False}

        async def counted_receive() -> dict:
            if state["over"]:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                state["received"] += len(message.get("body", b""))
                if state["received"] > size:
                    state["over"] = True
                    return {"type": "http.disconnect"}
            return message

        async def tracked_send(message: dict) -> None:
            if message["type"] == "http.response.start":
                state["started"] = True
            await send(message)

        await self.app(scope, counted_receive, tracked_send)
        if state["over"] and not state["started"]:
            with translation.override(_scope_language(scope)):
                answer = _longer_than_declared()
            await _answer(send, *answer)

    async def _chunked(self, scope: dict, receive, send, limit: int) -> None:
        spool = tempfile.SpooledTemporaryFile(  # noqa: SIM115 - closed below
            max_size=settings.FILE_UPLOAD_MAX_MEMORY_SIZE, mode="w+b"
        )
        try:
            received = 0
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return  # the client left: nothing to answer, nothing handed on
                chunk = message.get("body", b"")
                received += len(chunk)
                if received > limit:
                    with translation.override(_scope_language(scope)):
                        answer = _too_large(limit)
                    return await _answer(send, *answer)
                spool.write(chunk)
                if not message.get("more_body", False):
                    break
            spool.seek(0)
            headers = [*scope.get("headers", []), (b"content-length", str(received).encode())]
            replay = {"done": False}

            async def replayed_receive() -> dict:
                if replay["done"]:
                    return await receive()  # after the body: the disconnect, when it comes
                chunk = spool.read(REPLAY_CHUNK)
                more = spool.tell() < received
                replay["done"] = not more
                return {"type": "http.request", "body": chunk, "more_body": more}

            await self.app({**scope, "headers": headers}, replayed_receive, send)
        finally:
            spool.close()


async def _answer(send, status: int, code: str, message: str, details: dict) -> None:
    body = json.dumps(envelope(code, message, details)).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
