"""Feishu outbound: tenant_access_token (cached), im/v1 messages, replies in thread, card PATCH."""

from __future__ import annotations

import json

import httpx

from connectors.base.transport import (
    RateLimited,
    Recipient,
    SendResult,
    TokenInvalid,
    Transport,
    TransportError,
)

DOMAINS = {"feishu": "https://open.feishu.cn", "lark": "https://open.larksuite.com"}
# Error codes in the body: access token invalid/expired, and the frequency limit.
TOKEN_CODES = {99991661, 99991663, 99991668, 99991671}
RATE_LIMIT_CODES = {99991400, 11232, 230020}


class FeishuTransport(Transport):
    platform = "feishu"

    def __init__(self, connector, **kwargs):
        super().__init__(connector, **kwargs)
        if not self.settings.get("api_base_url"):
            self.base_url = DOMAINS.get(self.settings.get("domain", "feishu"), DOMAINS["feishu"])

    def fetch_token(self) -> tuple[str, int]:
        data = self.call(
            "POST",
            "/open-apis/auth/v3/tenant_access_token/internal",
            auth=False,
            json={
                "app_id": self.credentials["app_id"],
                "app_secret": self.credentials["app_secret"],
            },
        )
        return data["tenant_access_token"], int(data.get("expire", 7200))

    def check(self, response: httpx.Response) -> dict:
        try:
            data = response.json()
        except ValueError:
            data = None
        if not isinstance(data, dict):
            if response.status_code >= 400:
                raise TransportError(f"HTTP {response.status_code}", status=response.status_code)
            return {}
        code = data.get("code", 0)
        if code in TOKEN_CODES:
            raise TokenInvalid(f"Feishu {code}: {data.get('msg', '')}")
        if code in RATE_LIMIT_CODES:
            raise RateLimited(f"Feishu {code}: {data.get('msg', '')}", status=response.status_code)
        if code != 0 or response.status_code >= 400:
            raise TransportError(
                f"Feishu {code}: {data.get('msg', '')}", status=response.status_code
            )
        return data

    def _send(self, to: Recipient, msg_type: str, content: dict) -> SendResult:
        id_type = "chat_id" if to.type == "chat" else self.settings.get("user_id_type", "open_id")
        data = self.call(
            "POST",
            "/open-apis/im/v1/messages",
            params={"receive_id_type": id_type},
            json={
                "receive_id": to.id,
                "msg_type": msg_type,
                "content": json.dumps(content, ensure_ascii=False),
            },
        )
        return SendResult(str((data.get("data") or {}).get("message_id", "")), data)

    def send_text(self, to: Recipient, text: str, *, context=None) -> SendResult:
        return self._send(to, "text", {"text": text})

    def send_markdown(self, to: Recipient, markdown: str, *, title="", context=None) -> SendResult:
        card: dict = {
            "config": {"wide_screen_mode": True},
            "elements": [{"tag": "markdown", "content": markdown}],
        }
        if title:
            card["header"] = {"title": {"tag": "plain_text", "content": title}}
        return self._send(to, "interactive", card)

    def send_card(self, to: Recipient, card: dict, *, context=None) -> SendResult:
        return self._send(to, "interactive", card)

    def update_card(self, message_id: str, card: dict, *, extra=None) -> SendResult:
        data = self.call(
            "PATCH",
            f"/open-apis/im/v1/messages/{message_id}",
            json={"content": json.dumps(card, ensure_ascii=False)},
        )
        return SendResult(message_id, data)

    def reply_in_thread(self, message_id: str, text: str, *, context=None) -> SendResult:
        data = self.call(
            "POST",
            f"/open-apis/im/v1/messages/{message_id}/reply",
            json={
                "msg_type": "text",
                "reply_in_thread": True,
                "content": json.dumps({"text": text}, ensure_ascii=False),
            },
        )
        return SendResult(str((data.get("data") or {}).get("message_id", "")), data)

    def lookup_user(self, user_id: str) -> dict:
        data = self.call(
            "GET",
            f"/open-apis/contact/v3/users/{user_id}",
            params={"user_id_type": self.settings.get("user_id_type", "open_id")},
        )
        user = (data.get("data") or {}).get("user") or {}
        return {
            "email": user.get("email") or user.get("enterprise_email") or "",
            "mobile": user.get("mobile", ""),
            "name": user.get("name", ""),
        }


TRANSPORT = FeishuTransport
