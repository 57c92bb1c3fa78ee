"""Loopback fakes of the IM platforms' OAuth logins, in their documented shapes.

- Feishu/Lark: GET /open-apis/authen/v1/authorize (login page, PKCE S256), POST
  /open-apis/authen/v2/oauth/token (JSON, `code` 0 or an error code with error /
  error_description), GET /open-apis/authen/v1/user_info ({code, msg, data}).
- WeCom: GET /wwlogin/sso/login, GET /cgi-bin/gettoken, GET /cgi-bin/auth/getuserinfo
  (userid for members, openid for outsiders), GET /cgi-bin/user/get ({errcode, errmsg, …}).
- DingTalk: GET /oauth2/auth (redirects back with authCode), POST /v1.0/oauth2/userAccessToken,
  GET /v1.0/contact/users/me (x-acs-dingtalk-access-token), and the oapi host's /gettoken,
  POST /topapi/user/getbyunionid and POST /topapi/v2/user/get.

Codes work once and expire with the redirect URI they were issued for; `errors` lets a test make
one endpoint answer with a platform error code.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import secrets
import threading
from http.server import ThreadingHTTPServer
from urllib.parse import parse_qs, urlencode, urlsplit

from tests.tenancy.loopback import QuietHandler


class _Fake:
    authorize_path = ""
    code_param = "code"

    def __init__(self, client_id: str, client_secret: str):
        self.client_id = client_id
        self.client_secret = client_secret
        self.users: dict[str, dict] = {}  # login → the platform's record of the user
        self.codes: dict[str, dict] = {}
        self.tokens: dict[str, str] = {}  # access token → login
        self.errors: dict[str, dict] = {}  # path → the error body that path answers once
        self.calls: list[str] = []
        fake = self

        class Handler(QuietHandler):
            def _handle(self, method):
                url = urlsplit(self.path)
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length).decode() if length else ""
                fake.calls.append(url.path)
                if url.path == fake.authorize_path:
                    if method == "GET":
                        self._send(200, fake.login_page(query).encode(), "text/html")
                    else:
                        form = {k: v[0] for k, v in parse_qs(raw).items()}
                        self._send(302, b"", "text/plain", {"Location": fake.approve(form)})
                    return
                if url.path in fake.errors:
                    status, body = 200, fake.errors.pop(url.path)
                    status = body.pop("_status", 200)
                else:
                    body_json = json.loads(raw) if raw.startswith("{") else {}
                    status, body = fake.api(method, url.path, query, body_json, self.headers)
                self._send(status, json.dumps(body).encode())

            def do_GET(self):
                self._handle("GET")

            def do_POST(self):
                self._handle("POST")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()

    def login_page(self, query: dict) -> str:
        hidden = "".join(
            f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">'
            for k, v in query.items()
        )
        return (
            f"<!doctype html><title>{self.title} sign-in</title><h1>{self.title}</h1>"
            f'<form method="post" action="{self.authorize_path}">{hidden}'
            '<label>Account <input name="login" id="login"></label>'
            '<button type="submit" id="approve">Authorize</button></form>'
        )

    def check_authorize(self, form: dict) -> None:
        pass

    def approve(self, form: dict) -> str:
        self.check_authorize(form)
        redirect_uri = form["redirect_uri"]
        if form["login"] == "deny":
            return f"{redirect_uri}?{urlencode({'error': 'access_denied', 'state': form['state']})}"
        code = secrets.token_hex(16)
        self.codes[code] = {
            "login": form["login"],
            "redirect_uri": redirect_uri,
            "challenge": form.get("code_challenge", ""),
        }
        return f"{redirect_uri}?{urlencode({self.code_param: code, 'state': form['state']})}"

    def _new_token(self, login: str) -> str:
        token = secrets.token_hex(16)
        self.tokens[token] = login
        return token


class FeishuFake(_Fake):
    title = "Feishu"
    authorize_path = "/open-apis/authen/v1/authorize"

    def __init__(self, client_id="cli_a5ca35a685b0x26e", client_secret="feishu-secret"):
        super().__init__(client_id, client_secret)

    def check_authorize(self, form):
        assert form["client_id"] == self.client_id and form["response_type"] == "code"
        assert form["code_challenge_method"] == "S256"

    def api(self, method, path, query, body, headers):
        if path == "/open-apis/authen/v2/oauth/token" and method == "POST":
            if (
                body.get("client_id") != self.client_id
                or body.get("client_secret") != self.client_secret
            ):
                return 400, {"code": 20002, "error": "invalid_client", "error_description": "bad"}
            grant = self.codes.pop(body.get("code", ""), None)  # a code works once
            if grant is None or grant["redirect_uri"] != body.get("redirect_uri"):
                return 400, {
                    "code": 20003,
                    "error": "invalid_grant",
                    "error_description": "The authorization code is not found or used.",
                }
            digest = hashlib.sha256(body.get("code_verifier", "").encode()).digest()
            if base64.urlsafe_b64encode(digest).rstrip(b"=").decode() != grant["challenge"]:
                return 400, {"code": 20049, "error": "invalid_grant", "error_description": "PKCE"}
            return 200, {
                "code": 0,
                "access_token": self._new_token(grant["login"]),
                "expires_in": 7200,
                "token_type": "Bearer",
                "scope": "auth:user.id:read",
            }
        if path == "/open-apis/authen/v1/user_info" and method == "GET":
            token = headers.get("Authorization", "").removeprefix("Bearer ")
            login = self.tokens.get(token)
            if login is None:
                return 401, {"code": 99991668, "msg": "Invalid access token for authorization."}
            return 200, {"code": 0, "msg": "success", "data": self.users[login]}
        return 404, {"code": 404, "msg": "not found"}


class WeComFake(_Fake):
    title = "WeCom"
    authorize_path = "/wwlogin/sso/login"

    def __init__(
        self, client_id="ww5823bf96d3bd56c7", client_secret="wecom-secret", agent_id="1000002"
    ):
        super().__init__(client_id, client_secret)
        self.agent_id = agent_id
        self.outsiders: set[str] = set()  # logins that get an openid (not in the corp)
        self.app_tokens: set[str] = set()

    def check_authorize(self, form):
        assert form["appid"] == self.client_id and form["agentid"] == self.agent_id
        assert form["login_type"] == "CorpApp"

    def api(self, method, path, query, body, headers):
        if path == "/cgi-bin/gettoken":
            if query.get("corpid") != self.client_id:
                return 200, {"errcode": 40013, "errmsg": "invalid corpid"}
            if query.get("corpsecret") != self.client_secret:
                return 200, {"errcode": 40001, "errmsg": "invalid credential"}
            token = secrets.token_hex(16)
            self.app_tokens.add(token)
            return 200, {"errcode": 0, "errmsg": "ok", "access_token": token, "expires_in": 7200}
        if query.get("access_token") not in self.app_tokens:
            return 200, {"errcode": 40014, "errmsg": "invalid access_token"}
        if path == "/cgi-bin/auth/getuserinfo":
            grant = self.codes.pop(query.get("code", ""), None)
            if grant is None:
                return 200, {"errcode": 40029, "errmsg": "invalid code"}
            if grant["login"] in self.outsiders:
                return 200, {"errcode": 0, "errmsg": "ok", "openid": f"o-{grant['login']}"}
            user = self.users[grant["login"]]
            return 200, {"errcode": 0, "errmsg": "ok", "userid": user["userid"]}
        if path == "/cgi-bin/user/get":
            for user in self.users.values():
                if user["userid"] == query.get("userid"):
                    return 200, {"errcode": 0, "errmsg": "ok", **user}
            return 200, {"errcode": 60111, "errmsg": "userid not found"}
        return 404, {"errcode": 404, "errmsg": "not found"}


class DingTalkFake(_Fake):
    title = "DingTalk"
    authorize_path = "/oauth2/auth"
    code_param = "authCode"

    def __init__(
        self, client_id="dingxxxxxxxx", client_secret="dingtalk-secret", corp_id="ding-corp-1"
    ):
        super().__init__(client_id, client_secret)
        self.corp_id = corp_id
        self.app_tokens: set[str] = set()

    def check_authorize(self, form):
        assert form["client_id"] == self.client_id and form["response_type"] == "code"

    def api(self, method, path, query, body, headers):
        if path == "/v1.0/oauth2/userAccessToken" and method == "POST":
            if (
                body.get("clientId") != self.client_id
                or body.get("clientSecret") != self.client_secret
            ):
                return 400, {
                    "code": "invalidClientIdOrSecret",
                    "message": "无效的clientId或者clientSecret",
                }
            grant = self.codes.pop(body.get("code", ""), None)
            if grant is None:
                return 400, {"code": "InvalidAuthentication", "message": "不合法的临时授权码"}
            return 200, {
                "accessToken": self._new_token(grant["login"]),
                "refreshToken": secrets.token_hex(8),
                "expireIn": 7200,
                "corpId": self.users[grant["login"]].get("_corp", self.corp_id),
            }
        if path == "/v1.0/contact/users/me":
            login = self.tokens.get(headers.get("x-acs-dingtalk-access-token", ""))
            if login is None:
                return 401, {"code": "InvalidAuthentication", "message": "不合法的access_token"}
            user = self.users[login]
            return 200, {
                "nick": user["name"],
                "unionId": user["unionid"],
                "openId": f"open-{login}",
                "email": user.get("personal_email", ""),
                "mobile": user.get("mobile", ""),
                "stateCode": "86",
                "avatarUrl": "",
            }
        if path == "/gettoken":
            if (
                query.get("appkey") != self.client_id
                or query.get("appsecret") != self.client_secret
            ):
                return 200, {"errcode": 40089, "errmsg": "不合法的corpid或corpsecret"}
            token = secrets.token_hex(16)
            self.app_tokens.add(token)
            return 200, {"errcode": 0, "errmsg": "ok", "access_token": token, "expires_in": 7200}
        if query.get("access_token") not in self.app_tokens:
            return 200, {"errcode": 88, "errmsg": "不合法的access_token"}
        if path == "/topapi/user/getbyunionid":
            for user in self.users.values():
                if user["unionid"] == body.get("unionid") and user.get("userid"):
                    result = {"contact_type": 0, "userid": user["userid"]}
                    return 200, {"errcode": 0, "errmsg": "ok", "result": result}
            return 200, {"errcode": 60121, "errmsg": "找不到该用户"}
        if path == "/topapi/v2/user/get":
            for user in self.users.values():
                if user.get("userid") == body.get("userid"):
                    result = {
                        k: v
                        for k, v in user.items()
                        if not k.startswith("_") and k != "personal_email"
                    }
                    return 200, {"errcode": 0, "errmsg": "ok", "result": result}
            return 200, {"errcode": 60121, "errmsg": "找不到该用户"}
        return 404, {"code": "NotFound", "message": "not found"}
