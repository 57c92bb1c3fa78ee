# ruff: noqa: F811 - the fixtures imported from test_browser_chat are parameters here
"""OIDC sign-in in a real browser (Debian's Chromium): "Sign in with …" on the login page,
the provider's own login page, back to the console signed in as the matched member; the
password form refused under "SSO required". Screenshots in var/screenshots/sso-*.png."""

from __future__ import annotations

from pathlib import Path

import pytest

from cadre.governance.audit_models import AuditEvent
from cadre.tenancy.models import IdentityProvider
from tests.conftest import PASSWORD
from tests.console.test_browser_chat import (  # noqa: F401 - fixtures and helpers
    browser_page,
    chromium,
    expect,
    live_server_url,
)
from tests.tenancy.oidc_provider import OidcProvider

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
SHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"


@pytest.fixture
def idp():
    with OidcProvider() as provider:
        provider.users["bob"] = {"email": "bob@acme.test", "email_verified": True, "name": "Bob"}
        yield provider


@pytest.fixture
def page(chromium, live_server_url, org_a, idp):
    SHOTS.mkdir(parents=True, exist_ok=True)
    IdentityProvider.objects.create(
        organization=org_a,
        name="Acme Keycloak",
        slug="keycloak",
        issuer=idp.issuer,
        client_id=idp.client_id,
        client_secret=idp.client_secret,
    )
    with browser_page(chromium, live_server_url) as page:
        yield page


def test_sign_in_with_the_provider_reaches_the_console(page, bob, live_server_url):
    page.goto("/login/?org=acme")
    page.screenshot(path=str(SHOTS / "sso-login.png"))
    page.get_by_role("link", name="Sign in with Acme Keycloak").click()
    expect(page.get_by_role("heading", name="Test IdP")).to_be_visible()
    page.get_by_label("Login").fill("bob")
    page.get_by_role("button", name="Sign in and allow").click()
    page.wait_for_url(f"{live_server_url}/")
    expect(page.get_by_text("Bob").first).to_be_visible()
    page.screenshot(path=str(SHOTS / "sso-signed-in.png"))
    assert AuditEvent.objects.filter(action="sso.signin", target_id=str(bob.pk)).exists()


def test_sso_required_org_refuses_the_password_form(page, org_a, bob):
    org_a.settings = {"sso_required": True}
    org_a.save()
    page.goto("/login/?org=acme")
    page.get_by_label("Email").fill(bob.email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in", exact=True).click()
    expect(page.get_by_role("alert")).to_contain_text("requires single sign-on")
    page.screenshot(path=str(SHOTS / "sso-password-refused.png"))
    page.goto("/")
    assert "/login/" in page.url
