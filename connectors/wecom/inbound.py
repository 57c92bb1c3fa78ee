"""WeCom inbound: GET echostr verification, POST encrypted XML; dedupe on MsgId.

Every request carries msg_signature, timestamp and nonce in the query; the signature covers the
ciphertext, which must decrypt under our EncodingAESKey and end with our corp id. XML with a
DOCTYPE (entity tricks) is refused before parsing.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

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
)
from connectors.base.attachments import Attachment, file_messages_enabled, with_attachments
from connectors.wecom import crypto
from connectors.wecom.directory import contact_change
from connectors.wecom.login import LOGIN

DEFAULT_TOLERANCE = 3600


def parse_xml(data: bytes) -> dict[str, str]:
    if b"<!DOCTYPE" in data.upper() or b"<!ENTITY" in data.upper():
        raise PayloadInvalid("XML with a DOCTYPE is not accepted")
    try:
        root = ET.fromstring(data)  # noqa: S314 - DOCTYPE refused above; expat limits entities
    except ET.ParseError:
        raise PayloadInvalid("body is not XML") from None
    return {child.tag: (child.text or "").strip() for child in root}


class WeComPlatform(Platform):
    name = "wecom"
    label = "WeCom"
    capabilities = Capabilities(
        cards=True, card_updates=True, threads=False, long_connection=False, file_messages=True
    )
    credential_fields = ("corp_id", "corp_secret", "token", "encoding_aes_key")
    credential_labels = {
        "corp_id": (
            gettext_lazy("Corp ID"),
            gettext_lazy("My Company → Company information → Corp ID (ww…)."),
        ),
        "corp_secret": ("Secret", gettext_lazy("App Management → your app → Secret.")),
        "token": ("Token", gettext_lazy("Receive messages → Set API receive → Token.")),
        "encoding_aes_key": (
            "EncodingAESKey",
            gettext_lazy("Receive messages → Set API receive → EncodingAESKey (43 characters)."),
        ),
    }
    login = LOGIN
    ack_shows_decisions = False
    setting_fields = ("agent_id", "api_base_url", "tolerance_seconds")

    def _check(self, request: InboundRequest, encrypted: str) -> None:
        signature = request.query.get("msg_signature", "")
        timestamp = request.query.get("timestamp", "")
        nonce = request.query.get("nonce", "")
        if not (signature and timestamp and nonce):
            raise SignatureInvalid("msg_signature, timestamp and nonce are required")
        check_freshness(
            timestamp, window=float(self.settings.get("tolerance_seconds", DEFAULT_TOLERANCE))
        )
        if not crypto.check_signature(
            self.credentials["token"], timestamp, nonce, encrypted, signature
        ):
            raise SignatureInvalid("msg_signature mismatch")

    def _decrypt(self, encrypted: str) -> bytes:
        try:
            return crypto.decrypt(
                self.credentials["encoding_aes_key"], encrypted, self.credentials["corp_id"]
            )
        except crypto.WeComCryptoError as error:
            raise SignatureInvalid(str(error)) from None

    def verify(self, request: InboundRequest) -> Verified:
        if request.method == "GET":
            echostr = request.query.get("echostr", "")
            if not echostr:
                raise SignatureInvalid("echostr is required")
            self._check(request, echostr)
            return Verified({"echostr": self._decrypt(echostr)}, request)
        outer = parse_xml(request.body) if request.body else {}
        encrypted = outer.get("Encrypt", "")
        if not encrypted:
            raise SignatureInvalid("no <Encrypt> element")
        self._check(request, encrypted)
        return Verified(parse_xml(self._decrypt(encrypted)), request)

    def handshake(self, verified: Verified) -> Reply | None:
        if "echostr" in verified.data:
            return Reply(200, verified.data["echostr"], "text/plain; charset=utf-8")
        return None

    def parse(self, verified: Verified) -> list[ParsedEvent]:
        data = verified.data
        sender = data.get("FromUserName", "")
        msg_type = data.get("MsgType", "")
        if msg_type == "event":
            event = data.get("Event", "")
            key = (
                f"event:{sender}:{data.get('CreateTime', '')}:{event}:"
                f"{data.get('TaskId', '') or data.get('EventKey', '')[:60]}"
            )
            if event == "template_card_event":
                try:
                    action = json.loads(data.get("EventKey", "") or "{}")
                except ValueError:
                    action = {}
                return [
                    ParsedEvent(
                        event_key=key,
                        kind="card_action",
                        sender_id=sender,
                        tenant_key=data.get("ToUserName", ""),
                        action=action if isinstance(action, dict) else {},
                        context={
                            "task_id": data.get("TaskId", ""),
                            "response_code": data.get("ResponseCode", ""),
                        },
                    )
                ]
            change = contact_change(data)
            if change is not None:  # several changes can share a second: the id keys them
                return [
                    ParsedEvent(
                        event_key=f"{key}:{data.get('ChangeType', '')}:{change.object_id}",
                        kind="event",
                        sender_id=sender,
                        context={
                            "event": event,
                            "directory": [{"kind": change.kind, "object_id": change.object_id}],
                        },
                    )
                ]
            return [
                ParsedEvent(event_key=key, kind="event", sender_id=sender, context={"event": event})
            ]
        msg_id = data.get("MsgId", "")
        if not msg_id:
            raise PayloadInvalid("MsgId is missing")
        text = data.get("Content", "") if msg_type == "text" else ""
        files = []
        if msg_type in ("file", "image") and data.get("MediaId"):
            if not file_messages_enabled(self):
                return [ParsedEvent(event_key=msg_id, kind="event", sender_id=sender)]
            files = [
                Attachment.of(
                    msg_type,
                    data["MediaId"],
                    name=data.get("FileName", "") or data.get("Title", ""),
                    size=data.get("FileSize", 0),
                    pic_url=data.get("PicUrl", ""),
                )
            ]
        return [
            ParsedEvent(
                event_key=msg_id,
                kind="message",
                sender_id=sender,
                tenant_key=data.get("ToUserName", ""),
                text=with_attachments(text, files),
                attachments=[item.as_dict() for item in files],
                message_id=msg_id,
                context={"message_type": msg_type, "agent_id": data.get("AgentID", "")},
            )
        ]

    def acknowledge(self, verified, events, decisions) -> Reply:
        # WeCom wants an empty 200 (a passive reply would have to be encrypted XML); the
        # outcome of a card click is shown by updating the card through the API.
        return Reply(200, b"", "text/plain; charset=utf-8")
