"""Cadre's own OpenID Connect provider on loopback, for what a real provider cannot be made to
do: discovery, JWKS, a login page, the authorization code flow with PKCE (S256), RS256-signed
id_tokens (joserfc) with a session id (`sid`), back-channel logout tokens (django-oauth-toolkit,
the real provider of the happy paths in tests/tenancy/dot_provider.py, sends none), and an
end_session_endpoint.

Knobs let a test make it misbehave the ways broken providers (or attackers) do: another
audience or issuer, an expired token, a foreign signing key, an unpublished key id, another
sign-in's nonce."""

from __future__ import annotations

import base64
import hashlib
import html
import json
import secrets
import threading
import time
from http.server import ThreadingHTTPServer
from urllib.parse import parse_qs, urlencode, urlsplit

from joserfc import jwt
from joserfc.jwk import RSAKey

from tests.tenancy.loopback import QuietHandler


def _new_key(kid: str) -> RSAKey:
    return RSAKey.generate_key(2048, parameters={"kid": kid, "use": "sig", "alg": "RS256"})


class OidcProvider:
    def __init__(self, client_id: str = "cadre-test", client_secret: str = "s3cret-value"):
        self.client_id = client_id
        self.client_secret = client_secret
        self.key = _new_key("key-1")
        self.users: dict[str, dict] = {}  # login → extra claims (email, email_verified, name…)
        self.codes: dict[str, dict] = {}
        self.token_overrides: dict = {}  # claims replaced in the next id_tokens
        self.signing_key: RSAKey | None = None  # sign with this instead (not published)
        self.jwks_fetches = 0
        self.issued: list[str] = []  # every id_token handed out, oldest first
        self.end_session_requests: list[dict] = []  # RP-initiated logouts received
        provider = self

        class Handler(QuietHandler):
            def _form(self) -> dict:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length).decode()
                return {k: v[0] for k, v in parse_qs(raw).items()}

            def do_GET(self):
                url = urlsplit(self.path)
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                if url.path == "/.well-known/openid-configuration":
                    self._send(200, json.dumps(provider.discovery()).encode())
                elif url.path == "/jwks":
                    provider.jwks_fetches += 1
                    keys = {"keys": [provider.key.as_dict(private=False)]}
                    self._send(200, json.dumps(keys).encode())
                elif url.path == "/authorize":
                    self._send(200, provider.login_page(query).encode(), "text/html")
                elif url.path == "/logout":
                    provider.end_session_requests.append(query)
                    page = b"<!doctype html><title>Test IdP</title><h1>Signed out of Test IdP</h1>"
                    self._send(200, page, "text/html")
                else:
                    self._send(404, b"{}")

            def do_POST(self):
                url = urlsplit(self.path)
                form = self._form()
                if url.path == "/authorize":
                    location = provider.authorize(form)
                    self._send(302, b"", "text/plain", {"Location": location})
                elif url.path == "/token":
                    status, body = provider.token(form, self.headers.get("Authorization", ""))
                    self._send(status, json.dumps(body).encode())
                else:
                    self._send(404, b"{}")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.issuer = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()

    def discovery(self) -> dict:
        return {
            "issuer": self.issuer,
            "authorization_endpoint": f"{self.issuer}/authorize",
            "token_endpoint": f"{self.issuer}/token",
            "jwks_uri": f"{self.issuer}/jwks",
            "response_types_supported": ["code"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "code_challenge_methods_supported": ["S256"],
            "end_session_endpoint": f"{self.issuer}/logout",
            "backchannel_logout_supported": True,
            "backchannel_logout_session_supported": True,
            "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
        }

    def login_page(self, query: dict) -> str:
        hidden = "".join(
            f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">'
            for k, v in query.items()
        )
        return (
            "<!doctype html><title>Test IdP sign-in</title><h1>Test IdP</h1>"
            f'<form method="post" action="/authorize">{hidden}'
            '<label>Login <input name="login" id="login"></label>'
            '<button type="submit" id="approve">Sign in and allow</button></form>'
        )

    def authorize(self, form: dict) -> str:
        assert form["client_id"] == self.client_id, "unknown client"
        assert form["response_type"] == "code"
        assert form["code_challenge_method"] == "S256"
        code = secrets.token_urlsafe(24)
        self.codes[code] = {
            "login": form["login"],
            "redirect_uri": form["redirect_uri"],
            "nonce": form.get("nonce"),
            "challenge": form["code_challenge"],
        }
        return f"{form['redirect_uri']}?{urlencode({'code': code, 'state': form['state']})}"

    def _client_ok(self, form: dict, authorization: str) -> bool:
        if authorization.startswith("Basic "):
            client_id, _, secret = base64.b64decode(authorization[6:]).decode().partition(":")
        else:
            client_id, secret = form.get("client_id", ""), form.get("client_secret", "")
        return client_id == self.client_id and secrets.compare_digest(secret, self.client_secret)

    def token(self, form: dict, authorization: str) -> tuple[int, dict]:
        if not self._client_ok(form, authorization):
            return 401, {"error": "invalid_client"}
        grant = self.codes.pop(form.get("code", ""), None)  # a code works once
        if grant is None or grant["redirect_uri"] != form.get("redirect_uri"):
            return 400, {"error": "invalid_grant"}
        digest = hashlib.sha256(form.get("code_verifier", "").encode()).digest()
        if base64.urlsafe_b64encode(digest).rstrip(b"=").decode() != grant["challenge"]:
            return 400, {"error": "invalid_grant", "error_description": "PKCE"}
        return 200, {
            "access_token": secrets.token_urlsafe(16),
            "token_type": "Bearer",
            "expires_in": 300,
            "id_token": self.id_token(grant["login"], grant["nonce"]),
        }

    def id_token(self, login: str, nonce: str | None) -> str:
        now = int(time.time())
        claims = {
            "iss": self.issuer,
            "sub": f"sub-{login}",
            "aud": self.client_id,
            "iat": now,
            "exp": now + 300,
            "nonce": nonce,
            "sid": f"sid-{login}",
            **self.users.get(login, {}),
            **self.token_overrides,
        }
        key = self.signing_key or self.key
        token = jwt.encode({"alg": "RS256", "kid": key.kid}, claims, key)
        self.issued.append(token)
        return token

    def logout_token(self, login: str, *, drop: tuple = (), key: RSAKey | None = None, **claims):
        """A back-channel logout_token for the user's session (`drop`: claims left out;
        keyword arguments replace or add claims)."""
        now = int(time.time())
        payload = {
            "iss": self.issuer,
            "aud": self.client_id,
            "iat": now,
            "exp": now + 120,
            "jti": secrets.token_hex(8),
            "sub": f"sub-{login}",
            "sid": f"sid-{login}",
            "events": {"http://schemas.openid.net/event/backchannel-logout": {}},
            **claims,
        }
        for name in drop:
            payload.pop(name, None)
        signing = key or self.key
        header = {"alg": "RS256", "kid": signing.kid, "typ": "logout+jwt"}
        return jwt.encode(header, payload, signing)
