"""Reject request bodies over the configured size before anything reads them (413)."""

from __future__ import annotations

from django.conf import settings

from cadre.api.errors import error_response


class BodySizeLimitMiddleware:
    # Paths with their own, larger limits (bundle uploads) register a prefix here.
    overrides: dict[str, int] = {}

    def __init__(self, get_response):
        self.get_response = get_response

    def limit_for(self, path: str) -> int:
        for prefix, limit in self.overrides.items():
            if path.startswith(prefix):
                return limit
        return settings.CADRE_MAX_BODY_BYTES

    def __call__(self, request):
        length = request.META.get("CONTENT_LENGTH")
        if length:
            try:
                size = int(length)
            except ValueError:
                return error_response(400, "invalid", "Content-Length is not a number.")
            limit = self.limit_for(request.path)
            if size > limit:
                return error_response(
                    413,
                    "payload_too_large",
                    f"The request body is {size} bytes; the limit is {limit} bytes.",
                    {"limit": limit},
                )
        return self.get_response(request)
