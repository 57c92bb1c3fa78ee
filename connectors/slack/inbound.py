"""Slack inbound: v0 signing (5-minute window), url_verification, events, block_actions.

Uses `slack_sdk.signature.SignatureVerifier` when the `slack` extra is installed, else the same
computation here (HMAC-SHA256 of "v0:{timestamp}:{body}", constant-time comparison). Messages
de-duplicate on channel + ts, which covers Slack's retries (X-Slack-Retry-Num, same event id)
and the app_mention + message pair Slack sends for one mention.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from urllib.parse import parse_qs

from django.utils.translation import gettext_lazy

from connectors.base import (
    Capabilities,
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
from connectors.base.attachments import Attachment, file_messages_enabled, with_attachments

WINDOW = 60 * 5

try:  # the optional extra: cadre[slack]
    from slack_sdk.signature import SignatureVerifier
except ImportError:  # pragma: no cover - exercised when the extra is absent
    SignatureVerifier = None


def v0_signature(signing_secret: str, timestamp: str, body: bytes) -> str:
    base = b"v0:" + timestamp.encode() + b":" + body
    return "v0=" + hmac.new(signing_secret.encode(), base, hashlib.sha256).hexdigest()


def signature_valid(
    signing_secret: str, timestamp: str, body: bytes, signature: str, *, now: float | None = None
) -> bool:
    try:
        int(timestamp)  # whole seconds, as Slack sends them and slack_sdk's verifier reads them
        # float() reads 400 digits as infinity, which check_freshness refuses; int - float
        # would raise OverflowError instead.
        check_freshness(timestamp, window=WINDOW, now=now)
    except (TypeError, ValueError, SignatureInvalid):
        return False
    if SignatureVerifier is not None and now is None:
        return SignatureVerifier(signing_secret).is_valid(body, timestamp, signature)
    return constant_time_equal(v0_signature(signing_secret, timestamp, body), signature)


class SlackPlatform(Platform):
    name = "slack"
    label = "Slack"
    capabilities = Capabilities(
        cards=True, card_updates=True, threads=True, long_connection=False, file_messages=True
    )
    credential_fields = ("bot_token", "signing_secret")
    credential_labels = {
        "bot_token": (
            "Bot User OAuth Token",
            gettext_lazy("OAuth & Permissions → Bot User OAuth Token (xoxb-…)."),
        ),
        "signing_secret": (
            "Signing Secret",
            gettext_lazy("Basic Information → App Credentials."),
        ),
    }
    ack_shows_decisions = False
    reports_locale = True  # users.info include_locale=true
    setting_fields = ("api_base_url", "team_id")
    extra = "slack"
    extra_module = "slack_sdk"
    extra_purpose = "Slack"
    extra_consequence = gettext_lazy(
        "Nothing is lost: Cadre verifies Slack signatures itself without it."
    )
    supports_direct_chat_replies = True
    no_retry_headers = {"X-Slack-No-Retry": "1"}

    def verify(self, request: InboundRequest) -> Verified:
        if request.method != "POST":
            raise PayloadInvalid("Slack posts events")
        timestamp = request.header("X-Slack-Request-Timestamp")
        signature = request.header("X-Slack-Signature")
        if not timestamp or not signature:
            raise SignatureInvalid("missing Slack signature headers")
        if not signature_valid(
            self.credentials["signing_secret"], timestamp, request.body, signature
        ):
            raise SignatureInvalid("bad or stale Slack signature")
        try:
            if request.content_type == "application/x-www-form-urlencoded":
                form = parse_qs(request.body.decode())
                data = json.loads(form.get("payload", ["{}"])[0])
            else:
                data = json.loads(request.body)
        except (ValueError, UnicodeDecodeError, RecursionError):
            raise PayloadInvalid("body is neither JSON nor a form payload") from None
        if not isinstance(data, dict):
            raise PayloadInvalid("payload must be an object")
        return Verified(data, request, {"retry": request.header("X-Slack-Retry-Num")})

    def handshake(self, verified: Verified) -> Reply | None:
        if verified.data.get("type") == "url_verification":
            return Reply.json({"challenge": verified.data.get("challenge", "")})
        return None

    def parse(self, verified: Verified) -> list[ParsedEvent]:
        data = verified.data
        kind = data.get("type")
        team = (
            text_field(data["team"], "id", where="team.")
            if isinstance(data.get("team"), dict)
            else text_field(data, "team_id")
        )
        if kind == "block_actions":
            return self._parse_actions(data, team)
        if kind != "event_callback":
            return []
        event = object_field(data, "event")
        event_id = text_field(data, "event_id")
        if not event_id:
            raise PayloadInvalid("event_id is missing")
        team = team or text_field(data, "team_id")
        event_type = text_field(event, "type", where="event.")
        is_user_message = (
            event_type in ("message", "app_mention")
            and not event.get("bot_id")
            and event.get("subtype") in (None, "file_share")
            and text_field(event, "user", where="event.")
        )
        if not is_user_message:
            return [
                ParsedEvent(
                    event_key=event_id,
                    kind="event",
                    tenant_key=team,
                    context={"event_type": event_type},
                )
            ]
        channel = text_field(event, "channel", where="event.")
        ts = text_field(event, "ts", where="event.")
        direct = event.get("channel_type") == "im"
        text = _strip_mentions(text_field(event, "text", where="event."))
        files = []
        if event.get("files") and not isinstance(event["files"], list):
            raise PayloadInvalid("event.files must be a list")
        if event.get("files"):
            if file_messages_enabled(self):
                files = [
                    Attachment.of(
                        "image" if str(item.get("mimetype", "")).startswith("image/") else "file",
                        item.get("id", ""),
                        name=item.get("name") or item.get("title", ""),
                        size=item.get("size", 0),
                        mime=item.get("mimetype", ""),
                        url=item.get("url_private_download") or item.get("url_private", ""),
                    )
                    for item in event["files"]
                    if isinstance(item, dict) and item.get("id")
                ]
            elif not text:  # only files, and this connector does not take them
                return [ParsedEvent(event_key=f"msg:{channel}:{ts}", kind="event")]
        return [
            ParsedEvent(
                event_key=f"msg:{channel}:{ts}" if channel and ts else event_id,
                kind="message",
                sender_id=text_field(event, "user"),
                tenant_key=team,
                chat_id=channel,
                chat_type="p2p" if direct else "group",
                text=with_attachments(text, files),
                attachments=[item.as_dict() for item in files],
                message_id=ts,
                thread_ref=text_field(event, "thread_ts", where="event.") or ts,
                context={"channel": channel, "event_id": event_id},
            )
        ]

    def _parse_actions(self, data: dict, team: str) -> list[ParsedEvent]:
        user = object_field(data, "user")
        actions = data.get("actions") or []
        if not isinstance(actions, list):
            raise PayloadInvalid("actions must be a list")
        if not actions:
            return []
        action = actions[0]
        if not isinstance(action, dict):
            raise PayloadInvalid("actions[0] must be an object")
        try:
            value = json.loads(text_field(action, "value", where="actions[0].") or "{}")
        except (ValueError, RecursionError):
            value = {}
        container = object_field(data, "container")
        channel = text_field(object_field(data, "channel"), "id", where="channel.") or text_field(
            container, "channel_id", where="container."
        )
        user_id = text_field(user, "id", where="user.")
        action_ts = text_field(action, "action_ts", where="actions[0].")
        return [
            ParsedEvent(
                event_key=f"action:{user_id}:{action_ts}",
                kind="card_action",
                sender_id=user_id,
                tenant_key=team,
                chat_id=channel,
                message_id=text_field(container, "message_ts", where="container."),
                action=value if isinstance(value, dict) else {},
                context={"response_url": text_field(data, "response_url"), "channel": channel},
            )
        ]

    def acknowledge(self, verified, events, decisions) -> Reply:
        # Slack ignores the body of an interactivity ack; refusals are posted to response_url.
        return Reply(200, b"", "text/plain; charset=utf-8")


def _strip_mentions(text: str) -> str:
    return re.sub(r"<@[A-Z0-9]+>\s*", "", text or "").strip()
