"""The one connector interface: what every platform folder implements, and the registry.

A platform folder (``connectors/<name>/``) exposes ``PLATFORM``, a `Platform` subclass: its
descriptor, saying everything Cadre knows of the platform (credentials and their labels, the
SDK extra, reply capabilities, its OAuth login). ``inbound.py`` holds verify/parse,
``transport.py`` the outbound API client, ``cards.py`` the confirmation card; the stages
(inbound, outbound, cards, directory) over this base reach a platform only through the
registry, which `ConnectorsConfig.ready()` fills once (connectors.platforms names them), so
adding a platform touches no other platform.
"""

from __future__ import annotations

import hmac
import importlib
import importlib.util
import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from cadre.ports import Registry

if TYPE_CHECKING:
    from connectors.base.transport import Transport
    from connectors.models import Connector


class SignatureInvalid(Exception):
    """The request is not from the platform (bad, missing or stale signature): answer 401."""


class PayloadInvalid(Exception):
    """The request is authentic but not something we can read: answer 400."""


@dataclass(frozen=True)
class Capabilities:
    cards: bool = False
    card_updates: bool = False
    threads: bool = False
    long_connection: bool = False
    file_messages: bool = False
    markdown: bool = True


@dataclass(frozen=True)
class InboundRequest:
    """The parts of an HTTP request a platform needs, independent of Django."""

    method: str
    headers: Mapping[str, str]  # lower-case names
    query: Mapping[str, str]
    body: bytes
    content_type: str = ""

    def header(self, name: str, default: str = "") -> str:
        return self.headers.get(name.lower(), default)


@dataclass
class Verified:
    """An authentic request, decrypted and decoded into `data`."""

    data: Any
    request: InboundRequest
    notes: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Reply:
    """What to answer the platform: status, body and content type."""

    status: int = 200
    body: bytes = b""
    content_type: str = "text/plain; charset=utf-8"
    headers: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def json(cls, data: Any, status: int = 200) -> Reply:
        return cls(status, json.dumps(data, ensure_ascii=False).encode(), "application/json")


@dataclass
class ParsedEvent:
    """One thing that happened on the platform, in Cadre's terms."""

    event_key: str  # the de-duplication key, unique per connector
    kind: str = "message"  # message, card_action, event
    sender_id: str = ""
    sender_name: str = ""
    sender_email: str = ""
    sender_mobile: str = ""
    # The sender's language as the event states it ("zh-CN"), where the platform sends one
    # (a webhook's `user.locale`): used when their member chose none.
    sender_locale: str = ""
    tenant_key: str = ""
    chat_id: str = ""
    chat_type: str = "p2p"  # p2p, group
    text: str = ""
    message_id: str = ""
    thread_ref: str = ""
    # Card actions: the button's value (carries the signed decision token).
    action: dict = field(default_factory=dict)
    # Reply context the worker needs (DingTalk session webhook, Slack response_url, …).
    context: dict = field(default_factory=dict)
    # Files and images sent with the message (connectors.base.attachments.Attachment dicts).
    attachments: list = field(default_factory=list)

    def payload(self) -> dict:
        data = {
            "text": self.text,
            "chat_type": self.chat_type,
            "message_id": self.message_id,
            "thread_ref": self.thread_ref,
            "sender_name": self.sender_name,
            "sender_email": self.sender_email,
            "sender_mobile": self.sender_mobile,
            "sender_locale": self.sender_locale,
            "tenant_key": self.tenant_key,
            "action": self.action,
            "context": self.context,
            "attachments": self.attachments,
        }
        return {key: value for key, value in data.items() if value}


@dataclass(frozen=True)
class SettingField:
    """A connector setting as the console asks for it."""

    name: str
    label: str
    help: str = ""
    choices: tuple[tuple[str, str], ...] = ()
    required: bool = False
    kind: str = "text"  # text, url, integer


@dataclass
class SetupGuide:
    """The values to paste into the platform's own console, and the steps around them."""

    values: list[tuple[str, str]] = field(default_factory=list)  # (name there, value)
    steps: list[str] = field(default_factory=list)
    lists: list[tuple[str, list[str]]] = field(default_factory=list)  # (title, items)


@dataclass(frozen=True)
class DecisionOutcome:
    """The synchronous answer to a confirmation-card click (shown to the person who clicked)."""

    accepted: bool
    message: str
    decision: str = ""


def text_field(data: Mapping, key: str, *, where: str = "") -> str:
    """A string (or integer) id or text of an authentic payload; "" when absent. Any other
    type is PayloadInvalid (400), not a TypeError deep in the worker."""
    value = data.get(key)
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise PayloadInvalid(f"{where}{key} must be a string")


def object_field(data: Mapping, key: str, *, where: str = "") -> dict:
    """A nested object of an authentic payload; {} when absent or empty, else PayloadInvalid."""
    value = data.get(key)
    if not value:
        return {}
    if not isinstance(value, dict):
        raise PayloadInvalid(f"{where}{key} must be an object")
    return value


def constant_time_equal(expected: str | bytes, given: str | bytes) -> bool:
    if isinstance(expected, str):
        expected = expected.encode()
    if isinstance(given, str):
        given = given.encode()
    return hmac.compare_digest(expected, given)


def check_freshness(
    timestamp: str, *, window: float, now: float | None = None, milliseconds: bool = False
) -> None:
    """Reject a timestamp outside ±window seconds of now (SignatureInvalid)."""
    try:
        value = float(timestamp)
    except (TypeError, ValueError):
        raise SignatureInvalid("missing or malformed timestamp") from None
    if not math.isfinite(value):  # float() reads "nan" and "inf", which compare as fresh
        raise SignatureInvalid("missing or malformed timestamp")
    if milliseconds:
        value /= 1000
    current = time.time() if now is None else now
    if abs(current - value) > window:
        raise SignatureInvalid("timestamp outside the accepted window")


class Platform:
    """Base class of a platform: one instance per request or task, bound to one connector."""

    name: ClassVar[str] = ""
    label: ClassVar[str] = ""
    capabilities: ClassVar[Capabilities] = Capabilities()
    # Secret names stored encrypted in Connector.credentials; required ones first.
    credential_fields: ClassVar[tuple[str, ...]] = ()
    optional_credential_fields: ClassVar[tuple[str, ...]] = ()
    # The platform console's own names for them: key → (label, where to find it there).
    credential_labels: ClassVar[Mapping[str, tuple[str, str]]] = {}
    setting_fields: ClassVar[tuple[str, ...]] = ()
    # The pip extra that installs the platform's SDK (long connection, stream mode): its
    # module, what it is used for (`cadre doctor`) and what is missing without it (console).
    extra: ClassVar[str] = ""
    extra_module: ClassVar[str] = ""
    extra_purpose: ClassVar[str] = ""
    extra_consequence: ClassVar[str] = "Some optional features are unavailable."
    # The mode in which events arrive over a connection Cadre opens itself, so no public URL
    # is needed ("" when the platform has none).
    outbound_mode: ClassVar[str] = ""
    # The module of the platform's folder whose `prepare(connector)` returns what holds that
    # connection (connectors_stream calls it, then the function it returns).
    stream_module: ClassVar[str] = ""
    # A direct message is answered in its chat (Slack's DM channel, a webhook's chat id), not
    # to the sender's user id.
    supports_direct_chat_replies: ClassVar[bool] = False
    # The platform's own OAuth login (a cadre.tenancy LoginProvider), registered for the
    # identity-provider kind of the platform's name; None: no login.
    login: ClassVar[Any] = None
    # Does the platform's user profile (`Transport.lookup_user`) tell the user's language
    # (`locale`)? Then a member who chose none in Cadre is written to in it.
    reports_locale: ClassVar[bool] = False
    # Can the acknowledgement itself show a card click's outcome (Feishu toast)? If not, a
    # refusal is sent as a notice by a task after the ack.
    ack_shows_decisions: ClassVar[bool] = True
    # Maximum request body accepted from the platform.
    max_body_bytes: ClassVar[int] = 256 * 1024
    # Response headers telling the platform not to deliver a refused request again.
    no_retry_headers: ClassVar[Mapping[str, str]] = {}

    def __init__(self, connector: Connector, *, credentials: dict | None = None):
        self.connector = connector
        self.credentials = credentials if credentials is not None else connector.credentials
        self.settings = connector.settings or {}

    # --- inbound --------------------------------------------------------------------------

    def verify(self, request: InboundRequest) -> Verified:
        """Authenticate and decode; raise SignatureInvalid or PayloadInvalid."""
        raise NotImplementedError

    def handshake(self, verified: Verified) -> Reply | None:
        """Answer a platform handshake (URL verification); None for an ordinary event."""
        return None

    def parse(self, verified: Verified) -> list[ParsedEvent]:
        raise NotImplementedError

    def event_key(self, verified: Verified) -> str:
        """The de-duplication key of the request's event (events may refine it)."""
        events = self.parse(verified)
        return events[0].event_key if events else ""

    def acknowledge(
        self,
        verified: Verified,
        events: list[ParsedEvent],
        decisions: Mapping[str, DecisionOutcome],
    ) -> Reply:
        """The fast answer after the events are stored."""
        return Reply(200, b"", "text/plain; charset=utf-8")

    # --- outbound -------------------------------------------------------------------------

    # Each platform package has `transport.py` (its `TRANSPORT` class) and `cards.py`
    # (`confirmation_card`, `decided_card`), and may have `files.py`, `directory.py`,
    # `console.py` and a stream runner: its parts, loaded when used.

    @classmethod
    def part(cls, name: str):
        """The module `name` of the platform's folder (ModuleNotFoundError when it has none)."""
        # lazy: heavy — a platform's parts load when first used, keeping the ack path lean
        # (and the folder imports this base, so the base finds them by name)
        return importlib.import_module(f"connectors.{cls.name}.{name}")

    @classmethod
    def has_part(cls, name: str) -> bool:
        return importlib.util.find_spec(f"connectors.{cls.name}.{name}") is not None

    def transport(self, **kwargs: Any) -> Transport:
        """The outbound client (kwargs go to `Transport`, e.g. a shared `client`)."""
        return self.part("transport").TRANSPORT(
            self.connector, credentials=self.credentials, **kwargs
        )

    def render_confirmation_card(self, card) -> dict:
        """The platform's card JSON for a confirmation (connectors.cards.decisions.CardContent)."""
        return self.part("cards").confirmation_card(card)

    def render_decided_card(self, card, *, decided_by: str, decision: str, decided_at) -> dict:
        return self.part("cards").decided_card(
            card, decided_by=decided_by, decision=decision, decided_at=decided_at
        )

    # --- configuration --------------------------------------------------------------------

    @classmethod
    def settings_checked(cls, settings: dict) -> dict:
        """The platform's own checks of a connector's settings when saved (a URL it will call),
        after the common ones; raises InvalidInput or OutboundRefused (400)."""
        return settings

    # --- console help ---------------------------------------------------------------------

    # A platform package may have `console.py`: `SETTINGS` (the settings the console asks
    # for) and `guide(connector, callback_url, mode)` (its `SetupGuide`).

    @classmethod
    def console_help(cls):
        """The platform's `console` module, or None when it has none."""
        return cls.part("console") if cls.has_part("console") else None

    @classmethod
    def setting_form(cls) -> tuple[SettingField, ...]:
        """The connector settings the console asks for, in order."""
        return getattr(cls.console_help(), "SETTINGS", ())

    @classmethod
    def setup_guide(cls, connector: Connector, callback_url: str, mode: str) -> SetupGuide:
        """The exact values for the platform's own console, for this connector."""
        guide = getattr(cls.console_help(), "guide", None)
        if guide is None:
            return SetupGuide(
                values=[("Callback URL", callback_url)], steps=[f"Callback URL: {callback_url}"]
            )
        return guide(connector, callback_url, mode)

    @classmethod
    def extra_installed(cls) -> bool:
        if not cls.extra_module:
            return True
        return importlib.util.find_spec(cls.extra_module) is not None


# Every platform by name: each platform folder's descriptor (its package's `PLATFORM`),
# registered once by `ConnectorsConfig.ready()` (connectors.platforms names them).
PLATFORMS: Registry[type[Platform]] = Registry("connector platforms")


def registry() -> dict[str, type[Platform]]:
    """Every registered platform, by name."""
    return dict(PLATFORMS.items())


def platform_for(connector: Connector, **kwargs) -> Platform:
    try:
        platform_class = registry()[connector.platform]
    except KeyError:
        raise LookupError(f"no connector platform named {connector.platform!r}") from None
    return platform_class(connector, **kwargs)
