"""Outbound base: one HTTP client with retries (429/5xx, Retry-After) and access-token caching.

Each platform's ``transport.py`` subclasses `Transport`, says how to fetch a token, how to read
its API's error codes (`check`), and implements send/update. Tokens live in the shared cache
(Redis) with a TTL below their expiry, so every worker process reuses one token and a token the
platform reports invalid is dropped and fetched again once.
"""

from __future__ import annotations

import email.utils
import hashlib
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx
from django.core.cache import cache

if TYPE_CHECKING:
    from connectors.models import Connector

logger = logging.getLogger(__name__)


class TransportError(Exception):
    """A send failed. `retryable` says whether trying again later may help."""

    def __init__(
        self,
        message: str,
        *,
        retryable: bool = False,
        status: int | None = None,
        retry_after: float | None = None,
    ):
        super().__init__(message)
        self.retryable = retryable
        self.status = status
        self.retry_after = retry_after


class RateLimited(TransportError):
    def __init__(
        self,
        message: str = "rate limited",
        *,
        retry_after: float | None = None,
        status: int | None = 429,
    ):
        super().__init__(message, retryable=True, status=status, retry_after=retry_after)


class TokenInvalid(TransportError):
    """The platform rejected our access token: drop it from the cache and fetch a new one."""


@dataclass(frozen=True)
class Recipient:
    id: str
    type: str = "user"  # user, chat

    @classmethod
    def user(cls, user_id: str) -> Recipient:
        return cls(user_id, "user")

    @classmethod
    def chat(cls, chat_id: str) -> Recipient:
        return cls(chat_id, "chat")


@dataclass
class SendResult:
    message_id: str = ""
    raw: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict)  # what a later update needs (Slack channel, …)


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Retry-After as seconds: either a number of seconds or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)


class Transport:
    """Outbound API client of one connector."""

    platform = ""
    default_base_url = ""
    max_attempts = 4
    backoff_base = 0.5  # seconds; doubled per attempt, with jitter
    backoff_max = 30.0
    # A Retry-After longer than this is not slept on in-process: the caller reschedules.
    max_inline_wait = 60.0
    token_margin = 300  # cache a token this many seconds less than its lifetime
    timeout = 10.0

    def __init__(
        self,
        connector: Connector,
        *,
        credentials: dict | None = None,
        client: httpx.Client | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.connector = connector
        self.credentials = credentials if credentials is not None else connector.credentials
        self.settings = connector.settings or {}
        self.base_url = (self.settings.get("api_base_url") or self.default_base_url).rstrip("/")
        self.client = client or httpx.Client(timeout=self.timeout)
        self.sleep = sleep
        self.max_attempts = int(self.settings.get("max_attempts", self.max_attempts))
        self.backoff_base = float(self.settings.get("backoff_base", self.backoff_base))

    # --- the operations every platform offers (those it lacks raise NotImplementedError) --

    def send_text(self, to: Recipient, text: str, *, context: dict | None = None) -> SendResult:
        raise NotImplementedError

    def send_markdown(
        self, to: Recipient, markdown: str, *, title: str = "", context: dict | None = None
    ) -> SendResult:
        raise NotImplementedError

    def send_card(self, to: Recipient, card: dict, *, context: dict | None = None) -> SendResult:
        raise NotImplementedError

    def update_card(self, message_id: str, card: dict, *, extra: dict | None = None) -> SendResult:
        raise NotImplementedError

    def reply_in_thread(
        self, message_id: str, text: str, *, context: dict | None = None
    ) -> SendResult:
        raise NotImplementedError

    def lookup_user(self, user_id: str) -> dict:
        """Profile of a platform user ({email, mobile, name}) for identity matching."""
        return {}

    # --- tokens ---------------------------------------------------------------------------

    def fetch_token(self) -> tuple[str, int]:
        """(token, lifetime in seconds) from the platform; platforms without tokens keep this."""
        raise NotImplementedError

    def _token_cache_key(self) -> str:
        fingerprint = hashlib.sha256(repr(sorted(self.credentials.items())).encode()).hexdigest()[
            :16
        ]
        return f"connectors:token:{self.platform}:{self.connector.pk}:{fingerprint}"

    def access_token(self, *, refresh: bool = False) -> str:
        key = self._token_cache_key()
        if not refresh:
            token = cache.get(key)
            if token:
                return token
        token, lifetime = self.fetch_token()
        ttl = max(30, int(lifetime) - self.token_margin)
        cache.set(key, token, ttl)
        return token

    def forget_token(self) -> None:
        cache.delete(self._token_cache_key())

    # --- HTTP with retries ------------------------------------------------------------------

    def authorize(self, request_kwargs: dict, token: str) -> None:
        """Put the token on the request (header or query); platform-specific."""
        request_kwargs.setdefault("headers", {})["Authorization"] = f"Bearer {token}"

    def check(self, response: httpx.Response) -> dict:
        """Read a 2xx/4xx response body; raise TokenInvalid/RateLimited/TransportError."""
        if response.status_code >= 400:
            raise TransportError(
                f"HTTP {response.status_code}: {response.text[:200]}", status=response.status_code
            )
        try:
            return response.json()
        except ValueError:
            return {}

    def backoff(self, attempt: int) -> float:
        delay = min(self.backoff_max, self.backoff_base * (2 ** (attempt - 1)))
        return delay * (0.5 + random.random() / 2)

    def url(self, path: str) -> str:
        return path if path.startswith(("http://", "https://")) else f"{self.base_url}{path}"

    def call(self, method: str, path: str, *, auth: bool = True, **kwargs: Any) -> dict:
        """One API call: retries 429/5xx/network errors with backoff, refreshes a bad token once."""
        refreshed = False
        last_error: TransportError | None = None
        for attempt in range(1, self.max_attempts + 1):
            request_kwargs = {
                key: (dict(value) if isinstance(value, dict) else value)
                for key, value in kwargs.items()
            }
            if auth:
                self.authorize(request_kwargs, self.access_token())
            try:
                response = self.client.request(method, self.url(path), **request_kwargs)
            except httpx.TransportError as error:
                last_error = TransportError(f"network error: {error}", retryable=True)
                wait = self.backoff(attempt)
            else:
                if response.status_code == 429 or response.status_code >= 500:
                    retry_after = parse_retry_after(response.headers.get("Retry-After"))
                    last_error = (
                        RateLimited(retry_after=retry_after)
                        if response.status_code == 429
                        else TransportError(
                            f"HTTP {response.status_code}",
                            retryable=True,
                            status=response.status_code,
                            retry_after=retry_after,
                        )
                    )
                    wait = retry_after if retry_after is not None else self.backoff(attempt)
                else:
                    try:
                        return self.check(response)
                    except TokenInvalid as error:
                        if refreshed or not auth:
                            raise
                        refreshed = True
                        self.forget_token()
                        last_error = error
                        continue  # immediately, with a fresh token
                    except RateLimited as error:
                        last_error = error
                        wait = (
                            error.retry_after
                            if error.retry_after is not None
                            else self.backoff(attempt)
                        )
            if attempt == self.max_attempts:
                break
            if wait > self.max_inline_wait:
                break  # too long to hold a worker: let the task be rescheduled
            logger.info(
                "connectors: %s %s failed (%s); retry %d in %.2fs",
                method,
                path,
                last_error,
                attempt,
                wait,
            )
            self.sleep(wait)
        assert last_error is not None
        raise last_error
