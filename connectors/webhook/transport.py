"""Webhook outbound: POST a signed JSON message to the connector's callback URL.

The callback URL is a server-side request on behalf of whoever configured the connector, so it
goes through the outbound guard (cadre.outbound) at every send (DNS can change after the URL was
saved): a host resolving to an internal address is refused unless
CADRE_CONNECTOR_WEBHOOK_ALLOWED_HOSTS lists it, and the request goes to the very address that
was checked (TLS still verifies the certificate for the host name), with no redirects followed.
"""

from __future__ import annotations

import json
import time
import uuid

from cadre import outbound
from connectors.transport import Recipient, SendResult, Transport, TransportError
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
        url, extensions = self._pinned(self.settings["callback_url"], headers)
        data = self.call(
            "POST", url, auth=False, content=body, headers=headers, extensions=extensions
        )
        return SendResult(str(data.get("message_id") or message_id), data)

    def _pinned(self, url: str, headers: dict) -> tuple[str, dict]:
        """The URL rewritten to the checked address (Host header and TLS name kept): the
        connector's shared client connects where the guard said it may."""
        try:
            pinned = outbound.pinned_url(url, allow_setting=outbound.CONNECTOR_WEBHOOKS)
        except outbound.OutboundRefused as refused:
            raise TransportError(f"callback URL refused: {refused.message}") from None
        except (OSError, UnicodeError) as error:
            raise TransportError(f"network error: {error}", retryable=True) from None
        headers["Host"] = pinned.host_header
        return pinned.url, pinned.extensions

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
