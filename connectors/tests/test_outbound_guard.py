"""Every request a connector makes goes through the outbound guard (cadre.outbound): an
`api_base_url` (or DingTalk's `oapi_base_url`) at an internal or metadata address is refused when
saved, and a destination that resolves to one by the time of the call — a platform API, a
directory read, a file download, a credentials test, DingTalk's sessionWebhook — gets nothing."""

from __future__ import annotations

import time

import pytest

from cadre.governance.models import AuditEvent
from cadre.tenancy.actors import member_actor
from connectors.base import platform_for, services
from connectors.base.attachments import fetch_capped
from connectors.base.transport import DestinationRefused, Recipient, TransportError
from connectors.dingtalk.tests.fake_api import APP_KEY, APP_SECRET, FakeDingTalk
from connectors.directory.contacts import directory_client
from connectors.models import Connector, Delivery
from connectors.outbound.sending import send
from connectors.tests.guard import reached
from connectors.tests.helpers import make_connector

pytestmark = pytest.mark.django_db

FEISHU = {"app_id": "cli_a", "app_secret": "s3cret"}
METADATA = "169.254.169.254"


@pytest.fixture
def no_internal_hosts(settings):
    settings.CADRE_CONNECTOR_ALLOWED_HOSTS = []


def _create(client, settings: dict, platform: str = "feishu", credentials: dict = FEISHU):
    return client.post(
        "/api/v1/connectors/",
        {"platform": platform, "name": "IM", "credentials": credentials, "settings": settings},
        format="json",
    )


# --- when the URL is saved ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://[fd00:ec2::254]/",
        "http://metadata.example.test/",  # a name resolving to the metadata address
        "http://127.0.0.1:8000/api/v1/",
        "http://[::ffff:127.0.0.1]/",
        "http://10.1.2.3/",
        "file:///etc/passwd",
        "gopher://open.feishu.cn/",
        12,
    ],
)
def test_an_api_base_url_at_an_internal_address_is_refused_and_nothing_stored(
    alice, client_for, no_internal_hosts, dns, url
):
    dns["metadata.example.test"] = METADATA
    response = _create(client_for(alice), {"api_base_url": url})
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "url_refused"
    assert "api_base_url" in error["details"]["settings"]
    assert not Connector.objects.exists()
    assert not AuditEvent.objects.filter(action="connector.create").exists()


def test_link_local_is_refused_even_when_every_internal_host_is_allowed(
    alice, client_for, settings
):
    settings.CADRE_CONNECTOR_ALLOWED_HOSTS = ["*"]
    response = _create(client_for(alice), {"api_base_url": "http://169.254.169.254/"})
    assert response.status_code == 400
    assert not Connector.objects.exists()


def test_dingtalk_oapi_base_url_is_checked_too(alice, client_for, no_internal_hosts):
    response = _create(
        client_for(alice),
        {"oapi_base_url": "http://169.254.169.254/"},
        platform="dingtalk",
        credentials={"app_key": APP_KEY, "app_secret": APP_SECRET},
    )
    assert response.status_code == 400
    assert "oapi_base_url" in response.json()["error"]["details"]["settings"]
    assert not Connector.objects.exists()


def test_updating_the_api_base_url_to_metadata_is_refused(alice, client_for, no_internal_hosts):
    client = client_for(alice)
    created = _create(client, {"api_base_url": "https://93.184.215.14"})  # public literal
    assert created.status_code == 201, created.content
    response = client.patch(
        f"/api/v1/connectors/{created.json()['id']}/",
        {"settings": {"api_base_url": "http://169.254.169.254/"}},
        format="json",
    )
    assert response.status_code == 400
    assert Connector.objects.get().settings["api_base_url"] == "https://93.184.215.14"


def test_public_and_allow_listed_api_base_urls_are_accepted(alice, client_for, settings):
    settings.CADRE_CONNECTOR_ALLOWED_HOSTS = ["10.9.0.0/16"]
    client = client_for(alice)
    assert _create(client, {"api_base_url": "https://93.184.215.14"}).status_code == 201
    assert (
        client.post(
            "/api/v1/connectors/",
            {
                "platform": "feishu",
                "name": "Private Feishu",
                "credentials": FEISHU,
                "settings": {"api_base_url": "http://10.9.1.1/"},
            },
            format="json",
        ).status_code
        == 201
    )


# --- when the call is made ---------------------------------------------------------------------


@pytest.fixture
def stored_at(alice):
    """A connector saved while its API's name was public, now resolving elsewhere."""

    def make(platform: str = "feishu", credentials: dict = FEISHU, **extra) -> Connector:
        return make_connector(
            alice,
            platform,
            credentials,
            {"api_base_url": "https://open.example.test", "max_attempts": 1, **extra},
        )

    return make


def test_a_send_to_an_api_that_now_resolves_to_metadata_sends_nothing(stored_at, dns, connections):
    connector = stored_at()
    dns["open.example.test"] = METADATA
    with pytest.raises(DestinationRefused) as refused:
        send(
            connector,
            kind="text",
            recipient="ou_1",
            body={"text": "the quarterly numbers"},
            idempotency_key="k-1",
        )
    assert not refused.value.retryable  # trying again sends nothing either
    assert reached(connections, METADATA, "open.example.test") == []
    delivery = Delivery.objects.get()
    assert delivery.status == Delivery.Status.FAILED and "refused" in delivery.error


def test_a_stored_api_base_url_at_metadata_is_refused_at_send_time(alice, stored_at, connections):
    connector = stored_at("slack", {"bot_token": "xoxb-1", "signing_secret": "s"})
    # Stored before the check existed (or written around it).
    Connector.objects.filter(pk=connector.pk).update(
        settings={"api_base_url": f"http://{METADATA}/api", "max_attempts": 1}
    )
    connector.refresh_from_db()
    with pytest.raises(DestinationRefused):
        platform_for(connector).transport().send_text(Recipient.chat("C1"), "hello")
    assert reached(connections, METADATA) == []


def test_a_directory_read_from_metadata_is_refused(stored_at, dns, connections):
    connector = stored_at(
        "dingtalk",
        {"app_key": APP_KEY, "app_secret": APP_SECRET},
        oapi_base_url="https://oapi.example.test",
    )
    dns["open.example.test"] = dns["oapi.example.test"] = METADATA
    with pytest.raises(TransportError):
        directory_client(connector).read_user("staff-1")
    assert reached(connections, METADATA, "open.example.test", "oapi.example.test") == []


def test_a_file_download_to_metadata_is_refused(stored_at, dns, connections):
    connector = stored_at("slack", {"bot_token": "xoxb-1", "signing_secret": "s"})
    dns["files.slack.com"] = METADATA
    transport = platform_for(connector).transport()
    with pytest.raises(DestinationRefused):
        fetch_capped(
            transport, "GET", "https://files.slack.com/files-pri/T1-F1/a.pdf", {},
            auth=False, limit=1000,
        )  # fmt: skip
    assert reached(connections, METADATA, "files.slack.com") == []


def test_testing_credentials_against_metadata_reports_it_and_sends_nothing(
    alice, stored_at, dns, connections
):
    connector = stored_at()
    dns["open.example.test"] = METADATA
    result = services.connector_test_credentials(actor=member_actor(alice), connector=connector)
    assert not result.ok and not result.reachable
    assert "does not call" in result.message
    assert reached(connections, METADATA, "open.example.test") == []
    assert AuditEvent.objects.filter(action="connector.test_credentials").count() == 1


# --- DingTalk's sessionWebhook -----------------------------------------------------------------


@pytest.fixture
def ding(fake_api):
    return FakeDingTalk(fake_api)


def test_a_session_webhook_resolving_to_metadata_gets_nothing_and_the_api_answers(
    alice, ding, dns, connections, sleeps
):
    connector = make_connector(
        alice,
        "dingtalk",
        {"app_key": APP_KEY, "app_secret": APP_SECRET},
        {"api_base_url": ding.url, "card_template_id": "tpl"},
    )
    # DingTalk's own host (on the host allow-list), answering a metadata address.
    dns["oapi.dingtalk.com"] = METADATA
    expires = int(time.time() * 1000) + 600_000
    transport = platform_for(connector).transport(sleep=sleeps.append)
    for send_one in (
        lambda: transport.send_text(
            Recipient.user("staff-bob"),
            "reply",
            context={
                "session_webhook": "https://oapi.dingtalk.com/robot/sendBySession?session=abc",
                "session_webhook_expires": expires,
            },
        ),
        lambda: transport.send_markdown(
            Recipient.user("staff-bob"),
            "**reply**",
            context={
                "session_webhook": "https://oapi.dingtalk.com/robot/sendBySession?session=abc",
                "session_webhook_expires": expires,
            },
        ),
    ):
        send_one()
    assert reached(connections, METADATA, "oapi.dingtalk.com") == []
    assert len(ding.server.calls("/v1.0/robot/oToMessages/batchSend")) == 2
    assert sleeps == []  # refused, not retried


def test_a_feishu_long_connection_to_metadata_is_refused_before_the_sdk_calls_it(
    alice, dns, connections
):
    pytest.importorskip("lark_oapi")
    from cadre.outbound import OutboundRefused
    from connectors.feishu.longconn import LongConnection

    connector = make_connector(
        alice,
        "feishu",
        FEISHU,
        {"mode": "long_connection", "api_base_url": "https://open.example.test"},
    )
    dns["open.example.test"] = METADATA
    connection = LongConnection(connector)
    try:
        with pytest.raises(OutboundRefused):
            connection.client()
    finally:
        connection.close()
    assert reached(connections, METADATA, "open.example.test") == []
