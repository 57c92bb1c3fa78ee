"""django-oauth-toolkit's OpenID Connect provider (tests/tenancy/dot_idp/) run as its own process
on loopback for the SSO tests, and a browser that signs in and out at it through its own pages.

A code base other than Cadre's relying party (Authlib + joserfc): discovery, RS256 JWKS with
key rotation, the authorization code flow with PKCE, `email_verified`, a groups claim,
RP-initiated logout. Its state (users, keys) lives in a temporary directory for the session."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import time
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import httpx
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "idp-password-7"
_START_SECONDS = 60


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _rsa_pem() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


class _Form(HTMLParser):
    """The first form of a page: its action and the values it would submit (no buttons)."""

    def __init__(self):
        super().__init__()
        self.action: str | None = None
        self.fields: dict[str, str] = {}
        self._done = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "form" and self.action is None and not self._done:
            self.action = attrs.get("action") or ""
        elif (
            tag == "input"
            and self.action is not None
            and not self._done
            and attrs.get("name")
            and attrs.get("type") != "submit"
        ):
            self.fields[attrs["name"]] = attrs.get("value") or ""

    def handle_endtag(self, tag):
        if tag == "form" and self.action is not None:
            self._done = True


def page_form(response: httpx.Response) -> tuple[str, dict[str, str]]:
    """(the URL the page's first form posts to, its fields)."""
    form = _Form()
    form.feed(response.text)
    assert form.action is not None, f"no form on {response.url}: {response.text[:300]}"
    return urljoin(str(response.url), form.action), form.fields


class DotIdp:
    """The provider process. `issuer` is what Cadre is configured with."""

    client_id = "cadre-dot"

    def __init__(self, state_dir: Path):
        self.dir = state_dir
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.issuer = f"{self.base}/o"
        self.client_secret = secrets.token_urlsafe(24)
        self.admin_token = secrets.token_urlsafe(24)
        self.process: subprocess.Popen | None = None
        self._retired = 0

    def _env(self) -> dict:
        return {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.tenancy.dot_idp.settings",
            "PYTHONPATH": str(ROOT),
            "DOT_IDP_DIR": str(self.dir),
            "DOT_IDP_ISSUER": self.issuer,
            "DOT_IDP_ADMIN_TOKEN": self.admin_token,
        }

    def _manage(self, *args: str) -> None:
        done = subprocess.run(
            [sys.executable, "-m", "django", *args],
            cwd=self.dir,
            env=self._env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, f"manage.py {args[0]}: {done.stderr[-2000:]}"

    def start(self, *, redirect_uris: list[str], post_logout_redirect_uris: list[str]) -> None:
        (self.dir / "active.pem").write_text(_rsa_pem())
        self._manage("migrate", "--noinput")
        self.register(redirect_uris, post_logout_redirect_uris)
        self._serve()

    def register(self, redirect_uris: list[str], post_logout_redirect_uris: list[str]) -> None:
        """Register Cadre's client, or add URIs to it (a live server's callback)."""
        self._manage(
            "idp_setup",
            f"--client-id={self.client_id}",
            f"--client-secret={self.client_secret}",
            *(f"--redirect-uri={uri}" for uri in redirect_uris),
            *(f"--post-logout-redirect-uri={uri}" for uri in post_logout_redirect_uris),
        )

    def _serve(self) -> None:
        log = (self.dir / "server.log").open("a")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "django", "runserver", f"127.0.0.1:{self.port}", "--noreload"],
            cwd=self.dir,
            env=self._env(),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + _START_SECONDS
        while True:
            assert self.process.poll() is None, (self.dir / "server.log").read_text()[-2000:]
            try:
                if httpx.get(f"{self.issuer}/.well-known/openid-configuration").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the DOT identity provider did not start"
            time.sleep(0.1)

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None

    def _restart(self) -> None:
        self.stop()
        self._serve()

    # --- what an IdP administrator does ---------------------------------------------------

    def user(self, username: str, **claims) -> None:
        """Create or change a user (email, email_verified, name, employee_no, groups)."""
        response = httpx.post(
            f"{self.base}/admin-api/users/",
            json={"username": username, "password": PASSWORD, **claims},
            headers={"Authorization": f"Bearer {self.admin_token}"},
        )
        assert response.status_code == 200, response.text

    def rotate_key(self) -> None:
        """A new signing key; the one it replaces stays published in the JWKS (inactive)."""
        self._retired += 1
        (self.dir / "active.pem").rename(self.dir / f"inactive-{self._retired}.pem")
        (self.dir / "active.pem").write_text(_rsa_pem())
        self._restart()

    def retire_inactive_keys(self) -> None:
        """Stop publishing the replaced keys."""
        for path in self.dir.glob("inactive-*.pem"):
            path.unlink()
        self._restart()

    def jwks_kids(self) -> list[str]:
        jwks = httpx.get(f"{self.issuer}/.well-known/jwks.json").json()
        return [key["kid"] for key in jwks["keys"]]

    def browser(self) -> IdpBrowser:
        return IdpBrowser(self)


class IdpBrowser:
    """A user's browser at the provider: its session cookie, its sign-in form, its logout
    confirmation. Redirects within the provider are followed; the one leaving it (back to
    Cadre) is returned."""

    def __init__(self, idp: DotIdp):
        self.idp = idp
        self.http = httpx.Client(follow_redirects=False, timeout=15)
        self.pages: list[str] = []  # the provider's pages shown, by path

    def _follow(self, response: httpx.Response) -> httpx.Response:
        while response.is_redirect:
            target = urljoin(str(response.url), response.headers["Location"])
            if urlsplit(target).netloc != urlsplit(self.idp.base).netloc:
                break
            response = self.http.get(target)
        if response.status_code == 200:
            self.pages.append(response.url.path)
        return response

    def _leaving(self, response: httpx.Response) -> str:
        assert response.is_redirect, f"{response.status_code} {response.text[:500]}"
        return response.headers["Location"]

    def sign_in(self, authorize_url: str, username: str, password: str = PASSWORD) -> str:
        """Open the authorization URL; sign in on the provider's form if it asks. The URL the
        provider sends the browser back to (Cadre's callback)."""
        response = self._follow(self.http.get(authorize_url))
        if response.status_code == 200 and urlsplit(str(response.url)).path == "/accounts/login/":
            action, fields = page_form(response)
            fields.update(username=username, password=password)
            response = self._follow(self.http.post(action, data=fields))
        return self._leaving(response)

    def log_out(self, end_session_url: str) -> str:
        """Open the end_session URL, confirm on the provider's page; where it sends the browser."""
        response = self._follow(self.http.get(end_session_url))
        if response.status_code == 200:
            action, fields = page_form(response)
            response = self._follow(self.http.post(action, data={**fields, "allow": "Logout"}))
        return self._leaving(response)

    def signed_in(self) -> bool:
        """Whether the provider still knows this browser's user (a page only its signed-in
        users see answers, rather than sending the browser to the sign-in form)."""
        return self.http.get(f"{self.idp.issuer}/authorized_tokens/").status_code == 200
