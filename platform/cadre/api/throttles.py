"""API rate limits on the Redis cache: per API key, per signed-in user, per address for
anonymous traffic, and per address for failed authentication (see docs/api.md)."""

from __future__ import annotations

import time

from django.conf import settings
from django.core.cache import caches
from django.utils.translation import gettext as _
from rest_framework import throttling
from rest_framework.exceptions import Throttled

from cadre.env import parse_rate

THROTTLE_CACHE = "throttle"


def client_ip(request) -> str:
    """The client's address: REMOTE_ADDR, or behind a proxy (CADRE_BEHIND_PROXY) the address
    that proxy appended last to X-Forwarded-For; earlier entries are the client's to forge."""
    meta = getattr(request, "META", {})
    if settings.CADRE_BEHIND_PROXY:
        forwarded = meta.get("HTTP_X_FORWARDED_FOR", "")
        if forwarded.strip():
            return forwarded.split(",")[-1].strip()
    return meta.get("REMOTE_ADDR", "") or "unknown"


class _ConfiguredRateThrottle(throttling.SimpleRateThrottle):
    """Rates from settings.CADRE_API_THROTTLE_RATES, read per request (so tests can override
    them), in Cadre's rate syntax; history kept in the Redis "throttle" cache."""

    def __init__(self):
        self.cache = caches[THROTTLE_CACHE]
        self.rate = self.get_rate()
        self.num_requests, self.duration = self.parse_rate(self.rate)

    def get_rate(self):
        return settings.CADRE_API_THROTTLE_RATES[self.scope]

    def parse_rate(self, rate):
        return parse_rate(rate)

    def get_ident(self, request):
        return client_ip(request)


class ApiKeyRateThrottle(_ConfiguredRateThrottle):
    """Each API key's own budget (CADRE_API_RATE_KEY)."""

    scope = "api_key"

    def get_cache_key(self, request, view):
        key = getattr(request.user, "key", None)  # the API-key principal carries its key
        if key is None:
            return None
        return self.cache_format % {"scope": self.scope, "ident": key.pk}


class UserRateThrottle(_ConfiguredRateThrottle):
    """A signed-in console user's budget on the API (CADRE_API_RATE_USER)."""

    scope = "user"

    def get_cache_key(self, request, view):
        user = request.user
        if user is None or getattr(user, "pk", None) is None or not user.is_authenticated:
            return None
        return self.cache_format % {"scope": self.scope, "ident": user.pk}


class AnonymousRateThrottle(_ConfiguredRateThrottle):
    """Unauthenticated requests to public endpoints, per address (CADRE_API_RATE_ANON)."""

    scope = "anon"

    def get_cache_key(self, request, view):
        if request.user is not None and request.user.is_authenticated:
            return None
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}


class AuthFailureThrottle(_ConfiguredRateThrottle):
    """Requests refused 401 (no credentials, a wrong, revoked or expired key), per address
    (CADRE_API_RATE_AUTH_FAILURE). Once over the limit, every key presented from that address
    is refused 429 until the window passes, a valid one too: otherwise a guess that happens to
    be right would still tell itself apart."""

    scope = "auth_failure"

    def _key(self, request) -> str:
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}

    def _history(self, key: str) -> list[float]:
        now = time.time()
        return [moment for moment in self.cache.get(key, []) if moment > now - self.duration]

    def wait(self, request=None) -> float | None:
        """Seconds until the address may try again, or None when it is not blocked."""
        history = self._history(self._key(request))
        if len(history) < self.num_requests:
            return None
        return max(1.0, history[-self.num_requests] + self.duration - time.time())

    def record(self, request) -> None:
        key = self._key(request)
        history = [*self._history(key), time.time()][-self.num_requests :]
        self.cache.set(key, history, self.duration)


def refuse_if_auth_blocked(request) -> None:
    """Raise Throttled (429 + Retry-After) when the address is over its failed-auth limit."""
    wait = AuthFailureThrottle().wait(request)
    if wait is not None:
        raise Throttled(wait=wait, detail=blocked_message(wait))


def record_auth_failure(request) -> float | None:
    """Count one refused authentication, or, when the address is already over its limit,
    return the wait (and count nothing: refusals during the block do not extend it)."""
    throttle = AuthFailureThrottle()
    wait = throttle.wait(request)
    if wait is None:
        throttle.record(request)
    return wait


def blocked_message(wait: float) -> str:
    return _(
        "Too many failed authentication attempts from this address. "
        "Try again in %(seconds)s seconds."
    ) % {"seconds": int(wait + 0.999)}
