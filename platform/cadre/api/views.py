"""Error pages: JSON envelopes under /api/, console pages elsewhere."""

from __future__ import annotations

import sys

from django.shortcuts import render

from cadre.api.errors import database_busy, database_busy_response, error_response


def _is_api(request) -> bool:
    return request.path.startswith("/api/")


def unknown_endpoint(request, rest: str = ""):
    return error_response(404, "not_found", f"No API endpoint at {request.path}.")


def _page(request, status: int, code: str, message: str):
    if _is_api(request):
        return error_response(status, code, message)
    return render(
        request, "errors/error.html", {"status": status, "message": message}, status=status
    )


def bad_request(request, exception=None):
    return _page(request, 400, "bad_request", "The request could not be understood.")


def permission_denied(request, exception=None):
    return _page(request, 403, "permission_denied", "You do not have access to this page.")


def not_found(request, exception=None):
    return _page(request, 404, "not_found", "There is nothing here.")


def server_error(request):
    # A middleware that found the connection pool exhausted lands here (views' own errors are
    # answered by DatabaseBusyMiddleware): a bounded wait is 503, not a server error.
    if database_busy(sys.exc_info()[1]):
        return database_busy_response()
    return _page(request, 500, "server_error", "Something went wrong on our side; it is logged.")


def csrf_failure(request, reason: str = ""):
    return _page(
        request,
        403,
        "csrf_failed",
        "The form expired or was sent from another site. Reload the page and try again.",
    )
