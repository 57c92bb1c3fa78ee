"""A loopback Feishu Open API: tenant_access_token, im/v1 messages (send, reply, PATCH), contact."""

from __future__ import annotations

import itertools

from connectors.tests.fakes import FakePlatformServer, Recorded

APP_ID, APP_SECRET = "cli_test_app", "app-secret-1"


class FakeFeishu:
    def __init__(self, server: FakePlatformServer):
        self.server = server
        self.valid_tokens: set[str] = set()
        self.directory: dict[str, dict] = {}
        self.counter = itertools.count(1)
        server.route("POST", "/open-apis/auth/v3/tenant_access_token/internal", self.token)
        server.route("POST", "/open-apis/im/v1/messages", self.send)
        server.route("POST", "/open-apis/im/v1/messages/*", self.reply)
        server.route("PATCH", "/open-apis/im/v1/messages/*", self.patch)
        server.route("GET", "/open-apis/contact/v3/users/*", self.user)

    @property
    def url(self) -> str:
        return self.server.url

    def token(self, request: Recorded):
        body = request.json()
        if (body.get("app_id"), body.get("app_secret")) != (APP_ID, APP_SECRET):
            return 200, {"code": 10014, "msg": "app secret invalid"}
        token = f"t-{next(self.counter)}"
        self.valid_tokens.add(token)
        return 200, {"code": 0, "msg": "ok", "tenant_access_token": token, "expire": 7200}

    def _authorized(self, request: Recorded) -> bool:
        return request.headers.get("authorization", "").removeprefix("Bearer ") in self.valid_tokens

    def send(self, request: Recorded):
        if not self._authorized(request):
            return 200, {"code": 99991663, "msg": "Invalid access token for authorization."}
        return 200, {
            "code": 0,
            "msg": "success",
            "data": {"message_id": f"om_{next(self.counter)}"},
        }

    def reply(self, request: Recorded):
        if not self._authorized(request):
            return 200, {"code": 99991663, "msg": "Invalid access token"}
        return 200, {"code": 0, "data": {"message_id": f"om_{next(self.counter)}"}}

    def patch(self, request: Recorded):
        if not self._authorized(request):
            return 200, {"code": 99991663, "msg": "Invalid access token"}
        return 200, {"code": 0, "msg": "success", "data": {}}

    def user(self, request: Recorded):
        if not self._authorized(request):
            return 200, {"code": 99991663, "msg": "Invalid access token"}
        user_id = request.path.rsplit("/", 1)[-1]
        user = self.directory.get(user_id)
        if user is None:
            return 200, {"code": 41050, "msg": "no user authority"}
        return 200, {"code": 0, "data": {"user": user}}

    def sent(self) -> list[Recorded]:
        return [
            r
            for r in self.server.requests
            if r.path.startswith("/open-apis/im/v1/messages") and r.method == "POST"
        ]
