"""Connectors in the console: who may open each page, adding a connector (credentials written
once, encrypted, never shown), the setup guide, testing credentials against a loopback platform,
rotation, disabling, bindings."""

from __future__ import annotations

import html
import socket

import pytest
from django.db import connection
from django.urls import reverse

from cadre.governance.models import AuditEvent
from cadre.tenancy.actors import member_actor
from connectors.base import services
from connectors.feishu.inbound import FeishuPlatform
from connectors.feishu.tests.fake_api import APP_ID, APP_SECRET, FakeFeishu
from connectors.models import Connector, ConnectorBinding, DirectoryConflict, UnmappedIdentity
from connectors.slack.tests.fake_api import BOT_TOKEN, FakeSlack
from connectors.tests.fakes import FakePlatformServer
from connectors.wecom.tests.fake_api import CORP_ID, CORP_SECRET, FakeWeCom
from tests.factories import DepartmentFactory, PositionFactory
from tests.refusals import nothing_changes

pytestmark = pytest.mark.django_db

WEBHOOK_SECRET = "whsec-console-0123456789"


@pytest.fixture
def fake_server():
    server = FakePlatformServer().start()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def _no_cached_tokens():
    from django.core.cache import cache

    client = cache._cache.get_client(write=True)
    for key in client.scan_iter(match="*connectors:token:*"):
        client.delete(key)


def _connector(owner, platform="webhook", credentials=None, settings=None, name=None):
    return services.connector_create(
        actor=member_actor(owner),
        platform=platform,
        name=name or f"{platform} connector",
        credentials=credentials or {"signing_secret": WEBHOOK_SECRET},
        settings=settings or {},
    )


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# --- access -------------------------------------------------------------------------------

DETAIL_PAGES = [
    "console:connector",
    "console:connector_rotate",
    "console:connector_bindings",
    "console:connector_identities",
]


@pytest.fixture
def acme_connector(alice):
    return _connector(alice)


@pytest.mark.parametrize("url_name", DETAIL_PAGES)
def test_owner_opens_connector_pages(alice, browser, acme_connector, url_name):
    response = browser(alice).get(reverse(url_name, args=[acme_connector.pk]))
    assert response.status_code == 200
    assert acme_connector.name in response.content.decode()


@pytest.mark.parametrize("url_name", DETAIL_PAGES)
def test_employee_is_denied_connector_pages(bob, browser, acme_connector, url_name):
    response = browser(bob).get(reverse(url_name, args=[acme_connector.pk]))
    assert response.status_code == 403
    assert "connector.manage" in response.content.decode()


@pytest.mark.parametrize("url_name", DETAIL_PAGES)
def test_outsider_gets_404_for_another_organizations_connector(
    charlie, browser, acme_connector, url_name
):
    response = browser(charlie).get(reverse(url_name, args=[acme_connector.pk]))
    assert response.status_code == 404


@pytest.mark.parametrize(
    "url_name", ["console:connector_status", "console:connector_test"], ids=["status", "test"]
)
def test_outsider_cannot_act_on_another_organizations_connector(
    charlie, bob, browser, acme_connector, url_name
):
    url = reverse(url_name, args=[acme_connector.pk])
    assert browser(charlie).post(url, {"status": "disabled"}).status_code == 404
    assert browser(bob).post(url, {"status": "disabled"}).status_code == 403
    acme_connector.refresh_from_db()
    assert acme_connector.status == "active"
    assert not AuditEvent.objects.filter(action="connector.test_credentials").exists()


def test_it_admin_sees_the_list_and_employee_is_denied(make_member, bob, browser, acme_connector):
    it_admin = make_member(roles=["it_admin"])
    page = browser(it_admin).get(reverse("console:connectors"))
    assert page.status_code == 200
    assert acme_connector.name in page.content.decode()
    assert browser(bob).get(reverse("console:connectors")).status_code == 403
    assert browser(bob).get(reverse("console:connector_create")).status_code == 403


def test_list_shows_only_own_organization_connectors(charlie, browser, acme_connector):
    page = browser(charlie).get(reverse("console:connectors")).content.decode()
    assert acme_connector.name not in page
    assert acme_connector.public_id not in page


def test_list_queries_do_not_grow_with_the_number_of_connectors(alice, browser, acme_connector):
    from django.test.utils import CaptureQueriesContext

    client = browser(alice)
    client.get(reverse("console:connectors"))  # warm the per-process caches (content types)
    with CaptureQueriesContext(connection) as one:
        assert client.get(reverse("console:connectors")).status_code == 200
    for n in range(4):
        _connector(alice, name=f"more {n}")
    with CaptureQueriesContext(connection) as five:
        page = client.get(reverse("console:connectors")).content.decode()
    assert "more 3" in page
    assert len(five) == len(one)


def test_navigation_links_the_connectors_page(alice, browser):
    home = browser(alice).get(reverse("console:home")).content.decode()
    assert f'href="{reverse("console:connectors")}"' in home


def test_list_shows_health_from_the_connector(alice, browser, acme_connector):
    Connector.objects.filter(pk=acme_connector.pk).update(signature_rejections=7, failures=3)
    UnmappedIdentity.objects.create(
        organization=alice.organization, connector=acme_connector, platform_user_id="u-9"
    )
    page = browser(alice).get(reverse("console:connectors")).content.decode()
    assert "7 signature rejections, 3 failures" in page
    assert "1 waiting" in page


# --- adding a connector -------------------------------------------------------------------


def test_adding_a_connector_stores_encrypted_credentials_that_never_render(alice, browser):
    client = browser(alice)
    response = client.post(
        reverse("console:connector_create"),
        {
            "platform": "feishu",
            "name": "Feishu HQ",
            "credential_app_id": "cli_console_app",
            "credential_app_secret": "feishu-secret-value-1",
            "credential_encrypt_key": "encrypt-key-value-2",
            "setting_domain": "feishu",
            "setting_mode": "webhook",
        },
    )
    connector = Connector.objects.get(name="Feishu HQ")
    assert response.status_code == 302
    assert response["Location"] == reverse("console:connector", args=[connector.pk])
    assert connector.credentials == {
        "app_id": "cli_console_app",
        "app_secret": "feishu-secret-value-1",
        "encrypt_key": "encrypt-key-value-2",
    }
    assert connector.settings == {"domain": "feishu", "mode": "webhook"}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT credentials_encrypted FROM connectors_connector WHERE id = %s", [connector.pk]
        )
        stored = cursor.fetchone()[0]
    assert "feishu-secret-value-1" not in stored and "encrypt-key-value-2" not in stored
    for url in (
        reverse("console:connectors"),
        reverse("console:connector", args=[connector.pk]),
        reverse("console:connector_rotate", args=[connector.pk]),
        reverse("console:connector_bindings", args=[connector.pk]),
        reverse("console:connector_identities", args=[connector.pk]),
    ):
        page = client.get(url).content.decode()
        assert "feishu-secret-value-1" not in page, url
        assert "encrypt-key-value-2" not in page, url
    event = AuditEvent.objects.get(action="connector.create")
    assert "feishu-secret-value-1" not in str(event.changes)


def test_a_form_with_errors_does_not_send_the_typed_secret_back(alice, browser):
    response = browser(alice).post(
        reverse("console:connector_create"),
        {"platform": "slack", "name": "", "credential_bot_token": "xoxb-typed-once-999"},
    )
    assert response.status_code == 200
    page = response.content.decode()
    assert "xoxb-typed-once-999" not in page
    assert "This field is required." in page
    assert not Connector.objects.exists()


def test_choosing_a_platform_shows_its_credential_fields(alice, browser):
    client = browser(alice)
    page = client.get(reverse("console:connector_create"), {"platform": "wecom"}).content.decode()
    assert "EncodingAESKey" in page and "Corp ID" in page and "AgentId" in page
    fields = client.get(
        reverse("console:connector_create"), {"platform": "slack"}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert fields.startswith('<div id="platform-fields">')
    assert "Signing Secret" in fields and "<html" not in fields


def test_a_missing_sdk_extra_is_named_with_its_install_command(alice, browser, monkeypatch):
    # As on a server without lark-oapi: the real check finds no such module.
    monkeypatch.setattr(FeishuPlatform, "extra_module", "lark_oapi_absent_for_this_test")
    client = browser(alice)
    page = client.get(reverse("console:connector_create"), {"platform": "feishu"})
    assert 'pip install "cadre[feishu]"' in html.unescape(page.content.decode())
    refused = client.post(
        reverse("console:connector_create"),
        {
            "platform": "feishu",
            "name": "Feishu stream",
            "credential_app_id": "cli_x",
            "credential_app_secret": "s",
            "setting_mode": "long_connection",
        },
    )
    assert refused.status_code == 200
    body = html.unescape(refused.content.decode())
    assert "lark_oapi_absent_for_this_test package, which is not installed" in body
    assert 'pip install "cadre[feishu]"' in body
    assert not Connector.objects.exists()


def test_duplicate_name_is_shown_on_the_form(alice, browser, acme_connector):
    response = browser(alice).post(
        reverse("console:connector_create"),
        {
            "platform": "webhook",
            "name": acme_connector.name,
            "credential_signing_secret": "another-secret",
        },
    )
    assert response.status_code == 200
    assert "A connector with this name already exists." in response.content.decode()
    assert Connector.objects.count() == 1


# --- detail: what to paste into the platform ---------------------------------------------


def test_feishu_page_gives_callback_url_events_and_encryption_settings(alice, browser):
    connector = _connector(alice, "feishu", {"app_id": "cli_1", "app_secret": "s-1"})
    page = browser(alice).get(reverse("console:connector", args=[connector.pk])).content.decode()
    assert f"/connectors/feishu/{connector.public_id}/events" in page
    for text in ("im.message.receive_v1", "card.action.trigger", "Encrypt Key", "Verification"):
        assert text in page


@pytest.mark.parametrize(
    ("base_url", "platform", "credentials", "other_way"),
    [
        (
            "http://127.0.0.1:8000",
            "feishu",
            {"app_id": "cli_1", "app_secret": "s"},
            "long-connection mode",
        ),
        ("http://localhost:8000", "dingtalk", {"app_key": "k", "app_secret": "s"}, "stream mode"),
        ("http://192.168.1.20", "slack", {"bot_token": "xoxb-1", "signing_secret": "s"}, None),
    ],
)
def test_a_callback_url_the_platform_cannot_reach_is_flagged_with_the_way_out(
    alice, browser, settings, base_url, platform, credentials, other_way
):
    settings.CADRE_BASE_URL = base_url
    connector = _connector(alice, platform, credentials, {"mode": "webhook"})
    page = browser(alice).get(reverse("console:connector", args=[connector.pk])).content.decode()
    assert f'value="{base_url}/connectors/{platform}/' in page
    start = page.index('data-testid="callback-unreachable"')
    warning = html.unescape(page[start : page.index("</div>", start)])
    assert "cannot deliver events to it" in warning and "Set CADRE_BASE_URL" in warning
    if other_way:
        assert f"switch this connector to {other_way}" in warning
    else:
        assert "switch this connector" not in warning


def test_a_public_callback_url_or_a_connection_mode_gets_no_warning(alice, browser, settings):
    feishu = _connector(alice, "feishu", {"app_id": "cli_1", "app_secret": "s"})
    streaming = _connector(
        alice, "dingtalk", {"app_key": "k", "app_secret": "s"}, {"mode": "stream"}
    )
    settings.CADRE_BASE_URL = "http://127.0.0.1:8000"
    page = browser(alice).get(reverse("console:connector", args=[streaming.pk])).content.decode()
    assert "callback-unreachable" not in page  # no callback URL at all
    settings.CADRE_BASE_URL = "https://cadre.acme.example"
    page = browser(alice).get(reverse("console:connector", args=[feishu.pk])).content.decode()
    assert 'value="https://cadre.acme.example/connectors/feishu/' in page
    assert "callback-unreachable" not in page


@pytest.mark.parametrize(
    ("platform", "credentials", "settings", "expected"),
    [
        (
            "wecom",
            {"corp_id": "ww1", "corp_secret": "s", "token": "t", "encoding_aes_key": "k" * 43},
            {"agent_id": 1000002},
            ["Token", "EncodingAESKey", "/connectors/wecom/", "trusted IP"],
        ),
        (
            "slack",
            {"bot_token": "xoxb-1", "signing_secret": "s"},
            {},
            ["Event Subscriptions", "Interactivity", "chat:write", "users:read.email"],
        ),
        (
            "webhook",
            {"signing_secret": "s"},
            {},
            ["X-Cadre-Signature", "X-Cadre-Timestamp", "HMAC-SHA256"],
        ),
        (
            "dingtalk",
            {"app_key": "k", "app_secret": "s"},
            {"mode": "stream"},
            ["Stream mode", "connectors_stream"],
        ),
    ],
    ids=lambda value: value if isinstance(value, str) else None,
)
def test_each_platform_page_says_what_to_paste(
    alice, browser, platform, credentials, settings, expected
):
    connector = _connector(alice, platform, credentials, settings)
    page = browser(alice).get(reverse("console:connector", args=[connector.pk])).content.decode()
    for text in expected:
        assert text in page, text
    if settings.get("mode") == "stream":
        assert connector.public_id in page


# --- testing credentials ------------------------------------------------------------------


def test_testing_feishu_credentials_asks_the_token_endpoint_and_is_audited(
    alice, browser, fake_server
):
    feishu = FakeFeishu(fake_server)
    connector = _connector(
        alice,
        "feishu",
        {"app_id": APP_ID, "app_secret": APP_SECRET},
        {"api_base_url": feishu.url},
    )
    response = browser(alice).post(
        reverse("console:connector_test", args=[connector.pk]), HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 200
    assert "issued an access token" in response.content.decode()
    assert len(fake_server.calls("/open-apis/auth/v3/tenant_access_token/internal")) == 1
    event = AuditEvent.objects.get(action="connector.test_credentials")
    assert event.changes["ok"] is True
    assert event.changes["host"] == feishu.url.removeprefix("http://")


def test_wrong_credentials_are_reported_as_refused(alice, browser, fake_server):
    feishu = FakeFeishu(fake_server)
    connector = _connector(
        alice, "feishu", {"app_id": APP_ID, "app_secret": "wrong"}, {"api_base_url": feishu.url}
    )
    response = browser(alice).post(
        reverse("console:connector_test", args=[connector.pk]), HTTP_HX_REQUEST="true"
    )
    body = response.content.decode()
    assert "The platform refused the credentials" in body and "10014" in body


def test_wecom_and_slack_credentials_are_checked_at_their_endpoints(alice, browser, fake_server):
    wecom = FakeWeCom(fake_server)
    slack = FakeSlack(fake_server)
    fake_server.route(
        "POST",
        "/api/auth.test",
        lambda request: (
            (200, {"ok": True, "user": "cadre", "team": "Acme"})
            if request.headers.get("authorization") == f"Bearer {BOT_TOKEN}"
            else (200, {"ok": False, "error": "invalid_auth"})
        ),
    )
    wecom_connector = _connector(
        alice,
        "wecom",
        {"corp_id": CORP_ID, "corp_secret": CORP_SECRET, "token": "t", "encoding_aes_key": "k"},
        {"api_base_url": wecom.url},
    )
    slack_connector = _connector(
        alice, "slack", {"bot_token": BOT_TOKEN, "signing_secret": "s"}, {"api_base_url": slack.url}
    )
    client = browser(alice)
    wecom_result = client.post(
        reverse("console:connector_test", args=[wecom_connector.pk]), HTTP_HX_REQUEST="true"
    ).content.decode()
    slack_result = client.post(
        reverse("console:connector_test", args=[slack_connector.pk]), HTTP_HX_REQUEST="true"
    ).content.decode()
    assert "issued an access token" in wecom_result
    assert "Slack accepted the bot token (cadre in Acme)" in slack_result
    assert fake_server.calls("/cgi-bin/gettoken") and fake_server.calls("/api/auth.test")


def test_a_webhook_test_sends_a_signed_ping_to_its_callback_url(alice, browser, fake_server):
    fake_server.route("POST", "/replies", lambda request: (200, {"ok": True}))
    connector = _connector(alice, settings={"callback_url": f"{fake_server.url}/replies"})
    result = browser(alice).post(
        reverse("console:connector_test", args=[connector.pk]), HTTP_HX_REQUEST="true"
    )
    assert "The callback URL accepted a signed ping." in result.content.decode()
    (ping,) = fake_server.calls("/replies")
    assert ping.json()["type"] == "ping"
    assert ping.headers["x-cadre-signature"].startswith("v1=")


def test_an_unreachable_platform_is_reported_clearly(alice, browser):
    port = _closed_port()
    connector = _connector(
        alice,
        "feishu",
        {"app_id": APP_ID, "app_secret": APP_SECRET},
        {"api_base_url": f"http://127.0.0.1:{port}"},
    )
    client = browser(alice)
    response = client.post(reverse("console:connector_test", args=[connector.pk]))
    assert response.status_code == 302  # without htmx: the result is a message on the page
    page = client.get(response["Location"]).content.decode()
    assert f"Could not reach 127.0.0.1:{port}" in page
    event = AuditEvent.objects.get(action="connector.test_credentials")
    assert event.changes["ok"] is False and event.changes["reachable"] is False
    assert event.changes["host"] == f"127.0.0.1:{port}"


# --- rotate, disable ----------------------------------------------------------------------


def test_rotating_keeps_fields_left_empty_and_never_shows_the_old_values(alice, browser):
    connector = _connector(
        alice,
        "feishu",
        {"app_id": "cli_1", "app_secret": "old-secret-1", "encrypt_key": "kept-key-2"},
    )
    client = browser(alice)
    url = reverse("console:connector_rotate", args=[connector.pk])
    assert "old-secret-1" not in client.get(url).content.decode()
    empty = client.post(url, {})
    assert "Enter at least one new credential." in empty.content.decode()
    response = client.post(url, {"credential_app_secret": "new-secret-3"})
    assert response.status_code == 302
    connector.refresh_from_db()
    assert connector.credentials == {
        "app_id": "cli_1",
        "app_secret": "new-secret-3",
        "encrypt_key": "kept-key-2",
    }
    assert AuditEvent.objects.filter(action="connector.rotate_credentials").count() == 1


def test_disabling_and_enabling_a_connector(alice, browser, acme_connector):
    client = browser(alice)
    url = reverse("console:connector_status", args=[acme_connector.pk])
    client.post(url, {"status": "disabled"})
    acme_connector.refresh_from_db()
    assert acme_connector.status == "disabled"
    page = client.get(reverse("console:connector", args=[acme_connector.pk])).content.decode()
    assert "Enable" in page
    client.post(url, {"status": "active"})
    acme_connector.refresh_from_db()
    assert acme_connector.status == "active"
    assert AuditEvent.objects.filter(action="connector.update").count() == 2
    assert client.post(url, {"status": "deleted"}).status_code == 302
    acme_connector.refresh_from_db()
    assert acme_connector.status == "active"


# --- bindings -----------------------------------------------------------------------------


def test_bindings_are_added_and_removed(alice, bob, browser, acme_connector):
    sales = PositionFactory(organization=alice.organization, name="Sales")
    client = browser(alice)
    url = reverse("console:connector_bindings", args=[acme_connector.pk])
    response = client.post(
        url,
        {"name": "Sales team", "positions": [sales.pk], "members": [bob.pk], "chat_ids": "oc_1\n"},
    )
    assert response.status_code == 302
    binding = ConnectorBinding.objects.get(connector=acme_connector)
    assert list(binding.positions.all()) == [sales]
    assert list(binding.members.all()) == [bob]
    assert binding.chat_ids == ["oc_1"]
    page = client.get(url).content.decode()
    assert "Sales team" in page and "oc_1" in page
    client.post(reverse("console:connector_binding_remove", args=[acme_connector.pk, binding.pk]))
    assert not ConnectorBinding.objects.exists()
    assert AuditEvent.objects.filter(action__in=["connector.bind", "connector.unbind"]).count() == 2


def test_a_binding_needs_someone_and_refuses_other_organizations_objects(
    alice, charlie, browser, acme_connector
):
    client = browser(alice)
    url = reverse("console:connector_bindings", args=[acme_connector.pk])
    empty = client.post(url, {"name": "nobody"})
    assert "Choose whom this binding serves" in empty.content.decode()
    foreign = DepartmentFactory(organization=charlie.organization)
    refused = client.post(url, {"departments": [foreign.pk]})
    assert refused.status_code == 200
    assert "Select a valid choice" in refused.content.decode()
    assert not ConnectorBinding.objects.exists()


def test_outsider_cannot_remove_a_binding(alice, charlie, browser, acme_connector):
    binding = services.binding_create(
        actor=member_actor(alice), connector=acme_connector, chat_ids=["oc_1"]
    )
    url = reverse("console:connector_binding_remove", args=[acme_connector.pk, binding.pk])
    assert browser(charlie).post(url).status_code == 404
    assert ConnectorBinding.objects.filter(pk=binding.pk).exists()


# --- directory conflicts ------------------------------------------------------------------


@pytest.mark.parametrize("value", ["abc", "²", "-1", "1e3"])
def test_a_conflict_form_with_a_member_that_is_no_key_is_refused_on_the_form(
    alice, browser, acme_connector, value
):
    conflict = DirectoryConflict.objects.create(
        organization=alice.organization,
        connector=acme_connector,
        kind="local_edit",
        platform_user_id="u-1",
        member=alice,
        fields=["title"],
    )
    url = reverse("console:connector_directory_conflict", args=[acme_connector.pk, conflict.pk])
    with nothing_changes(conflict):
        response = browser(alice).post(
            url, {"member": value, "resolution": "keep_local"}, follow=True
        )
    assert response.status_code == 200
    assert response.redirect_chain[-1][0] == reverse("console:connector", args=[acme_connector.pk])
    assert "Choose a member of this organization." in response.content.decode()
