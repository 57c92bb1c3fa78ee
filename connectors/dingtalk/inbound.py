"""DingTalk inbound: `timestamp` (ms) + `sign` headers, 1-hour window, dedupe on msgId.

sign = base64(HMAC-SHA256(app secret, f"{timestamp}\\n{app secret}")). The sign does not cover
the body, so a captured request could be replayed with another body inside the window: the
msgId de-duplication is what makes each message count once.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time

from connectors.attachments import Attachment, file_messages_enabled, with_attachments
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
)

WINDOW = 3600


def sign(app_secret: str, timestamp: str) -> str:
    digest = hmac.new(app_secret.encode(), f"{timestamp}\n{app_secret}".encode(), hashlib.sha256)
    return base64.b64encode(digest.digest()).decode()


class DingTalkPlatform(Platform):
    name = "dingtalk"
    label = "DingTalk"
    capabilities = Capabilities(
        cards=True, card_updates=True, threads=False, long_connection=True, file_messages=True
    )
    credential_fields = ("app_key", "app_secret")
    setting_fields = ("robot_code", "card_template_id", "api_base_url", "mode")
    extra = "dingtalk"
    extra_module = "dingtalk_stream"

    def verify(self, request: InboundRequest) -> Verified:
        if request.method != "POST":
            raise PayloadInvalid("DingTalk posts callbacks")
        timestamp, given = request.header("timestamp"), request.header("sign")
        if not timestamp or not given:
            raise SignatureInvalid("timestamp and sign headers are required")
        check_freshness(timestamp, window=WINDOW, milliseconds=True)
        if not constant_time_equal(sign(self.credentials["app_secret"], timestamp), given):
            raise SignatureInvalid("sign mismatch")
        try:
            data = json.loads(request.body)
        except ValueError:
            raise PayloadInvalid("body is not JSON") from None
        if not isinstance(data, dict):
            raise PayloadInvalid("body must be a JSON object")
        return Verified(data, request)

    def parse(self, verified: Verified) -> list[ParsedEvent]:
        event = parse_callback(verified.data)
        if event.attachments and not file_messages_enabled(self):
            return [ParsedEvent(event_key=event.event_key, kind="event")]
        return [event]

    def acknowledge(self, verified, events, decisions) -> Reply:
        for outcome in decisions.values():
            return Reply.json(
                {
                    "cardUpdateOptions": {"updateCardDataByKey": True},
                    "userPrivateData": {"cardParamMap": {"notice": outcome.message}},
                }
            )
        return Reply.json({})

    def setup_instructions(self, callback_url: str) -> list[str]:
        return [
            "DingTalk developer console → your app → Robot → message receiving mode: HTTP.",
            f"Message receiving address: {callback_url}",
            "Paste the app's Client ID (AppKey) and Client Secret (AppSecret) here.",
            "Or choose Stream mode (no public URL): install cadre[dingtalk] and run "
            "`python manage.py connectors_stream <connector id>`.",
        ]


def parse_callback(data: dict) -> ParsedEvent:
    """A robot message or a card callback (HTTP or stream), as a ParsedEvent."""
    if "outTrackId" in data:  # interactive card callback
        try:
            content = json.loads(data.get("content") or "{}")
        except ValueError:
            content = {}
        params = (content.get("cardPrivateData") or {}).get("params") or {}
        digest = hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:16]
        return ParsedEvent(
            event_key=f"card:{data['outTrackId']}:{data.get('userId', '')}:{digest}",
            kind="card_action",
            sender_id=str(data.get("userId", "")),
            tenant_key=str(data.get("corpId", "")),
            message_id=str(data["outTrackId"]),
            action=params if isinstance(params, dict) else {},
        )
    msg_id = str(data.get("msgId") or "")
    if not msg_id:
        raise PayloadInvalid("msgId is missing")
    text = ""
    if data.get("msgtype") == "text":
        text = str((data.get("text") or {}).get("content", "")).strip()
    files = _attachments(data)
    group = str(data.get("conversationType")) == "2"
    context = {"message_type": data.get("msgtype", ""), "robot_code": data.get("robotCode", "")}
    expires = int(data.get("sessionWebhookExpiredTime") or 0)
    if data.get("sessionWebhook") and expires > time.time() * 1000:
        context.update(session_webhook=data["sessionWebhook"], session_webhook_expires=expires)
    return ParsedEvent(
        event_key=msg_id,
        kind="message",
        sender_id=str(data.get("senderStaffId") or data.get("senderId") or ""),
        sender_name=str(data.get("senderNick", "")),
        tenant_key=str(data.get("senderCorpId", "")),
        chat_id=str(data.get("conversationId", "")),
        chat_type="group" if group else "p2p",
        text=with_attachments(text, files),
        attachments=[item.as_dict() for item in files],
        message_id=msg_id,
        context=context,
    )


def _attachments(data: dict) -> list[Attachment]:
    """A file or picture message's download code (exchanged for a URL when fetched)."""
    message_type = data.get("msgtype", "")
    if message_type not in ("file", "picture"):
        return []
    content = data.get("content") or {}
    if isinstance(content, str):
        try:
            content = json.loads(content)
        except ValueError:
            content = {}
    if not isinstance(content, dict) or not content.get("downloadCode"):
        return []
    return [
        Attachment.of(
            "image" if message_type == "picture" else "file",
            content["downloadCode"],
            name=content.get("fileName", ""),
            size=content.get("fileSize", 0),
        )
    ]
