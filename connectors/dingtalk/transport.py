"""DingTalk outbound: app access token (cached), robot 1:1 and group messages, session webhook
replies, interactive cards (create-and-deliver, update).

A sessionWebhook is used only when its host is allow-listed (connectors.dingtalk.session_webhook)
and, like every request of the transport, it goes through the outbound guard: a host resolving
to a refused address gets nothing, and the reply goes through the robot API instead.
"""

from __future__ import annotations

import json
import logging
import time

import httpx

from connectors.base.transport import (
    DestinationRefused,
    RateLimited,
    Recipient,
    SendResult,
    TokenInvalid,
    Transport,
    TransportError,
)
from connectors.dingtalk.session_webhook import session_webhook_allowed

logger = logging.getLogger(__name__)


class DingTalkTransport(Transport):
    platform = "dingtalk"
    default_base_url = "https://api.dingtalk.com"

    @property
    def robot_code(self) -> str:
        return self.settings.get("robot_code") or self.credentials["app_key"]

    def fetch_token(self) -> tuple[str, int]:
        data = self.call(
            "POST",
            "/v1.0/oauth2/accessToken",
            auth=False,
            json={
                "appKey": self.credentials["app_key"],
                "appSecret": self.credentials["app_secret"],
            },
        )
        return data["accessToken"], int(data.get("expireIn", 7200))

    def authorize(self, request_kwargs: dict, token: str) -> None:
        request_kwargs.setdefault("headers", {})["x-acs-dingtalk-access-token"] = token

    def check(self, response: httpx.Response) -> dict:
        try:
            data = response.json()
        except ValueError:
            data = {}
        if not isinstance(data, dict):
            data = {}
        code = str(data.get("code", ""))
        if response.status_code == 401 or code == "InvalidAuthentication":
            raise TokenInvalid(f"DingTalk {code}: {data.get('message', '')}")
        if code.startswith("Throttling"):
            raise RateLimited(f"DingTalk {code}", status=response.status_code)
        if response.status_code >= 400:
            raise TransportError(
                f"DingTalk {response.status_code} {code}: {data.get('message', '')}",
                status=response.status_code,
            )
        if data.get("errcode", 0) not in (0, "0"):  # session webhook answers
            raise TransportError(f"DingTalk {data.get('errcode')}: {data.get('errmsg', '')}")
        return data

    def _robot(self, to: Recipient, msg_key: str, params: dict) -> SendResult:
        if to.type == "chat":
            data = self.call(
                "POST",
                "/v1.0/robot/groupMessages/send",
                json={
                    "robotCode": self.robot_code,
                    "openConversationId": to.id,
                    "msgKey": msg_key,
                    "msgParam": json.dumps(params, ensure_ascii=False),
                },
            )
        else:
            data = self.call(
                "POST",
                "/v1.0/robot/oToMessages/batchSend",
                json={
                    "robotCode": self.robot_code,
                    "userIds": [to.id],
                    "msgKey": msg_key,
                    "msgParam": json.dumps(params, ensure_ascii=False),
                },
            )
        return SendResult(str(data.get("processQueryKey", "")), data)

    def _session_webhook(self, context: dict | None) -> str:
        """The message's live sessionWebhook, if it is DingTalk's (else "": the robot API).

        Checked again here, not only when the callback was parsed: the allow-list may have
        changed since, and no stored context is trusted to name a destination."""
        context = context or {}
        url = context.get("session_webhook", "")
        expires = context.get("session_webhook_expires", 0)
        if not isinstance(expires, int) or expires <= time.time() * 1000 + 5000:
            return ""
        return url if session_webhook_allowed(url) else ""

    def _by_session(self, context: dict | None, body: dict) -> SendResult | None:
        """Reply through the message's sessionWebhook; None when there is none to use or the
        guard refused its address (nothing was sent: the robot API answers instead)."""
        url = self._session_webhook(context)
        if not url:
            return None
        try:
            return SendResult("", self.call("POST", url, auth=False, json=body))
        except DestinationRefused as refused:
            logger.warning("dingtalk: sessionWebhook not used: %s", refused)
            return None

    def send_text(self, to: Recipient, text: str, *, context=None) -> SendResult:
        body = {"msgtype": "text", "text": {"content": text}}
        if (sent := self._by_session(context, body)) is not None:
            return sent
        return self._robot(to, "sampleText", {"content": text})

    def send_markdown(self, to: Recipient, markdown: str, *, title="", context=None) -> SendResult:
        body = {"msgtype": "markdown", "markdown": {"title": title or "Cadre", "text": markdown}}
        if (sent := self._by_session(context, body)) is not None:
            return sent
        return self._robot(to, "sampleMarkdown", {"title": title or "Cadre", "text": markdown})

    def send_card(self, to: Recipient, card: dict, *, context=None) -> SendResult:
        out_track_id = card["outTrackId"]
        if to.type == "chat":
            space = {
                "openSpaceId": f"dtv1.card//IM_GROUP.{to.id}",
                "imGroupOpenSpaceModel": {"supportForward": False},
                "imGroupOpenDeliverModel": {"robotCode": self.robot_code},
            }
        else:
            space = {
                "openSpaceId": f"dtv1.card//IM_ROBOT.{to.id}",
                "imRobotOpenSpaceModel": {"supportForward": False},
                "imRobotOpenDeliverModel": {"spaceType": "IM_ROBOT", "robotCode": self.robot_code},
            }
        body = {
            "cardTemplateId": self.settings.get("card_template_id", ""),
            "outTrackId": out_track_id,
            "callbackType": "HTTP",
            "cardData": card["cardData"],
            **space,
        }
        data = self.call("POST", "/v1.0/card/instances/createAndDeliver", json=body)
        return SendResult(out_track_id, data, {"out_track_id": out_track_id})

    def update_card(self, message_id: str, card: dict, *, extra=None) -> SendResult:
        data = self.call(
            "PUT",
            "/v1.0/card/instances",
            json={
                "outTrackId": message_id,
                "cardData": card["cardData"],
                "cardUpdateOptions": {"updateCardDataByKey": True},
            },
        )
        return SendResult(message_id, data)


TRANSPORT = DingTalkTransport
