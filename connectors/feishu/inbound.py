"""Feishu inbound: URL verification, signature or token check, AES decryption, 1.0/2.0 events.

With an encrypt key, every event must carry `X-Lark-Signature` = sha256(timestamp + nonce +
encrypt key + body) with a fresh `X-Lark-Request-Timestamp`; only the URL-verification
challenge (which Feishu does not sign) is accepted unsigned, and only when it decrypts with our
key and carries our verification token. Without an encrypt key, the verification token in the
body (header.token in schema 2.0, token in 1.0) is compared in constant time.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from django.utils.translation import gettext_lazy

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
from connectors.base.attachments import Attachment, file_messages_enabled, with_attachments
from connectors.feishu import crypto
from connectors.feishu.directory import contact_change
from connectors.feishu.login import LOGIN

# Feishu retries an unacknowledged event for up to ~6 hours; a replay inside the window is
# still caught by the event-id de-duplication.
DEFAULT_TOLERANCE = 7 * 3600
_MENTION = re.compile(r"@_user_\d+\s*")
FILE_MESSAGE_TYPES = ("file", "image", "media", "audio")


class FeishuPlatform(Platform):
    name = "feishu"
    label = "Feishu / Lark"
    capabilities = Capabilities(
        cards=True, card_updates=True, threads=True, long_connection=True, file_messages=True
    )
    credential_fields = ("app_id", "app_secret")
    optional_credential_fields = ("encrypt_key", "verification_token")
    credential_labels = {
        "app_id": ("App ID", gettext_lazy("Credentials & Basic Info → App ID (cli_…).")),
        "app_secret": ("App Secret", gettext_lazy("Credentials & Basic Info → App Secret.")),
        "encrypt_key": (
            "Encrypt Key",
            gettext_lazy(
                "Events & Callbacks → Encryption strategy. Recommended: events are then "
                "encrypted and signed."
            ),
        ),
        "verification_token": (
            "Verification Token",
            gettext_lazy("Events & Callbacks → Encryption strategy."),
        ),
    }
    setting_fields = ("domain", "api_base_url", "mode", "user_id_type", "tolerance_seconds")
    extra = "feishu"
    extra_module = "lark_oapi"
    extra_purpose = gettext_lazy("Feishu/Lark long-connection mode")
    extra_consequence = gettext_lazy(
        "Long-connection mode is unavailable until it is installed; HTTP callbacks work without it."
    )
    outbound_mode = "long-connection mode"
    stream_module = "longconn"
    login = LOGIN

    # --- verify -----------------------------------------------------------------------------

    def _check_token(self, token: str | None, *, required: bool) -> None:
        expected = self.credentials.get("verification_token", "")
        if not expected:
            if required:
                raise SignatureInvalid("no encrypt key or verification token configured")
            return
        if not token or not constant_time_equal(expected, str(token)):
            raise SignatureInvalid("verification token mismatch")

    def verify(self, request: InboundRequest) -> Verified:
        if request.method != "POST":
            raise PayloadInvalid("Feishu posts events")
        encrypt_key = self.credentials.get("encrypt_key", "")
        signature = request.header("X-Lark-Signature")
        signed = False
        if encrypt_key and signature:
            timestamp = request.header("X-Lark-Request-Timestamp")
            nonce = request.header("X-Lark-Request-Nonce")
            check_freshness(
                timestamp, window=float(self.settings.get("tolerance_seconds", DEFAULT_TOLERANCE))
            )
            expected = crypto.signature(timestamp, nonce, encrypt_key, request.body)
            if not constant_time_equal(expected, signature.lower()):
                raise SignatureInvalid("X-Lark-Signature mismatch")
            signed = True
        try:
            outer = json.loads(request.body)
        except (ValueError, RecursionError):
            if encrypt_key and not signed:
                raise SignatureInvalid("unsigned, unreadable request") from None
            raise PayloadInvalid("body is not JSON") from None
        if not isinstance(outer, dict):
            raise SignatureInvalid("unexpected body") if not signed else PayloadInvalid("body")
        data = outer
        if "encrypt" in outer:
            if not encrypt_key:
                raise SignatureInvalid("encrypted event but no encrypt key configured")
            try:
                data = json.loads(crypto.decrypt(encrypt_key, str(outer["encrypt"])))
            except (crypto.DecryptError, ValueError, RecursionError):
                raise SignatureInvalid("cannot decrypt the event with our key") from None
            if not isinstance(data, dict):
                raise PayloadInvalid("decrypted event is not an object")
        header = data.get("header")
        token = (header.get("token") if isinstance(header, dict) else None) or data.get("token")
        if token is not None and not isinstance(token, str):
            token = ""  # not a token: fails the comparison below (or is ignored when signed)
        if signed:
            # The signature proves the sender; a configured token must still match.
            if self.credentials.get("verification_token") and token is not None:
                self._check_token(token, required=False)
        elif encrypt_key:
            # Unsigned with an encrypt key: only the URL-verification challenge is allowed.
            if data.get("type") != "url_verification" or "encrypt" not in outer:
                raise SignatureInvalid("missing X-Lark-Signature")
            self._check_token(token, required=False)
        else:
            self._check_token(token, required=True)
        return Verified(data, request, {"encrypted": "encrypt" in outer})

    def handshake(self, verified: Verified) -> Reply | None:
        if verified.data.get("type") == "url_verification":
            return Reply.json({"challenge": verified.data.get("challenge", "")})
        return None

    # --- parse ------------------------------------------------------------------------------

    def parse(self, verified: Verified) -> list[ParsedEvent]:
        data = verified.data
        if data.get("schema") == "2.0":
            return self._parse_v2(data)
        if "uuid" in data and isinstance(data.get("event"), dict):
            return self._parse_v1(data)
        raise PayloadInvalid("neither a schema 2.0 nor a 1.0 event")

    def _parse_v2(self, data: dict) -> list[ParsedEvent]:
        header = object_field(data, "header")
        event = object_field(data, "event")
        event_id = text_field(header, "event_id", where="header.")
        if not event_id:
            raise PayloadInvalid("header.event_id is missing")
        event_type = text_field(header, "event_type", where="header.")
        tenant_key = text_field(header, "tenant_key", where="header.")
        if event_type == "im.message.receive_v1":
            sender = object_field(event, "sender", where="event.")
            message = object_field(event, "message", where="event.")
            if sender.get("sender_type", "user") != "user":
                return [ParsedEvent(event_key=event_id, kind="event", tenant_key=tenant_key)]
            ids = object_field(sender, "sender_id", where="event.sender.")
            text = _text_of(
                text_field(message, "message_type", where="event.message."),
                text_field(message, "content", where="event.message."),
            )
            files = self._attachments(message)
            if files is None:  # a file message on a connector that does not take files
                return [ParsedEvent(event_key=event_id, kind="event", tenant_key=tenant_key)]
            return [
                ParsedEvent(
                    event_key=event_id,
                    kind="message",
                    sender_id=text_field(ids, "open_id", where="event.sender.sender_id."),
                    tenant_key=tenant_key,
                    chat_id=text_field(message, "chat_id", where="event.message."),
                    chat_type="group" if message.get("chat_type") == "group" else "p2p",
                    text=with_attachments(text, files),
                    attachments=[item.as_dict() for item in files],
                    message_id=text_field(message, "message_id", where="event.message."),
                    thread_ref=text_field(message, "root_id", where="event.message.")
                    or text_field(message, "message_id", where="event.message."),
                    context={
                        "message_type": text_field(message, "message_type"),
                        "user_id": text_field(ids, "user_id", where="event.sender.sender_id."),
                        "union_id": text_field(ids, "union_id", where="event.sender.sender_id."),
                    },
                )
            ]
        if event_type == "card.action.trigger":
            operator = object_field(event, "operator", where="event.")
            action = object_field(event, "action", where="event.")
            context = object_field(event, "context", where="event.")
            value = action.get("value")
            return [
                ParsedEvent(
                    event_key=event_id,
                    kind="card_action",
                    sender_id=text_field(operator, "open_id", where="event.operator."),
                    tenant_key=tenant_key,
                    chat_id=text_field(context, "open_chat_id", where="event.context."),
                    message_id=text_field(context, "open_message_id", where="event.context."),
                    action=value if isinstance(value, dict) else {},
                )
            ]
        context: dict = {"event_type": event_type}
        change = contact_change(event_type, event)
        if change is not None:
            context["directory"] = [{"kind": change.kind, "object_id": change.object_id}]
        return [
            ParsedEvent(event_key=event_id, kind="event", tenant_key=tenant_key, context=context)
        ]

    def _attachments(self, message: dict) -> list[Attachment] | None:
        """The files of a file/image/media/audio message ([] for other messages; None when
        the connector does not take files)."""
        message_type = message.get("message_type", "")
        if message_type not in FILE_MESSAGE_TYPES:
            return []
        if not file_messages_enabled(self):
            return None
        try:
            content = json.loads(text_field(message, "content") or "{}")
        except (ValueError, RecursionError):
            content = {}
        if not isinstance(content, dict):
            content = {}
        key = text_field(content, "image_key" if message_type == "image" else "file_key")
        if not key:
            return []
        return [
            Attachment.of(
                "image" if message_type == "image" else "file",
                key,
                name=text_field(content, "file_name"),
                message_id=text_field(message, "message_id"),
            )
        ]

    def _parse_v1(self, data: dict) -> list[ParsedEvent]:
        event = data["event"]
        uuid = text_field(data, "uuid")
        if not uuid:
            raise PayloadInvalid("uuid is missing")
        if event.get("type") != "message":
            return [
                ParsedEvent(
                    event_key=uuid, kind="event", context={"event_type": text_field(event, "type")}
                )
            ]
        text = text_field(event, "text_without_at_bot") or text_field(event, "text")
        return [
            ParsedEvent(
                event_key=uuid,
                kind="message",
                sender_id=text_field(event, "open_id", where="event."),
                tenant_key=text_field(event, "tenant_key", where="event."),
                chat_id=text_field(event, "open_chat_id", where="event."),
                chat_type="group" if event.get("chat_type") == "group" else "p2p",
                text=text.strip(),
                message_id=text_field(event, "open_message_id", where="event."),
                thread_ref=text_field(event, "open_message_id", where="event."),
                context={"message_type": text_field(event, "msg_type"), "schema": "1.0"},
            )
        ]

    # --- acknowledge ------------------------------------------------------------------------

    def acknowledge(
        self,
        verified: Verified,
        events: list[ParsedEvent],
        decisions: Mapping[str, DecisionOutcome],
    ) -> Reply:
        for outcome in decisions.values():
            return Reply.json(
                {
                    "toast": {
                        "type": "success" if outcome.accepted else "error",
                        "content": outcome.message,
                    }
                }
            )
        return Reply.json({})


def _text_of(message_type: str, content: str) -> str:
    try:
        data = json.loads(content) if content else {}
    except (ValueError, RecursionError):
        return ""
    if not isinstance(data, dict):
        return ""
    if message_type == "text":
        return _MENTION.sub("", str(data.get("text", ""))).strip()
    if message_type == "post":
        body = (
            data.get("content")
            or next((v.get("content") for v in data.values() if isinstance(v, dict)), [])
            or []
        )
        lines = [line for line in body if isinstance(line, list)] if isinstance(body, list) else []
        parts = [
            str(item.get("text", "")) for line in lines for item in line if isinstance(item, dict)
        ]
        title = str(data.get("title") or "")
        return "\n".join(p for p in [title, " ".join(parts).strip()] if p)
    return ""
