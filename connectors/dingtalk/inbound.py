"""DingTalk inbound: `timestamp` (ms) + `sign` headers, 1-hour window, each sign used once.

sign = base64(HMAC-SHA256(app secret, f"{timestamp}\\n{app secret}")). The sign does not cover
the body, so whoever captures one request could otherwise send any body under its sign for the
next hour: a message as any employee, with a sessionWebhook of their choosing. Two defences:
- a sign is accepted for one body only, per connector, while it is fresh (kept in Redis until
  its window closes): the same body again is DingTalk redelivering (then msgId de-duplicates),
  another body under a used sign is 401 and counts as a signature rejection;
- the sessionWebhook is used for replies only when it is https on DingTalk's host
  (`connectors.dingtalk.session_webhook`); otherwise replies go through the robot API.
Stream mode (`connectors_stream`) has neither weakness: DingTalk pushes over a TLS connection
Cadre opened with the app credentials, and nothing is exposed to the internet.

Event subscriptions over HTTP (contact changes: user_add_org, user_modify_org, user_leave_org,
org_dept_*) use DingTalk's published callback crypto instead, the WXBizMsgCrypt scheme
(`connectors.base.callback_crypto`): `msg_signature`/`signature`, `timestamp`/`timeStamp` and
`nonce` in the query, `{"encrypt": …}` in the body; the signature (sha1 of the sorted token,
timestamp, nonce and ciphertext) is checked, the timestamp must be within the window, and the
ciphertext must decrypt under the event AES key and name this app's AppKey as its owner. The
answer is the encrypted "success" DingTalk waits for (otherwise it delivers again).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import math
import secrets
import time

from django.core.cache import cache
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
    callback_crypto,
    check_freshness,
    constant_time_equal,
    object_field,
    text_field,
)
from connectors.base.attachments import Attachment, file_messages_enabled, with_attachments
from connectors.dingtalk.directory import contact_changes
from connectors.dingtalk.login import LOGIN
from connectors.dingtalk.session_webhook import session_webhook_allowed

# DingTalk's documented window: a timestamp more than one hour from now is illegitimate.
WINDOW = 3600
SIGN_MARK_MARGIN = 300  # seconds a used sign stays marked after its window closes


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
    # Event subscription over HTTP (Events & Callbacks → HTTP push): its token and aes_key.
    optional_credential_fields = ("event_token", "event_aes_key")
    credential_labels = {
        "app_key": (
            gettext_lazy("Client ID (AppKey)"),
            gettext_lazy("Developer console → your app → Credentials."),
        ),
        "app_secret": (
            gettext_lazy("Client Secret (AppSecret)"),
            gettext_lazy("Developer console → your app → Credentials."),
        ),
        "event_token": (
            gettext_lazy("Event signing token"),
            gettext_lazy(
                "Events & Callbacks → HTTP push → Token. Only for contact events over HTTP; "
                "stream mode needs none."
            ),
        ),
        "event_aes_key": (
            gettext_lazy("Event encryption key (aes_key)"),
            gettext_lazy("Events & Callbacks → HTTP push → aes_key (43 characters)."),
        ),
    }
    setting_fields = ("robot_code", "card_template_id", "api_base_url", "oapi_base_url", "mode")
    extra = "dingtalk"
    extra_module = "dingtalk_stream"
    extra_purpose = gettext_lazy("DingTalk stream mode")
    extra_consequence = gettext_lazy(
        "Stream mode is unavailable until it is installed; HTTP callbacks work without it."
    )
    outbound_mode = "stream mode"
    stream_module = "stream"
    login = LOGIN

    def verify(self, request: InboundRequest) -> Verified:
        if request.method != "POST":
            raise PayloadInvalid("DingTalk posts callbacks")
        if request.query.get("msg_signature") or request.query.get("signature"):
            return self._verify_event(request)
        timestamp, given = request.header("timestamp"), request.header("sign")
        if not timestamp or not given:
            raise SignatureInvalid("timestamp and sign headers are required")
        check_freshness(timestamp, window=WINDOW, milliseconds=True)
        if not constant_time_equal(sign(self.credentials["app_secret"], timestamp), given):
            raise SignatureInvalid("sign mismatch")
        claim_sign(self.connector.pk, timestamp, given, request.body)
        try:
            data = json.loads(request.body)
        except (ValueError, RecursionError):
            raise PayloadInvalid("body is not JSON") from None
        if not isinstance(data, dict):
            raise PayloadInvalid("body must be a JSON object")
        return Verified(data, request)

    def _verify_event(self, request: InboundRequest) -> Verified:
        """An encrypted event-subscription callback: signature, window, decryption, owner."""
        token = self.credentials.get("event_token", "")
        encoding_aes_key = self.credentials.get("event_aes_key", "")
        if not token or not encoding_aes_key:
            raise SignatureInvalid("event subscription is not configured (token, aes_key)")
        query = request.query
        given = query.get("msg_signature") or query.get("signature", "")
        timestamp = query.get("timestamp") or query.get("timeStamp", "")
        nonce = query.get("nonce", "")
        if not (timestamp and nonce):
            raise SignatureInvalid("msg_signature, timestamp and nonce are required")
        check_freshness(timestamp, window=WINDOW, milliseconds=True)
        try:
            body = json.loads(request.body)
        except (ValueError, RecursionError):
            raise SignatureInvalid("body is not JSON") from None
        encrypted = body.get("encrypt") if isinstance(body, dict) else None
        if not isinstance(encrypted, str) or not encrypted:
            raise SignatureInvalid("no encrypt field")
        if not callback_crypto.check_signature(token, timestamp, nonce, encrypted, given):
            raise SignatureInvalid("msg_signature mismatch")
        try:
            # The owner key of an internal app's event subscription is its AppKey.
            plain = callback_crypto.decrypt(
                encoding_aes_key, encrypted, self.credentials["app_key"]
            )
        except callback_crypto.CallbackCryptoError as error:
            raise SignatureInvalid(str(error)) from None
        try:
            data = json.loads(plain)
        except (ValueError, RecursionError):
            raise PayloadInvalid("decrypted event is not JSON") from None
        if not isinstance(data, dict):
            raise PayloadInvalid("decrypted event must be a JSON object")
        return Verified(data, request, {"event_subscription": True})

    def encrypted_success(self) -> Reply:
        """The answer an event subscription waits for: "success", encrypted and signed."""
        token, encoding_aes_key = self.credentials["event_token"], self.credentials["event_aes_key"]
        encrypted = callback_crypto.encrypt(
            encoding_aes_key, b"success", self.credentials["app_key"]
        )
        timestamp, nonce = str(int(time.time() * 1000)), secrets.token_hex(8)
        return Reply.json(
            {
                "msg_signature": callback_crypto.signature(token, timestamp, nonce, encrypted),
                "timeStamp": timestamp,
                "nonce": nonce,
                "encrypt": encrypted,
            }
        )

    def handshake(self, verified: Verified) -> Reply | None:
        # "check_url": DingTalk testing the URL when the subscription is saved; nothing to store.
        if verified.notes.get("event_subscription") and verified.data.get("EventType") == (
            "check_url"
        ):
            return self.encrypted_success()
        return None

    def parse(self, verified: Verified) -> list[ParsedEvent]:
        if verified.notes.get("event_subscription") and "EventType" not in verified.data:
            raise PayloadInvalid("EventType is missing")
        event = parse_callback(verified.data)
        if event.attachments and not file_messages_enabled(self):
            return [ParsedEvent(event_key=event.event_key, kind="event")]
        return [event]

    def acknowledge(self, verified, events, decisions) -> Reply:
        if verified.notes.get("event_subscription"):
            return self.encrypted_success()
        for outcome in decisions.values():
            return Reply.json(
                {
                    "cardUpdateOptions": {"updateCardDataByKey": True},
                    "userPrivateData": {"cardParamMap": {"notice": outcome.message}},
                }
            )
        return Reply.json({})


def claim_sign(connector_id: int, timestamp: str, given: str, body: bytes) -> None:
    """Accept a (fresh, valid) sign for one body only: SignatureInvalid for another body.

    The same body again is a redelivery (msgId de-duplicates it). The mark lives in the shared
    cache (Redis) until SIGN_MARK_MARGIN after the sign's window closes (a request checked
    fresh just before the end, then slow to get here, still finds it); Redis being down is an
    error (503), never a reason to accept.
    """
    digest = hashlib.sha256(given.encode()).hexdigest()[:32]
    key = f"connectors:dingtalk:sign:{connector_id}:{digest}"
    body_digest = hashlib.sha256(body).hexdigest()
    remaining = float(timestamp) / 1000 + WINDOW - time.time()
    ttl = max(0, math.ceil(remaining)) + SIGN_MARK_MARGIN
    if cache.add(key, body_digest, ttl):
        return
    if cache.get(key) != body_digest:
        raise SignatureInvalid("this sign was already used for another message")


def parse_callback(data: dict) -> ParsedEvent:
    """A robot message or a card callback (HTTP or stream), as a ParsedEvent (PayloadInvalid
    for fields of the wrong type)."""
    if "EventType" in data:  # a contact-change event (decrypted event-subscription body)
        changes = contact_changes(data)
        ids = ",".join(sorted(change.object_id for change in changes))[:100]
        kind, stamp = text_field(data, "EventType"), text_field(data, "TimeStamp")
        event_id = text_field(data, "EventId")  # stream events carry one; HTTP bodies may not
        return ParsedEvent(
            event_key=f"contact:{event_id}" if event_id else f"contact:{kind}:{stamp}:{ids}",
            tenant_key=text_field(data, "CorpId"),
            kind="event",
            context={"directory": [{"kind": c.kind, "object_id": c.object_id} for c in changes]},
        )
    if "outTrackId" in data:  # interactive card callback
        out_track_id = text_field(data, "outTrackId")
        user_id = text_field(data, "userId")
        try:
            content = json.loads(text_field(data, "content") or "{}")
        except (ValueError, RecursionError):
            content = {}
        private = object_field(content, "cardPrivateData") if isinstance(content, dict) else {}
        params = private.get("params") or {}
        params = params if isinstance(params, dict) else {}
        digest = hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:16]
        return ParsedEvent(
            event_key=f"card:{out_track_id}:{user_id}:{digest}",
            kind="card_action",
            sender_id=user_id,
            tenant_key=text_field(data, "corpId"),
            message_id=out_track_id,
            action=params,
        )
    msg_id = text_field(data, "msgId")
    if not msg_id:
        raise PayloadInvalid("msgId is missing")
    message_type = text_field(data, "msgtype")
    text = ""
    if message_type == "text":
        text = text_field(object_field(data, "text"), "content", where="text.").strip()
    files = _attachments(data)
    group = text_field(data, "conversationType") == "2"
    context = {"message_type": message_type, "robot_code": text_field(data, "robotCode")}
    expires = _milliseconds(data.get("sessionWebhookExpiredTime"))
    session_webhook = data.get("sessionWebhook")
    if (
        session_webhook
        and expires > time.time() * 1000
        and session_webhook_allowed(session_webhook)
    ):
        context.update(session_webhook=session_webhook, session_webhook_expires=expires)
    return ParsedEvent(
        event_key=msg_id,
        kind="message",
        sender_id=text_field(data, "senderStaffId") or text_field(data, "senderId"),
        sender_name=text_field(data, "senderNick"),
        tenant_key=text_field(data, "senderCorpId"),
        chat_id=text_field(data, "conversationId"),
        chat_type="group" if group else "p2p",
        text=with_attachments(text, files),
        attachments=[item.as_dict() for item in files],
        message_id=msg_id,
        context=context,
    )


def _milliseconds(value) -> int:
    """sessionWebhookExpiredTime: an integer (or its digits); 0 when absent."""
    if value is None or value == "":
        return 0
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.isdigit() and len(value) < 20:
        return int(value)
    raise PayloadInvalid("sessionWebhookExpiredTime must be an integer (milliseconds)")


def _attachments(data: dict) -> list[Attachment]:
    """A file or picture message's download code (exchanged for a URL when fetched)."""
    message_type = data.get("msgtype", "")
    if message_type not in ("file", "picture"):
        return []
    content = data.get("content") or {}
    if isinstance(content, str):
        try:
            content = json.loads(content)
        except (ValueError, RecursionError):
            content = {}
    if not isinstance(content, dict) or not content.get("downloadCode"):
        return []
    size = content.get("fileSize", 0)
    return [
        Attachment.of(
            "image" if message_type == "picture" else "file",
            text_field(content, "downloadCode", where="content."),
            name=text_field(content, "fileName", where="content."),
            size=size if isinstance(size, int) and not isinstance(size, bool) else 0,
        )
    ]
