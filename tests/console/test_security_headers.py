"""Content-Security-Policy on console pages (nonce-based, no inline script) and HSTS only when
the instance is served over https."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client, override_settings
from django.urls import reverse

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = ROOT / "templates"


def _directives(header: str) -> dict[str, list[str]]:
    directives = {}
    for part in header.split(";"):
        words = part.split()
        if words:
            directives[words[0]] = words[1:]
    return directives


@pytest.mark.parametrize(
    "page", ["console:home", "console:members", "console:audit", "console:agents"]
)
def test_console_pages_carry_a_nonce_csp_without_inline_script(alice, browser, page):
    response = browser(alice).get(reverse(page))
    assert response.status_code == 200
    policy = _directives(response["Content-Security-Policy"])
    scripts = policy["script-src"]
    nonces = [word for word in scripts if word.startswith("'nonce-")]
    assert len(nonces) == 1
    assert "'unsafe-inline'" not in scripts and "'unsafe-eval'" not in scripts
    assert policy["object-src"] == ["'none'"] and policy["frame-ancestors"] == ["'none'"]
    nonce = nonces[0][len("'nonce-") : -1]
    body = response.content.decode()
    tags = re.findall(r"<script\b[^>]*>", body)
    assert tags and all(f'nonce="{nonce}"' in tag for tag in tags)


def test_each_response_gets_its_own_nonce(alice, browser):
    client = browser(alice)
    first = client.get(reverse("console:home"))["Content-Security-Policy"]
    second = client.get(reverse("console:home"))["Content-Security-Policy"]
    assert first != second


def test_sign_in_page_carries_the_policy(db):
    response = Client().get(reverse("console:login"))
    assert "'nonce-" in response["Content-Security-Policy"]


def test_no_template_has_inline_script_or_event_handlers():
    """Inline <script> bodies and on*= handlers would be blocked by the policy."""
    offenders = []
    for path in TEMPLATES.rglob("*.html"):
        text = path.read_text(encoding="utf-8")
        for match in re.finditer(r"<script\b([^>]*)>(.*?)</script>", text, flags=re.S):
            if "src=" not in match.group(1) or match.group(2).strip():
                offenders.append(f"{path.relative_to(ROOT)}: inline <script>")
        for match in re.finditer(r"<[a-z][^>]*\s(on[a-z]+)=", text):
            offenders.append(f"{path.relative_to(ROOT)}: {match.group(1)}= handler")
        if re.search(r"\shx-on[:-]", text):
            offenders.append(f"{path.relative_to(ROOT)}: hx-on (needs eval)")
    assert offenders == []


def _settings_for(base_url: str) -> str:
    env = {
        **os.environ,
        "CADRE_BASE_URL": base_url,
        "DATABASE_URL": "postgres://cadre@127.0.0.1:1/unused",
        "REDIS_URL": settings.REDIS_URL,
        "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'platform'}",
    }
    code = (
        "import cadre.settings as s; "
        "print(s.SECURE_HSTS_SECONDS, s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    return result.stdout.strip()


def test_hsts_is_set_only_for_an_https_base_url():
    assert _settings_for("https://cadre.example.com") == "31536000 True True"
    assert _settings_for("http://cadre.example.com") == "0 False False"


@override_settings(SECURE_HSTS_SECONDS=31536000)
def test_https_responses_carry_hsts(db):
    response = Client().get(reverse("console:login"), secure=True)
    assert response["Strict-Transport-Security"] == "max-age=31536000"


def test_http_responses_do_not_carry_hsts(db):
    assert settings.SECURE_HSTS_SECONDS == 0  # tests run with CADRE_BASE_URL=http://testserver
    response = Client().get(reverse("console:login"), secure=True)
    assert "Strict-Transport-Security" not in response
