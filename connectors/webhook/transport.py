"""Webhook outbound: POST a signed JSON message to the connector's callback URL."""

from __future__ import annotations

import json
import time
import uuid

from connectors.transport import Recipient, SendResult, Transport
from connectors.webhook.inbound import EVENT_ID_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER, sign


class WebhookTransport(Transport):
    platform = "webhook"

    def _secret(self) -> str:
        return self.credentials.get("callback_secret") or self.credentials["signing_secret"]

    def _post(self, message: dict) -> SendResult:
        message_id = message.setdefault("message_id", uuid.uuid4().hex)
        body = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode()
        timestamp = str(int(time.time()))
        headers = {
            "Content-Type": "application/json",
            TIMESTAMP_HEADER: timestamp,
            SIGNATURE_HEADER: sign(self._secret(), timestamp, body),
            EVENT_ID_HEADER: message_id,
        }
        data = self.call(
            "POST", self.settings["callback_url"], auth=False, content=body, headers=headers
        )
        return SendResult(str(data.get("message_id") or message_id), data)

    def send_text(self, to: Recipient, text: str, *, context=None) -> SendResult:
        return self._post({"type": "text", "to": {"id": to.id, "type": to.type}, "text": text})

    def send_markdown(self, to: Recipient, markdown: str, *, title="", context=None) -> SendResult:
        return self._post(
            {
                "type": "markdown",
                "to": {"id": to.id, "type": to.type},
                "title": title,
                "markdown": markdown,
            }
        )

    def send_card(self, to: Recipient, card: dict, *, context=None) -> SendResult:
        return self._post({"type": "card", "to": {"id": to.id, "type": to.type}, "card": card})

    def update_card(self, message_id: str, card: dict, *, extra=None) -> SendResult:
        return self._post({"type": "card_update", "target_message_id": message_id, "card": card})

    def reply_in_thread(self, message_id: str, text: str, *, context=None) -> SendResult:
        return self._post({"type": "text", "thread_id": message_id, "text": text})


TRANSPORT = WebhookTransport
