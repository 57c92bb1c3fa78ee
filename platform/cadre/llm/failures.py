"""What a failed model call says: the SDKs' errors turned into one plain sentence and a reason.

The openai and anthropic SDKs share the shape of their errors (a connection error, a timeout,
a status error with `status_code`), so one translation serves both adapters.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import httpx
import httpx2

# `_`: gettext, and the English text itself where Django is not set up.
from cadre.languages import gettext_or_message as _
from cadre.llm.base import ProviderError
from cadre.llm.reasons import (
    BAD_REQUEST,
    BAD_RESPONSE,
    MODEL_NOT_FOUND,
    RATE_LIMITED,
    REFUSED,
    SERVER_ERROR,
    TIMEOUT,
    UNAUTHORIZED,
    UNREACHABLE,
)
from cadre.outbound import OutboundRefused


def host_of(base_url: str, default: str) -> str:
    parts = urlsplit(base_url or default)
    return parts.netloc or parts.path or default


def _detail(error: Exception) -> str:
    body = getattr(error, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        message = inner.get("message") if isinstance(inner, dict) else inner
        if message:
            return str(message)
    return str(getattr(error, "message", "") or error)


def _root_cause(error: BaseException) -> str:
    cause = error
    while cause.__cause__ is not None or cause.__context__ is not None:
        cause = cause.__cause__ or cause.__context__
    text = str(cause)
    return text if text and cause is not error else ""


def _refusal(error: BaseException) -> OutboundRefused | None:
    """The guard's refusal the SDK wrapped (as a connection error), if that is the cause."""
    cause: BaseException | None = error
    for _depth in range(20):
        if cause is None:
            return None
        if isinstance(cause, OutboundRefused):
            return cause
        cause = cause.__cause__ or cause.__context__
    return None


def bad_response(host: str) -> ProviderError:
    """An endpoint that answered 2xx with something that is not the API's JSON."""
    return ProviderError(
        _(
            "%(host)s answered, but not as a model API does (not the expected JSON): "
            "check the base URL"
        )
        % {"host": host},
        reason=BAD_RESPONSE,
    )


def from_sdk(
    error: Exception, *, sdk, host: str, model: str, timeout: float | None = None
) -> ProviderError:
    """The ProviderError for an SDK exception (`sdk` is the openai or anthropic module)."""
    refusal = _refusal(error)
    if refusal is not None:
        return ProviderError(
            _("%(host)s: %(refusal)s") % {"host": host, "refusal": refusal.message}, reason=REFUSED
        )
    # A stream broken after its headers raises the HTTP client's own errors, not the SDK's
    # (httpx under openai, httpx2 under anthropic).
    if isinstance(error, sdk.APITimeoutError | httpx.TimeoutException | httpx2.TimeoutException):
        message = (
            _("timed out waiting for %(host)s after %(seconds)s s")
            % {"host": host, "seconds": f"{timeout:g}"}
            if timeout
            else _("timed out waiting for %(host)s") % {"host": host}
        )
        return ProviderError(message, reason=TIMEOUT)
    if isinstance(error, sdk.APIConnectionError | httpx.TransportError | httpx2.TransportError):
        cause = _root_cause(error)
        message = (
            _("could not reach host %(host)s (%(cause)s)") % {"host": host, "cause": cause}
            if cause
            else _("could not reach host %(host)s") % {"host": host}
        )
        return ProviderError(message, reason=UNREACHABLE)
    if isinstance(error, sdk.APIStatusError):
        return from_status(error.status_code, _detail(error), host=host, model=model)
    return ProviderError(_("%(host)s: %(error)s") % {"host": host, "error": error})


def from_status(status: int, detail: str, *, host: str, model: str) -> ProviderError:
    """The error for an HTTP status; `detail` (what the endpoint wrote) is in the message, never
    in the summary a connection test shows."""
    if status in (401, 403):
        summary = _("%(status)s from provider %(host)s: the API key was refused") % {
            "status": status,
            "host": host,
        }
        return ProviderError(
            f"{summary} ({detail})", reason=UNAUTHORIZED, status=status, summary=summary
        )
    if status == 404:
        summary = _("model not found: %(model)r at %(host)s") % {"model": model, "host": host}
        return ProviderError(
            f"{summary} ({detail})", reason=MODEL_NOT_FOUND, status=status, summary=summary
        )
    if status == 429:
        reason = RATE_LIMITED
    elif status >= 500:
        reason = SERVER_ERROR
    else:
        reason = BAD_REQUEST
    summary = _("%(status)s from provider %(host)s") % {"status": status, "host": host}
    return ProviderError(f"{summary}: {detail}", reason=reason, status=status, summary=summary)
