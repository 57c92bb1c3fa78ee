"""Outbound base: one HTTP client with retries (429/5xx, Retry-After) and access-token caching.

Each platform's ``transport.py`` subclasses `Transport`, says how to fetch a token, how to read
its API's error codes (`check`), and implements send/update. Tokens live in the shared cache
(Redis) with a TTL below their expiry, so every worker process reuses one token and a token the
platform reports invalid is dropped and fetched again once.

Every request goes through the outbound guard (cadre.outbound): an org admin chooses a
connector's `api_base_url` (a private deployment, a proxy), and a platform's answers name URLs
too (file downloads, DingTalk's sessionWebhook), so the client resolves each host, refuses
link-local and metadata addresses always and internal ones unless the platforms' allow-list
(CADRE_CONNECTOR_ALLOWED_HOSTS) names them, and connects to the address it checked.
"""

from __future__ import annotations

import email.utils
import hashlib
import logging
import os
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx
from django.core.cache import cache
from django.utils.translation import gettext as _

from cadre import outbound

if TYPE_CHECKING:
    from connectors.models import Connector

logger = logging.getLogger(__name__)

# The allow-list of the IM platforms' APIs (connectors' API base URLs, directory reads, file
# downloads, DingTalk sessionWebhooks, IM logins): the internal hosts they may reach anyway.
PLATFORM_APIS = outbound.CONNECTOR_APIS
TIMEOUT = 10.0

_clients_lock = threading.Lock()
_clients: dict[str, tuple[int, httpx.Client]] = {}


def shared_client(allow_setting: str = PLATFORM_APIS) -> httpx.Client:
    """One guarded HTTP client per process and allow-list (thread-safe, keeps connections
    alive): building one costs tens of milliseconds of CPU (TLS context), more than the rest of
    processing an event."""
    pid = os.getpid()
    held = _clients.get(allow_setting)
    if held is None or held[0] != pid:  # a forked worker builds its own
        with _clients_lock:
            held = _clients.get(allow_setting)
            if held is None or held[0] != pid:
                held = (pid, outbound.http_client(allow_setting=allow_setting, timeout=TIMEOUT))
                _clients[allow_setting] = held
    return held[1]


def check_api_url(url, *, allow_setting: str = PLATFORM_APIS, field: str = "api_base_url") -> str:
    """A platform API URL an admin configures, refused when saved (400 url_refused, under
    `settings.<field>`) when it is not http(s) or resolves to an address the guard refuses."""
    try:
        return outbound.check_url(url, allow_setting=allow_setting)
    except outbound.OutboundRefused as refused:
        raise outbound.OutboundRefused(
            refused.message, code=refused.code, details={"settings": {field: [refused.message]}}
        ) from None


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


class DestinationRefused(TransportError):
    """The outbound guard refused where a request was going: nothing was sent, and trying again
    sends nothing either (an admin has to change the URL or the allow-list)."""


def destination_refused(refused: outbound.OutboundRefused) -> DestinationRefused:
    return DestinationRefused(f"destination refused: {refused.message}")


class Transport:
    """Outbound API client of one connector."""

    platform = ""
    default_base_url = ""
    # Which allow-list the guarded client applies to this platform's destinations.
    allow_setting = PLATFORM_APIS
    max_attempts = 4
    backoff_base = 0.5  # seconds; doubled per attempt, with jitter
    backoff_max = 30.0
    # A Retry-After longer than this is not slept on in-process: the caller reschedules.
    max_inline_wait = 60.0
    token_margin = 300  # cache a token this many seconds less than its lifetime
    timeout = TIMEOUT

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
        # Tests pass a client bound to their fakes; everything else shares the guarded one.
        self.client = client or shared_client(self.allow_setting)
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
        """Profile of a platform user ({email, mobile, name}) for identity matching, and
        `locale` where the platform tells the user's language (Slack)."""
        return {}

    # --- tokens ---------------------------------------------------------------------------

    def credentials_probe(self) -> tuple[str, str]:
        """Call the platform's token or auth endpoint once, to test the stored credentials:
        (what was called, what it said). Raises TransportError."""
        self.fetch_token()  # Feishu tenant_access_token, WeCom gettoken, DingTalk accessToken
        return self.base_url, _("The platform issued an access token for these credentials.")

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
            except outbound.OutboundRefused as refused:
                raise destination_refused(refused) from None
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
