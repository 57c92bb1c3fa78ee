"""A loopback WeCom API: gettoken, message/send, appchat/send, update_template_card, user/get."""

from __future__ import annotations

import itertools

from connectors.tests.fakes import FakePlatformServer, Recorded

CORP_ID, CORP_SECRET = "ww-test-corp", "corp-secret-1"


class FakeWeCom:
    def __init__(self, server: FakePlatformServer):
        self.server = server
        self.valid_tokens: set[str] = set()
        self.directory: dict[str, dict] = {}
        self.counter = itertools.count(1)
        server.route("GET", "/cgi-bin/gettoken", self.token)
        server.route("POST", "/cgi-bin/message/send", self.send)
        server.route("POST", "/cgi-bin/appchat/send", self.send)
        server.route("POST", "/cgi-bin/message/update_template_card", self.update)
        server.route("GET", "/cgi-bin/user/get", self.user)

    @property
    def url(self) -> str:
        return self.server.url

    def token(self, request: Recorded):
        if (request.query.get("corpid"), request.query.get("corpsecret")) != (CORP_ID, CORP_SECRET):
            return 200, {"errcode": 40001, "errmsg": "invalid credential"}
        token = f"wt-{next(self.counter)}"
        self.valid_tokens.add(token)
        return 200, {"errcode": 0, "errmsg": "ok", "access_token": token, "expires_in": 7200}

    def _bad_token(self, request: Recorded):
        if request.query.get("access_token") not in self.valid_tokens:
            return 200, {"errcode": 42001, "errmsg": "access_token expired"}
        return None

    def send(self, request: Recorded):
        if bad := self._bad_token(request):
            return bad
        number = next(self.counter)
        return 200, {
            "errcode": 0,
            "errmsg": "ok",
            "msgid": f"msg{number}",
            "response_code": f"rc{number}",
        }

    def update(self, request: Recorded):
        if bad := self._bad_token(request):
            return bad
        return 200, {"errcode": 0, "errmsg": "ok", "invaliduser": []}

    def user(self, request: Recorded):
        if bad := self._bad_token(request):
            return bad
        user = self.directory.get(request.query.get("userid", ""))
        if user is None:
            return 200, {"errcode": 60111, "errmsg": "userid not found"}
        return 200, {"errcode": 0, **user}
