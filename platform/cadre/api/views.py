"""Error pages: JSON envelopes for API clients, console pages for people.

The 500 page touches nothing that can fail: no context processors (they ask the database for
the principal's memberships and navigation, and the principal may be an API key with none), no
database, and a fixed answer if even the template fails. What it must not do is raise: an
error page that raises escapes Django's handler, and the request's pooled connection was never
given back (issue 29).
"""

from __future__ import annotations

import logging
import sys

from django.http import HttpResponse
from django.shortcuts import render
from django.template import loader
from django.utils.translation import gettext as _

from cadre.api.errors import database_busy, database_busy_response, error_response

logger = logging.getLogger(__name__)

# Paths whose clients are programs (REST API, Mem0 and MemOS clients, SCIM provisioners, IM
# platforms): their errors are the JSON envelope, never an HTML page.
API_PREFIXES = ("/api/", "/mem0/", "/memos/", "/scim/", "/connectors/", "/mcp/")


def _is_api(request) -> bool:
    return request.path.startswith(API_PREFIXES)


def unknown_endpoint(request, rest: str = ""):
    return error_response(404, "not_found", _("No API endpoint at %s.") % request.path)


def _page(request, status: int, code: str, message: str):
    if _is_api(request):
        return error_response(status, code, message)
    return render(
        request, "errors/error.html", {"status": status, "message": message}, status=status
    )


def bad_request(request, exception=None):
    return _page(request, 400, "bad_request", _("The request could not be understood."))


def permission_denied(request, exception=None):
    return _page(request, 403, "permission_denied", _("You do not have access to this page."))


def not_found(request, exception=None):
    return _page(request, 404, "not_found", _("There is nothing here."))


def server_error(request):
    # A middleware that found the connection pool exhausted lands here (views' own errors are
    # answered by DatabaseBusyMiddleware): a bounded wait is 503, not a server error.
    if database_busy(sys.exc_info()[1]):
        return database_busy_response()
    message = _("Something went wrong on our side; it is logged.")
    if _is_api(request):
        return error_response(500, "server_error", message)
    try:
        # No `request=`: the template gets no context processors, so no actor, no member and
        # no shell; only the request object itself, for the CSP nonce of its script tag.
        page = loader.render_to_string(
            "errors/error.html", {"status": 500, "message": message, "request": request}
        )
    except Exception:
        logger.exception("The 500 page could not be rendered")
        return HttpResponse(message, status=500, content_type="text/plain; charset=utf-8")
    return HttpResponse(page, status=500)


def csrf_failure(request, reason: str = ""):
    return _page(
        request,
        403,
        "csrf_failed",
        _("The form expired or was sent from another site. Reload the page and try again."),
    )
