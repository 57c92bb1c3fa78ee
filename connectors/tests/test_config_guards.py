"""Connector configuration guards: a webhook's callback URL never reaches internal addresses
(checked when saved and at every send), and a binding only routes to the actor's own
organization's deployments."""

from __future__ import annotations

import json

import pytest

from cadre.agents import services as agent_services
from cadre.governance.models import AuditEvent
from cadre.tenancy.actors import member_actor
from connectors.base import platform_for
from connectors.base.transport import Recipient, TransportError
from connectors.models import Connector, ConnectorBinding
from connectors.tests.helpers import make_connector

pytestmark = pytest.mark.django_db

SECRET = "whsec-0123456789abcdef"


@pytest.fixture
def no_internal_hosts(settings):
    settings.CADRE_CONNECTOR_WEBHOOK_ALLOWED_HOSTS = []


def _create(client, url):
    return client.post(
        "/api/v1/connectors/",
        {
            "platform": "webhook",
            "name": "ERP",
            "credentials": {"signing_secret": SECRET},
            "settings": {"callback_url": url},
        },
        format="json",
    )


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:18999/x",
        "http://localhost/x",
        "http://[::1]/x",
        "http://169.254.169.254/latest/meta-data/",
        "http://10.1.2.3/hook",
        "http://[::ffff:127.0.0.1]/x",
        "file:///etc/passwd",
        "gopher://example.com/",
    ],
)
def test_webhook_callback_to_an_internal_address_is_refused(
    alice, client_for, no_internal_hosts, url
):
    response = _create(client_for(alice), url)
    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] == "webhook_url_refused"
    assert not Connector.objects.exists()
    assert not AuditEvent.objects.filter(action="connector.create").exists()


def test_updating_the_callback_to_loopback_is_refused(alice, client_for, no_internal_hosts):
    client = client_for(alice)
    created = _create(client, "https://93.184.215.14/hook")  # a public literal: no DNS needed
    assert created.status_code == 201, created.content
    response = client.patch(
        f"/api/v1/connectors/{created.json()['id']}/",
        {"settings": {"callback_url": "http://127.0.0.1:8000/api/v1/"}},
        format="json",
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "webhook_url_refused"
    connector = Connector.objects.get()
    assert connector.settings["callback_url"] == "https://93.184.215.14/hook"


def test_allow_listed_internal_receiver_is_accepted(alice, client_for, settings):
    settings.CADRE_CONNECTOR_WEBHOOK_ALLOWED_HOSTS = ["hooks.corp.internal", "10.9.0.0/16"]
    assert _create(client_for(alice), "http://10.9.1.1/hook").status_code == 201


def test_send_time_check_refuses_a_callback_that_became_internal(alice, fake_api, settings):
    """Saved while allowed (or resolving publicly); at send time it is internal: nothing is
    sent and the failure is not retried."""
    fake_api.route("POST", "/callback", lambda request: (200, {"ok": True}))
    connector = make_connector(
        alice, "webhook", {"signing_secret": SECRET}, {"callback_url": f"{fake_api.url}/callback"}
    )
    settings.CADRE_CONNECTOR_WEBHOOK_ALLOWED_HOSTS = []
    transport = platform_for(connector).transport()
    with pytest.raises(TransportError) as refused:
        transport.send_text(Recipient.user("u-1"), "secret reply")
    assert not refused.value.retryable
    assert fake_api.calls("/callback") == []


def test_send_goes_to_the_checked_address_with_the_host_header(alice, fake_api):
    fake_api.route("POST", "/callback", lambda request: (200, {"ok": True}))
    url = fake_api.url.replace("127.0.0.1", "localhost") + "/callback"
    connector = make_connector(alice, "webhook", {"signing_secret": SECRET}, {"callback_url": url})
    platform_for(connector).transport().send_text(Recipient.user("u-1"), "hello")
    [call] = fake_api.calls("/callback")
    assert call.json()["text"] == "hello"
    assert call.headers["host"].startswith("localhost:")


def _deployment(owner):
    actor = member_actor(owner)
    template = agent_services.template_create(
        actor=actor,
        name="Helper",
        code="helper",
        agent_md="# Persona\nHelp.",
        sop="# SOP\nBe brief.",
        user_md_template="# About {{member.display_name}}",
        tool_permissions={},
        model_settings={"provider": "offline", "model": "offline-1"},
        memory_policy={"read_scopes": ["agent"], "write_scopes": ["agent"]},
    )
    version = template.versions.get()
    agent_services.version_submit(actor=actor, version=version)
    agent_services.version_publish(actor=actor, version=version, reason="ready")
    return agent_services.deployment_create(
        actor=actor, name="Helpers", template=template, members=[owner], channels=["webhook"]
    )


def test_binding_to_another_organizations_deployment_is_refused(alice, charlie, client_for):
    theirs = _deployment(charlie)
    connector = make_connector(
        alice, "webhook", {"signing_secret": SECRET}, {"callback_url": "http://127.0.0.1:9/"}
    )
    response = client_for(alice).post(
        "/api/v1/connector-bindings/",
        {"connector": connector.pk, "deployment_id": theirs.pk},
        format="json",
    )
    assert response.status_code == 400, response.content
    assert "deployment_id" in response.json()["error"]["details"]
    assert not ConnectorBinding.objects.exists()
    assert not AuditEvent.objects.filter(action="connector.bind").exists()


def test_binding_to_an_own_deployment_is_accepted(alice, client_for):
    ours = _deployment(alice)
    connector = make_connector(
        alice, "webhook", {"signing_secret": SECRET}, {"callback_url": "http://127.0.0.1:9/"}
    )
    response = client_for(alice).post(
        "/api/v1/connector-bindings/",
        {"connector": connector.pk, "deployment_id": ours.pk},
        format="json",
    )
    assert response.status_code == 201, response.content
    assert ConnectorBinding.objects.get().deployment_id == ours.pk


@pytest.mark.parametrize(
    "settings",
    [
        {"card_template_id": "a\x00b"},
        {"a\x00": 1},
        {"nested": {"x": ["\udc00"]}},
        {"max_attempts": "²"},
        {"max_attempts": "1e309"},
        {"max_attempts": 0},
        {"max_attempts": 10**30},
        {"max_attempts": True},
        {"backoff_base": -1},
        {"backoff_base": "١٢"},
    ],
)
def test_hostile_settings_are_refused_with_400_and_nothing_stored(alice, client_for, settings):
    """Strings PostgreSQL's JSON cannot hold, and numbers a send would crash on, are a clear 400
    when saved — never a 500 then, nor a crash at every send afterwards."""
    body = {"platform": "webhook", "name": "ERP", "credentials": {"signing_secret": SECRET}}
    response = client_for(alice).post(
        "/api/v1/connectors/",
        json.dumps({**body, "settings": settings}),  # escapes a lone surrogate as \udc00
        content_type="application/json",
    )
    assert response.status_code == 400, response.content
    assert not Connector.objects.exists()


def test_infinite_numbers_in_settings_are_refused(alice, client_for):
    body = json.dumps(
        {"platform": "webhook", "name": "ERP", "credentials": {"signing_secret": SECRET},
         "settings": {"backoff_base": "INF"}}
    ).replace('"INF"', "1e309")  # fmt: skip
    response = client_for(alice).post("/api/v1/connectors/", body, content_type="application/json")
    assert response.status_code == 400, response.content
    assert not Connector.objects.exists()


def test_numeric_settings_from_a_form_are_stored_as_numbers(alice, client_for):
    response = client_for(alice).post(
        "/api/v1/connectors/",
        {"platform": "webhook", "name": "ERP", "credentials": {"signing_secret": SECRET},
         "settings": {"max_attempts": "3", "backoff_base": "0.25"}},
        format="json",
    )  # fmt: skip
    assert response.status_code == 201, response.content
    assert Connector.objects.get().settings == {"max_attempts": 3, "backoff_base": 0.25}
