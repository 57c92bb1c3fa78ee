"""Webhook outbound: POST a signed JSON message to the connector's callback URL.

The callback URL is a server-side request on behalf of whoever configured the connector, so it
goes through the outbound guard (cadre.outbound) at every connection (DNS can change after the
URL was saved): the transport's client resolves the host, refuses it when it resolves to an
internal address that CADRE_CONNECTOR_WEBHOOK_ALLOWED_HOSTS does not list, and connects to the
very address that was checked (TLS still verifies the certificate for the host name), with no
redirects followed.
"""

from __future__ import annotations

import json
import time
import uuid

from django.utils.translation import gettext as _

from cadre import outbound
from cadre.errors import InvalidInput
from connectors.base.transport import Recipient, SendResult, Transport, TransportError
from connectors.webhook.inbound import EVENT_ID_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER, sign


class WebhookTransport(Transport):
    platform = "webhook"
    # A receiver of the customer's, not an IM platform: the webhooks' own allow-list.
    allow_setting = outbound.CONNECTOR_WEBHOOKS

    def _secret(self) -> str:
        return self.credentials.get("callback_secret") or self.credentials["signing_secret"]

    def credentials_probe(self) -> tuple[str, str]:
        # A webhook has no platform to authenticate to: send a signed ping to the callback URL.
        url = self.settings.get("callback_url", "")
        if not url:
            raise InvalidInput(
                _("This webhook has no callback URL to test."),
                details={"callback_url": [_("Set a callback URL to send replies to.")]},
            )
        self._post({"type": "ping", "to": {"id": "", "type": "user"}, "text": "ping"})
        return url, _("The callback URL accepted a signed ping.")

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
        url = self.settings["callback_url"]
        try:
            outbound.parse_url(url)  # a stored URL that is not http(s): refused, never sent
        except outbound.OutboundRefused as refused:
            raise TransportError(f"callback URL refused: {refused.message}") from None
        data = self.call("POST", url, auth=False, content=body, headers=headers)
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
