"""Tracing, request context and structured logs.

OpenTelemetry is configured once per process (`configure_tracing`): spans for requests (Django
instrumentation), Celery tasks and, when exporting, SQL. Spans go to OTLP when
OTEL_EXPORTER_OTLP_ENDPOINT is set, to the console when CADRE_TRACE_CONSOLE is on, and nowhere
otherwise (trace ids still exist and are stored on audit events and in logs).
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import threading
import uuid
from dataclasses import dataclass

from opentelemetry import trace

_configured = threading.Lock()
_state = {"tracing": False, "celery": False}


@dataclass(frozen=True)
class RequestContext:
    request_id: str
    ip: str | None = None
    user_agent: str | None = None


_request_context: contextvars.ContextVar[RequestContext | None] = contextvars.ContextVar(
    "cadre_request_context", default=None
)


def current_request() -> RequestContext | None:
    return _request_context.get()


@contextlib.contextmanager
def bind_request_context(context: RequestContext):
    """Make `context` the current request's for audit, outside Django's middleware (the MCP
    edge)."""
    token = _request_context.set(context)
    try:
        yield context
    finally:
        _request_context.reset(token)


def current_trace_id() -> str:
    """The 32-hex trace id of the active span, or '' outside any trace."""
    context = trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else ""


def configure_tracing() -> None:
    from django.conf import settings

    with _configured:
        if _state["tracing"]:
            return
        _state["tracing"] = True
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

        provider = TracerProvider(
            resource=Resource.create({"service.name": settings.OTEL_SERVICE_NAME})
        )
        if settings.OTEL_EXPORTER_OTLP_ENDPOINT:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            endpoint = settings.OTEL_EXPORTER_OTLP_ENDPOINT.rstrip("/") + "/v1/traces"
            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
        if settings.CADRE_TRACE_CONSOLE:
            provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
        trace.set_tracer_provider(provider)

        from opentelemetry.instrumentation.django import DjangoInstrumentor

        DjangoInstrumentor().instrument(excluded_urls="healthz,readyz,static")
        if settings.OTEL_EXPORTER_OTLP_ENDPOINT:
            from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor

            PsycopgInstrumentor().instrument(enable_commenter=False)


def instrument_celery() -> None:
    with _configured:
        if _state["celery"]:
            return
        _state["celery"] = True
    configure_tracing()
    from opentelemetry.instrumentation.celery import CeleryInstrumentor

    CeleryInstrumentor().instrument()


def tracer():
    return trace.get_tracer("cadre")


def _client_ip(request) -> str | None:
    from django.conf import settings

    if settings.SECURE_PROXY_SSL_HEADER:  # behind a trusted proxy: take its forwarded address
        forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
        if forwarded:
            return forwarded.split(",")[0].strip()
    return request.META.get("REMOTE_ADDR")


class RequestContextMiddleware:
    """Gives each request an id (X-Request-ID in and out) and records its origin for audit."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        incoming = request.META.get("HTTP_X_REQUEST_ID", "")
        request_id = incoming if 8 <= len(incoming) <= 64 and incoming.isascii() else ""
        request_id = request_id or uuid.uuid4().hex
        context = RequestContext(
            request_id=request_id,
            ip=_client_ip(request),
            user_agent=request.META.get("HTTP_USER_AGENT", "")[:400] or None,
        )
        request.request_id = request_id
        token = _request_context.set(context)
        try:
            response = self.get_response(request)
        finally:
            _request_context.reset(token)
        response["X-Request-ID"] = request_id
        return response


class LogContextFilter(logging.Filter):
    """Adds trace_id and request_id to every log record."""

    def filter(self, record: logging.LogRecord) -> bool:
        context = _request_context.get()
        record.trace_id = current_trace_id()
        record.request_id = context.request_id if context else ""
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        payload = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "trace_id": getattr(record, "trace_id", ""),
            "request_id": getattr(record, "request_id", ""),
        }
        if record.exc_info:
            payload["exception"] = self.formatException(record.exc_info)
        return json.dumps(payload, ensure_ascii=False)
