"""A loopback DingTalk API: accessToken, robot 1:1/group sends, cards, session webhooks."""

from __future__ import annotations

import itertools

from connectors.tests.fakes import FakePlatformServer, Recorded

APP_KEY, APP_SECRET = "dingtestkey", "ding-app-secret"


class FakeDingTalk:
    def __init__(self, server: FakePlatformServer):
        self.server = server
        self.valid_tokens: set[str] = set()
        self.counter = itertools.count(1)
        server.route("POST", "/v1.0/oauth2/accessToken", self.token)
        server.route("POST", "/v1.0/robot/oToMessages/batchSend", self.send)
        server.route("POST", "/v1.0/robot/groupMessages/send", self.send)
        server.route("POST", "/v1.0/card/instances/createAndDeliver", self.card)
        server.route("PUT", "/v1.0/card/instances", self.card)
        server.route("POST", "/robot/sendBySession", self.session)

    @property
    def url(self) -> str:
        return self.server.url

    def token(self, request: Recorded):
        body = request.json()
        if (body.get("appKey"), body.get("appSecret")) != (APP_KEY, APP_SECRET):
            return 400, {"code": "invalidClientSecret", "message": "bad secret"}
        token = f"dt-{next(self.counter)}"
        self.valid_tokens.add(token)
        return 200, {"accessToken": token, "expireIn": 7200}

    def _authorized(self, request: Recorded) -> bool:
        return request.headers.get("x-acs-dingtalk-access-token") in self.valid_tokens

    def send(self, request: Recorded):
        if not self._authorized(request):
            return 401, {"code": "InvalidAuthentication", "message": "token invalid"}
        return 200, {"processQueryKey": f"pqk-{next(self.counter)}"}

    def card(self, request: Recorded):
        if not self._authorized(request):
            return 401, {"code": "InvalidAuthentication", "message": "token invalid"}
        return 200, {"success": True, "result": {"outTrackId": request.json().get("outTrackId")}}

    def session(self, request: Recorded):
        return 200, {"errcode": 0, "errmsg": "ok"}
