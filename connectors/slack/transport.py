"""Slack outbound: chat.postMessage, chat.update, replies in thread, response_url notices."""

from __future__ import annotations

import httpx
from django.utils.translation import gettext as _

from connectors.base.transport import RateLimited, Recipient, SendResult, Transport, TransportError


class SlackTransport(Transport):
    platform = "slack"
    default_base_url = "https://slack.com/api"

    def access_token(self, *, refresh: bool = False) -> str:
        return self.credentials["bot_token"]  # bot tokens do not expire

    def forget_token(self) -> None:
        pass

    def check(self, response: httpx.Response) -> dict:
        try:
            data = response.json()
        except ValueError:
            if 200 <= response.status_code < 300:
                return {"ok": True}  # response_url answers "ok" as text
            raise TransportError(
                f"HTTP {response.status_code}", status=response.status_code
            ) from None
        if data.get("ok") is False:
            if data.get("error") == "ratelimited":
                raise RateLimited("Slack ratelimited")
            raise TransportError(
                f"Slack error: {data.get('error', 'unknown')}", status=response.status_code
            )
        if response.status_code >= 400:
            raise TransportError(f"HTTP {response.status_code}", status=response.status_code)
        return data

    def credentials_probe(self) -> tuple[str, str]:
        # Bot tokens do not expire, so there is no token endpoint: auth.test checks the token.
        data = self.call("POST", "/auth.test")
        user, team = data.get("user"), data.get("team")
        if user and team:
            said = _("Slack accepted the bot token (%(user)s in %(team)s).") % {
                "user": user,
                "team": team,
            }
        elif user or team:
            said = _("Slack accepted the bot token (%(who)s).") % {"who": user or team}
        else:
            said = _("Slack accepted the bot token.")
        return self.url("/auth.test"), said

    def _post(self, method: str, body: dict) -> SendResult:
        data = self.call("POST", f"/{method}", json=body)
        return SendResult(str(data.get("ts", "")), data, {"channel": data.get("channel", "")})

    def send_text(self, to: Recipient, text: str, *, context=None) -> SendResult:
        return self._post("chat.postMessage", {"channel": to.id, "text": text})

    def send_markdown(self, to: Recipient, markdown: str, *, title="", context=None) -> SendResult:
        return self._post(
            "chat.postMessage",
            {
                "channel": to.id,
                "text": markdown,
                "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": markdown}}],
            },
        )

    def send_card(self, to: Recipient, card: dict, *, context=None) -> SendResult:
        return self._post("chat.postMessage", {"channel": to.id, **card})

    def update_card(self, message_id: str, card: dict, *, extra=None) -> SendResult:
        channel = (extra or {}).get("channel", "")
        return self._post("chat.update", {"channel": channel, "ts": message_id, **card})

    def reply_in_thread(self, message_id: str, text: str, *, context=None) -> SendResult:
        channel = (context or {}).get("channel", "")
        return self._post(
            "chat.postMessage", {"channel": channel, "thread_ts": message_id, "text": text}
        )

    def respond(self, response_url: str, text: str) -> None:
        """An ephemeral notice to the person who clicked (interactivity response_url)."""
        self.call(
            "POST",
            response_url,
            auth=False,
            json={"response_type": "ephemeral", "replace_original": False, "text": text},
        )

    def lookup_user(self, user_id: str) -> dict:
        # include_locale: the user's Slack language ("zh-CN"), which Cadre writes to them in
        # when they chose none in Cadre (Member.platform_language).
        data = self.call("GET", "/users.info", params={"user": user_id, "include_locale": "true"})
        user = data.get("user") or {}
        profile = user.get("profile") or {}
        return {
            "email": profile.get("email", ""),
            "mobile": profile.get("phone", ""),
            "name": profile.get("real_name", ""),
            "locale": user.get("locale", "") if isinstance(user.get("locale"), str) else "",
        }


TRANSPORT = SlackTransport
