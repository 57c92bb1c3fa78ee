# ruff: noqa: F811 - the fixtures imported from test_browser_chat are parameters here
"""OIDC sign-in in a real browser (Debian's Chromium): "Sign in with …" on the login page,
the sign-in form of django-oauth-toolkit's provider (its own process), back to the console
signed in as the matched member; the password form refused under "SSO required". Screenshots
in var/screenshots/sso-*.png."""

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
from tests.tenancy.conftest import (  # noqa: F401 - the DOT provider's fixtures
    DOT_SLUG,
    dot,
    dot_idp_process,
)
from tests.tenancy.dot_provider import PASSWORD as IDP_PASSWORD

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
SHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"


@pytest.fixture
def idp(dot, live_server_url):
    """The DOT provider, with the live server's callback registered for Cadre's client."""
    dot.register([f"{live_server_url}/sso/acme/{DOT_SLUG}/callback/"], [])
    return dot


@pytest.fixture
def page(chromium, live_server_url, org_a, idp):
    SHOTS.mkdir(parents=True, exist_ok=True)
    IdentityProvider.objects.create(
        organization=org_a,
        name="Acme IdP",
        slug=DOT_SLUG,
        issuer=idp.issuer,
        client_id=idp.client_id,
        client_secret=idp.client_secret,
    )
    with browser_page(chromium, live_server_url) as page:
        yield page


def test_sign_in_with_the_provider_reaches_the_console(page, bob, live_server_url):
    page.goto("/login/?org=acme")
    page.screenshot(path=str(SHOTS / "sso-login.png"))
    page.get_by_role("link", name="Sign in with Acme IdP").click()
    expect(page.get_by_role("heading", name="DOT IdP")).to_be_visible()
    page.get_by_label("Username").fill("bob")
    page.get_by_label("Password").fill(IDP_PASSWORD)
    page.get_by_role("button", name="Sign in").click()
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


# --- Feishu / Lark login and the test sign-in button ---------------------------------------


@pytest.fixture
def feishu():
    from tests.tenancy.im_oauth_fakes import FeishuFake

    with FeishuFake() as fake:
        fake.users["bob"] = {
            "name": "Bob",
            "open_id": "ou_bob",
            "union_id": "on_bob",
            "tenant_key": "tk-acme",
            "email": "",
            "employee_no": "",
        }
        yield fake


def test_feishu_login_reaches_the_console_as_the_im_matched_member(
    chromium, live_server_url, org_a, bob, feishu
):
    from cadre.tenancy.models import IMIdentity

    SHOTS.mkdir(parents=True, exist_ok=True)
    IMIdentity.objects.create(
        organization=org_a, member=bob, platform="feishu", platform_user_id="ou_bob"
    )
    IdentityProvider.objects.create(
        organization=org_a,
        name="Feishu",
        slug="feishu",
        kind="feishu",
        client_id=feishu.client_id,
        client_secret=feishu.client_secret,
        authorize_base_url=feishu.url,
        api_base_url=feishu.url,
    )
    with browser_page(chromium, live_server_url) as page:
        page.goto("/login/?org=acme")
        page.get_by_role("link", name="Sign in with Feishu").click()
        expect(page.get_by_role("heading", name="Feishu")).to_be_visible()
        page.get_by_label("Account").fill("bob")
        page.get_by_role("button", name="Authorize").click()
        page.wait_for_url(f"{live_server_url}/")
        expect(page.get_by_text("Bob").first).to_be_visible()
        page.screenshot(path=str(SHOTS / "sso-feishu-signed-in.png"))
    event = AuditEvent.objects.get(action="sso.signin", target_id=str(bob.pk))
    assert event.changes["after"]["matched_by"] == "im_identity"


def test_test_sign_in_button_shows_claims_and_mapping(
    chromium, live_server_url, org_a, alice, bob, idp
):
    from cadre.tenancy.models import SsoIdentity

    SHOTS.mkdir(parents=True, exist_ok=True)
    idp.user("bob", email="bob@acme.test", email_verified=True, groups=["cadre-admins"])
    IdentityProvider.objects.create(
        organization=org_a,
        name="Acme IdP",
        slug=DOT_SLUG,
        issuer=idp.issuer,
        client_id=idp.client_id,
        client_secret=idp.client_secret,
        scopes="openid email profile groups",
        group_roles=[{"value": "cadre-admins", "roles": ["it_admin"]}],
    )
    with browser_page(chromium, live_server_url) as page:
        page.goto("/login/?org=acme")
        page.get_by_label("Email").fill(alice.email)
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Sign in", exact=True).click()
        page.wait_for_url(f"{live_server_url}/")
        page.goto("/identity-providers/")
        page.get_by_role("link", name="Test sign-in").click()
        page.get_by_label("Username").fill("bob")
        page.get_by_label("Password").fill(IDP_PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_role("heading", name="Test sign-in with Acme IdP")).to_be_visible()
        expect(page.locator(".test-member")).to_have_text("Bob")
        expect(page.locator(".test-roles-after")).to_contain_text("it_admin")
        expect(page.locator(".test-claims")).to_contain_text("cadre-admins")
        page.screenshot(path=str(SHOTS / "sso-test-signin.png"), full_page=True)
        page.goto("/")
        expect(page.get_by_text("Alice").first).to_be_visible()  # still the admin
    bob.refresh_from_db()
    assert bob.roles == ["employee"] and not SsoIdentity.objects.exists()


# --- SAML 2.0 ----------------------------------------------------------------------------------


def test_saml_sign_in_through_the_loopback_idp_reaches_the_console(
    chromium, live_server_url, org_a, bob, settings
):
    from tests.tenancy.saml_idp import SamlIdp

    SHOTS.mkdir(parents=True, exist_ok=True)
    # The SP's entity id and ACS URL are built from CADRE_BASE_URL: here, the live server.
    settings.CADRE_BASE_URL = live_server_url
    with SamlIdp() as idp:
        idp.users["bob"] = {
            "name_id": "bob-persistent-1",
            "attributes": {"email": ["bob@acme.test"], "groups": ["cadre-admins"]},
        }
        IdentityProvider.objects.create(
            organization=org_a,
            name="Acme AD FS",
            slug="adfs",
            kind="saml",
            saml_metadata_xml=idp.metadata(),
            saml_entity_id=idp.entity_id,
            # Owners see the providers page, where the SP URLs are shown.
            group_roles=[{"value": "cadre-admins", "roles": ["owner"]}],
        )
        with browser_page(chromium, live_server_url) as page:
            page.goto("/login/?org=acme")
            page.get_by_role("link", name="Sign in with Acme AD FS").click()
            expect(page.get_by_role("heading", name="Test SAML IdP")).to_be_visible()
            page.get_by_label("Login").fill("bob")
            page.get_by_role("button", name="Sign in").click()
            expect(page.get_by_role("heading", name="Signed in at the test IdP")).to_be_visible()
            page.get_by_role("button", name="Continue").click()
            page.wait_for_url(f"{live_server_url}/")
            expect(page.get_by_text("Bob").first).to_be_visible()
            page.screenshot(path=str(SHOTS / "sso-saml-signed-in.png"))
            page.goto("/identity-providers/")
            expect(page.locator(".saml-acs-url")).to_have_text(
                f"{live_server_url}/sso/acme/adfs/saml/acs/"
            )
            page.screenshot(path=str(SHOTS / "sso-saml-providers.png"), full_page=True)
    event = AuditEvent.objects.get(action="sso.signin", target_id=str(bob.pk))
    assert event.changes["after"]["provider"] == "adfs"
    bob.refresh_from_db()
    assert "owner" in bob.roles
