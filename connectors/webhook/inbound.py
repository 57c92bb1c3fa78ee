"""Webhook inbound: `X-Cadre-Signature: v1=hex(HMAC-SHA256(secret, f"{timestamp}." + body))`.

`X-Cadre-Timestamp` is Unix seconds and must be within the freshness window (5 minutes by
default); the body is a JSON event with an `event_id` that de-duplicates redeliveries.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping

from django.utils.translation import gettext_lazy

from cadre import outbound
from connectors.base import (
    Capabilities,
    DecisionOutcome,
    InboundRequest,
    ParsedEvent,
    PayloadInvalid,
    Platform,
    Reply,
    SignatureInvalid,
    Verified,
    check_freshness,
    constant_time_equal,
    object_field,
    text_field,
)

SIGNATURE_HEADER = "X-Cadre-Signature"
TIMESTAMP_HEADER = "X-Cadre-Timestamp"
EVENT_ID_HEADER = "X-Cadre-Event-Id"


def sign(secret: str, timestamp: str, body: bytes) -> str:
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"v1={digest.hexdigest()}"


def callback_url_checked(url) -> str:
    """A webhook connector's callback URL, refused (400 webhook_url_refused) when it is not
    http(s) or resolves to an internal address — the alert webhooks' SSRF guard, with its own
    allow-list (CADRE_CONNECTOR_WEBHOOK_ALLOWED_HOSTS). Checked again at every send."""
    try:
        return outbound.check_url(
            url, allow_setting=outbound.CONNECTOR_WEBHOOKS, code=outbound.WEBHOOK_URL_REFUSED
        )
    except outbound.OutboundRefused as refused:
        raise outbound.OutboundRefused(
            refused.message,
            code=refused.code,
            details={"settings": {"callback_url": [refused.message]}},
        ) from None


class WebhookPlatform(Platform):
    name = "webhook"
    label = "Webhook"
    capabilities = Capabilities(cards=True, card_updates=True, threads=True, markdown=True)
    credential_fields = ("signing_secret",)
    optional_credential_fields = ("callback_secret",)
    credential_labels = {
        "signing_secret": (
            gettext_lazy("Signing secret"),
            gettext_lazy("The sending system signs every event with it. Use a long random value."),
        ),
        "callback_secret": (
            gettext_lazy("Callback signing secret"),
            gettext_lazy(
                "Cadre signs replies to your callback URL with it (default: the signing secret)."
            ),
        ),
    }
    supports_direct_chat_replies = True
    setting_fields = ("callback_url", "tolerance_seconds")

    @classmethod
    def settings_checked(cls, settings: dict) -> dict:
        if settings.get("callback_url"):
            settings["callback_url"] = callback_url_checked(settings["callback_url"])
        return settings

    def verify(self, request: InboundRequest) -> Verified:
        if request.method != "POST":
            raise PayloadInvalid("POST a JSON event")
        timestamp = request.header(TIMESTAMP_HEADER)
        signature = request.header(SIGNATURE_HEADER)
        if not timestamp or not signature:
            raise SignatureInvalid("missing signature headers")
        check_freshness(timestamp, window=float(self.settings.get("tolerance_seconds", 300)))
        expected = sign(self.credentials["signing_secret"], timestamp, request.body)
        if not constant_time_equal(expected, signature):
            raise SignatureInvalid("signature mismatch")
        try:
            data = json.loads(request.body)
        except (ValueError, RecursionError):
            raise PayloadInvalid("body is not JSON") from None
        if not isinstance(data, dict):
            raise PayloadInvalid("body must be a JSON object")
        return Verified(data, request)

    def parse(self, verified: Verified) -> list[ParsedEvent]:
        data = verified.data
        event_id = text_field(data, "event_id") or verified.request.header(EVENT_ID_HEADER)
        if not event_id:
            raise PayloadInvalid("event_id is required")
        user = object_field(data, "user")
        chat = object_field(data, "chat")
        kind = "card_action" if data.get("type") == "card_action" else "message"
        if data.get("type") not in (None, "message", "card_action"):
            kind = "event"
        return [
            ParsedEvent(
                event_key=event_id,
                kind=kind,
                sender_id=text_field(user, "id", where="user."),
                sender_name=text_field(user, "name", where="user."),
                sender_email=text_field(user, "email", where="user."),
                sender_mobile=text_field(user, "mobile", where="user."),
                sender_locale=text_field(user, "locale", where="user.")[:35],
                chat_id=text_field(chat, "id", where="chat."),
                chat_type="group" if chat.get("type") == "group" else "p2p",
                text=text_field(data, "text"),
                message_id=text_field(data, "message_id"),
                thread_ref=text_field(data, "thread_id"),
                action=data.get("action") if isinstance(data.get("action"), dict) else {},
            )
        ]

    def acknowledge(
        self,
        verified: Verified,
        events: list[ParsedEvent],
        decisions: Mapping[str, DecisionOutcome],
    ) -> Reply:
        body: dict = {"ok": True}
        for outcome in decisions.values():
            body["decision"] = {"accepted": outcome.accepted, "message": outcome.message}
        return Reply.json(body)
