"""A loopback Slack Web API: chat.postMessage, chat.update, users.info, response_url."""

from __future__ import annotations

import itertools

from connectors.tests.fakes import FakePlatformServer, Recorded

BOT_TOKEN = "xoxb-test-token"


class FakeSlack:
    def __init__(self, server: FakePlatformServer):
        self.server = server
        self.counter = itertools.count(1)
        self.directory: dict[str, dict] = {}
        self.locales: dict[str, str] = {}  # user id -> Slack locale ("zh-CN")
        server.route("POST", "/api/chat.postMessage", self.post_message)
        server.route("POST", "/api/chat.update", self.update)
        server.route("GET", "/api/users.info", self.user)
        server.route("POST", "/actions/response", self.response_url)

    @property
    def url(self) -> str:
        return f"{self.server.url}/api"

    def _authorized(self, request: Recorded) -> bool:
        return request.headers.get("authorization") == f"Bearer {BOT_TOKEN}"

    def post_message(self, request: Recorded):
        if not self._authorized(request):
            return 200, {"ok": False, "error": "invalid_auth"}
        body = request.json()
        channel = body["channel"]
        if channel.startswith("U"):
            channel = "D" + channel[1:]  # a DM channel with the user
        return 200, {
            "ok": True,
            "channel": channel,
            "ts": f"1700000000.{next(self.counter):06d}",
            "message": {"text": body.get("text", "")},
        }

    def update(self, request: Recorded):
        if not self._authorized(request):
            return 200, {"ok": False, "error": "invalid_auth"}
        body = request.json()
        return 200, {"ok": True, "channel": body["channel"], "ts": body["ts"]}

    def user(self, request: Recorded):
        if not self._authorized(request):
            return 200, {"ok": False, "error": "invalid_auth"}
        user_id = request.query.get("user", "")
        profile = self.directory.get(user_id)
        if profile is None and user_id not in self.locales:
            return 200, {"ok": False, "error": "user_not_found"}
        user = {"id": user_id, "profile": profile or {}}
        if request.query.get("include_locale") == "true" and user_id in self.locales:
            user["locale"] = self.locales[user_id]
        return 200, {"ok": True, "user": user}

    def response_url(self, request: Recorded):
        return 200, {"ok": True}
