"""WeCom outbound: access_token (cached), app messages, appchat (groups), card updates."""

from __future__ import annotations

import httpx

from connectors.base.transport import (
    RateLimited,
    Recipient,
    SendResult,
    TokenInvalid,
    Transport,
    TransportError,
)

TOKEN_CODES = {40001, 40014, 42001}
RATE_LIMIT_CODES = {45009, 45033, 45011}
BUSY_CODES = {-1}


class WeComTransport(Transport):
    platform = "wecom"
    default_base_url = "https://qyapi.weixin.qq.com"

    def fetch_token(self) -> tuple[str, int]:
        data = self.call(
            "GET",
            "/cgi-bin/gettoken",
            auth=False,
            params={
                "corpid": self.credentials["corp_id"],
                "corpsecret": self.credentials["corp_secret"],
            },
        )
        return data["access_token"], int(data.get("expires_in", 7200))

    def authorize(self, request_kwargs: dict, token: str) -> None:
        request_kwargs.setdefault("params", {})["access_token"] = token

    def check(self, response: httpx.Response) -> dict:
        try:
            data = response.json()
        except ValueError:
            raise TransportError(
                f"HTTP {response.status_code}: not JSON", status=response.status_code
            ) from None
        code = data.get("errcode", 0)
        if code in TOKEN_CODES:
            raise TokenInvalid(f"WeCom {code}: {data.get('errmsg', '')}")
        if code in RATE_LIMIT_CODES:
            raise RateLimited(f"WeCom {code}: {data.get('errmsg', '')}", status=200)
        if code in BUSY_CODES:
            raise TransportError(f"WeCom {code}: system busy", retryable=True)
        if code != 0:
            raise TransportError(f"WeCom {code}: {data.get('errmsg', '')}")
        return data

    @property
    def agent_id(self) -> int:
        return int(self.settings.get("agent_id", 0))

    def _send(self, to: Recipient, msgtype: str, content: dict) -> SendResult:
        if to.type == "chat":
            data = self.call(
                "POST",
                "/cgi-bin/appchat/send",
                json={"chatid": to.id, "msgtype": msgtype, msgtype: content},
            )
            return SendResult(str(data.get("msgid", "")), data)
        data = self.call(
            "POST",
            "/cgi-bin/message/send",
            json={"touser": to.id, "msgtype": msgtype, "agentid": self.agent_id, msgtype: content},
        )
        return SendResult(
            str(data.get("msgid", "")),
            data,
            {"response_code": data.get("response_code", ""), "userid": to.id},
        )

    def send_text(self, to: Recipient, text: str, *, context=None) -> SendResult:
        return self._send(to, "text", {"content": text})

    def send_markdown(self, to: Recipient, markdown: str, *, title="", context=None) -> SendResult:
        return self._send(to, "markdown", {"content": markdown})

    def send_card(self, to: Recipient, card: dict, *, context=None) -> SendResult:
        return self._send(to, "template_card", card)

    def update_card(self, message_id: str, card: dict, *, extra=None) -> SendResult:
        extra = extra or {}
        body: dict = {
            "userids": [extra.get("userid", "")],
            "agentid": self.agent_id,
            "response_code": extra.get("response_code", ""),
        }
        if "replace_name" in card:
            body["button"] = {"replace_name": card["replace_name"]}
        else:
            body["template_card"] = card
        data = self.call("POST", "/cgi-bin/message/update_template_card", json=body)
        return SendResult(message_id, data)

    def lookup_user(self, user_id: str) -> dict:
        data = self.call("GET", "/cgi-bin/user/get", params={"userid": user_id})
        return {
            "email": data.get("email") or data.get("biz_mail") or "",
            "mobile": data.get("mobile", ""),
            "name": data.get("name", ""),
        }


TRANSPORT = WeComTransport
