"""One error envelope for every API error: {"error": {"code", "message", "details"}}."""

from __future__ import annotations

import contextlib
import json
import logging

import kombu.exceptions
import psycopg
import redis.exceptions
from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import connections
from django.http import Http404, HttpResponse, JsonResponse
from django.utils.translation import gettext as _
from psycopg_pool import PoolTimeout, TooManyRequests
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from cadre.api.database_pool import reclaim_abandoned
from cadre.api.throttles import blocked_message, record_auth_failure
from cadre.errors import CadreError
from cadre.llm import BudgetExceeded

logger = logging.getLogger(__name__)

_CODES = {
    400: "invalid",
    401: "not_authenticated",
    403: "permission_denied",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    429: "throttled",
}


def envelope(code: str, message: str, details: object | None = None) -> dict:
    return {"error": {"code": code, "message": message, "details": details or {}}}


def error_response(status_code: int, code: str, message: str, details=None) -> JsonResponse:
    return JsonResponse(envelope(code, message, details), status=status_code)


DATABASE_BUSY_RETRY_AFTER = 2  # seconds; a pool wait is bounded by DATABASE_POOL_TIMEOUT


def database_busy(exc: BaseException | None) -> bool:
    """Whether `exc` is a request that found no free connection in the database pool (Django
    wraps psycopg_pool's timeout in its own OperationalError)."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, PoolTimeout | TooManyRequests):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


SERVICE_UNAVAILABLE_RETRY_AFTER = 5  # seconds; a restarted PostgreSQL or Redis is back in a few

# SQLSTATE classes of a database that is not there (restarting, failed over, shutting down):
# 08 connection exception, 57P admin shutdown / crash shutdown / cannot connect now.
_DATABASE_DOWN_STATES = ("08", "57P")


def backend_unavailable(exc: BaseException | None) -> bool:
    """Whether `exc` is a request that found PostgreSQL or Redis unreachable (a restart, a
    failover): the client should retry, nothing about its request was wrong."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(
            exc,
            redis.exceptions.ConnectionError
            | redis.exceptions.TimeoutError
            | kombu.exceptions.OperationalError,
        ):
            return True
        if isinstance(exc, psycopg.OperationalError):
            state = getattr(exc, "sqlstate", None)
            return state is None or state.startswith(_DATABASE_DOWN_STATES)
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def backend_unavailable_response() -> JsonResponse:
    """503 with a code and Retry-After: the database or Redis could not be reached."""
    return _retry_later(
        "service_unavailable",
        _("The service is briefly unavailable; retry in a few seconds."),
        SERVICE_UNAVAILABLE_RETRY_AFTER,
    )


def unavailable_response(exc: BaseException | None) -> JsonResponse | None:
    """The 503 for a request that could not reach a backing service, else None."""
    if database_busy(exc):
        return database_busy_response()
    if backend_unavailable(exc):
        return backend_unavailable_response()
    return None


def database_busy_response() -> JsonResponse:
    """503 with a code and Retry-After: the database is up, every pooled connection is in use."""
    return _retry_later(
        "database_busy",
        _("Every database connection is in use; retry in a moment."),
        DATABASE_BUSY_RETRY_AFTER,
    )


def _retry_later(code: str, message: str, seconds: int) -> JsonResponse:
    response = error_response(503, code, message, {"retry_after": seconds})
    response["Retry-After"] = str(seconds)
    return response


class DatabaseBusyMiddleware:
    """The database edge of every request: what a request took it gives back, and a request
    that could not get a connection says so.

    - Before the request: connections that ended requests left checked out of the pool are
      given back (cadre.api.database_pool), so leaks cannot add up to an exhausted pool.
    - A view (or DRF's authentication in it) that waited DATABASE_POOL_TIMEOUT for a pooled
      connection answers 503 `database_busy` with Retry-After instead of a 500; one that
      found PostgreSQL or Redis unreachable (a restart) answers 503 `service_unavailable`.
    - An exception that escapes Django's own handling (an error handler that itself raised)
      answers a fixed 500 here: escaping further, past Django's ASGI handler, skips
      `request_finished`, the signal that gives the request's connection back.
    - A streamed body that fails mid-way gives the thread's connections back before the error
      goes on (Django's ASGI handler skips `request_finished` then too).
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        reclaim_abandoned()
        try:
            response = self.get_response(request)
        except Exception as error:
            logger.error(
                "Unhandled error on %s %s, past the error pages",
                request.method,
                request.path,
                exc_info=error,
            )
            response = unavailable_response(error) or last_resort_500()
        if response.streaming and not response.is_async:
            response.streaming_content = _closing_on_error(response.streaming_content)
        return response

    def process_exception(self, request, exception):
        return unavailable_response(exception)


def last_resort_500() -> HttpResponse:
    """A 500 built from constants: nothing in it can fail or touch the database."""
    message = "Something went wrong on our side; it is logged."
    with contextlib.suppress(Exception):  # the English constant stands
        message = _("Something went wrong on our side; it is logged.")
    return HttpResponse(
        json.dumps(envelope("server_error", message)),
        status=500,
        content_type="application/json",
    )


def _closing_on_error(chunks):
    """The chunks of a streamed body; if producing one fails, the thread's database
    connections go back to the pool before the error propagates. (Under ASGI a sync iterator
    is consumed on the request's thread, the one that holds its connection.)"""
    try:
        yield from chunks
    except Exception:
        connections.close_all()
        raise


def parse_error_from_recursion(exc: BaseException) -> exceptions.ParseError | None:
    """A RecursionError raised while a parser read the body (`[` x 50,000 is valid JSON up to
    the interpreter's nesting limit) is the client's malformed body: 400, not 500."""
    if not isinstance(exc, RecursionError):
        return None
    tb = exc.__traceback__
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if filename.endswith("rest_framework/parsers.py"):
            return exceptions.ParseError(
                _("The JSON body is nested too deeply."), code="parse_error"
            )
        tb = tb.tb_next
    return None


def _message_from(detail: object) -> str:
    if isinstance(detail, dict):
        for key, value in detail.items():
            text = _message_from(value)
            return text if key == "non_field_errors" else f"{key}: {text}"
        return _("Invalid input.")
    if isinstance(detail, list) and detail:
        return _message_from(detail[0])
    return str(detail)


def exception_handler(exc, context):
    if isinstance(exc, CadreError):
        response = Response(envelope(exc.code, str(exc.message), exc.details), status=exc.status)
        if exc.status == 429 and exc.details.get("retry_after") is not None:
            response["Retry-After"] = str(int(exc.details["retry_after"]))
        return response
    if isinstance(exc, BudgetExceeded):
        # A hard budget refused a model call the request needed: nothing was sent.
        return Response(
            envelope(exc.code, str(exc.message), exc.details),
            status=status.HTTP_429_TOO_MANY_REQUESTS,
        )
    if isinstance(exc, RequestDataTooBig):
        return Response(
            envelope("payload_too_large", _("The request body is larger than allowed.")),
            status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        )
    exc = parse_error_from_recursion(exc) or exc
    if isinstance(exc, DjangoValidationError):
        exc = exceptions.ValidationError(
            exc.message_dict if hasattr(exc, "error_dict") else {"non_field_errors": exc.messages}
        )
    if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
        # Every refused authentication counts against the caller's address; once over the
        # limit the answer is 429 until the window passes (cadre.api.throttles).
        request = context.get("request")
        wait = record_auth_failure(request) if request is not None else None
        if wait is not None:
            exc = exceptions.Throttled(wait=wait, detail=blocked_message(wait))
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()

    response = drf_exception_handler(exc, context)
    if response is None:
        return None  # a real server error: let Django log it and answer 500
    detail = response.data
    if isinstance(exc, exceptions.ValidationError):
        code, message, details = "invalid", _message_from(detail), detail
    else:
        raw = getattr(exc, "detail", None)
        code = getattr(raw, "code", None) or _CODES.get(response.status_code, "error")
        message = str(raw) if raw is not None else response.status_text
        details = {}
        if isinstance(exc, exceptions.Throttled) and exc.wait is not None:
            details = {"retry_after": int(exc.wait)}
    response.data = envelope(code or _CODES.get(response.status_code, "error"), message, details)
    return response
