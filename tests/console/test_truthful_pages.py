# ruff: noqa: F811 - the fixtures imported from other test modules are parameters here
"""The console says only what is true (issue #32): the audit log links a call chain only for
events tied to a run; a connector whose last credential test or delivery failed is not shown
healthy; an invitation says whether it was e-mailed; a template's placeholders are filled in
what the model reads and what a person is shown."""

from __future__ import annotations

import re
import socket
import types

import pytest
from django.core import mail
from django.urls import reverse

from cadre.agents.models import Run
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.console.templatetags.console import get_item
from cadre.governance import audit
from cadre.governance.models import AuditEvent
from cadre.llm.offline import OfflineProvider
from cadre.tenancy import services as tenancy
from cadre.tenancy.actors import member_actor
from cadre.tenancy.models import Invitation
from connectors.base import services as connectors
from connectors.slack.tests.fake_api import BOT_TOKEN, FakeSlack
from connectors.tests.fakes import FakePlatformServer
from tests.agents.test_call_chain import drain
from tests.console.agents_setup import (  # noqa: F401 - fixtures
    alice_agent,
    deployment,
    owner,
    published,
    sales,
    template,
)

pytestmark = pytest.mark.django_db


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# --- the audit log links only what is linked ----------------------------------------------


def test_get_item_gives_nothing_for_a_missing_key():
    assert get_item({1: 7}, 1) == 7
    assert get_item({1: 7}, 2) == ""
    assert get_item(None, 2) == ""


def test_audit_rows_not_tied_to_a_run_have_no_call_chain_button(alice, bob, browser):
    actor = member_actor(alice)
    tenancy.member_update(actor=actor, member=bob, title="Engineer")
    audit.record(actor=actor, action="test.event", target=("thing", "1", "A thing"))
    events = list(AuditEvent.objects.filter(organization=alice.organization))
    assert len(events) >= 2
    page = browser(alice).get(reverse("console:audit")).content.decode()
    assert 'data-testid="call-chain"' not in page
    for event in events:
        assert f"/runs/{event.pk}/call-chain/" not in page
        assert reverse("console:audit_event", args=[event.pk]) in page


def test_an_event_about_a_run_links_to_that_run_only(alice, browser, alice_agent):
    run = runtime.run_start(actor=member_actor(alice), agent=alice_agent, text="hello")
    about = audit.record(
        actor=member_actor(alice), action="test.run_event", target=("run", str(run.pk), "a run")
    )
    page = browser(alice).get(reverse("console:audit"), {"action": "test."}).content.decode()
    links = re.findall(r'href="(/runs/\d+/call-chain/)" data-testid="call-chain"', page)
    assert links == [reverse("console:run_call_chain", args=[run.pk])]
    if about.pk != run.pk:
        assert f"/runs/{about.pk}/call-chain/" not in page


# --- a connector's health follows its last test and delivery --------------------------------


@pytest.fixture
def fake_server():
    server = FakePlatformServer().start()
    yield server
    server.stop()


def _slack(alice, api_base_url: str):
    return connectors.connector_create(
        actor=member_actor(alice),
        platform="slack",
        name="Slack",
        credentials={"bot_token": BOT_TOKEN, "signing_secret": "s"},
        settings={"api_base_url": api_base_url},
    )


def _badge(page: str) -> str:
    match = re.search(r'<span id="connector-health">\s*<span [^>]*>([^<]+)</span>', page)
    assert match, "the page shows the connector's health"
    return match.group(1)


def test_a_failed_credential_test_is_not_shown_healthy(alice, browser):
    port = _closed_port()
    connector = _slack(alice, f"http://127.0.0.1:{port}/api")
    client = browser(alice)
    url = reverse("console:connector", args=[connector.pk])
    assert _badge(client.get(url).content.decode()) == "Healthy"  # nothing asked yet

    result = client.post(
        reverse("console:connector_test", args=[connector.pk]), HTTP_HX_REQUEST="true"
    ).content.decode()
    assert f"Could not reach 127.0.0.1:{port}" in result
    # The page's badge is swapped in the same response: it no longer says "Healthy".
    assert 'id="connector-health" hx-swap-oob="true"' in result
    assert "Unreachable" in result and "Healthy" not in result

    page = client.get(url).content.decode()
    assert _badge(page) == "Unreachable"
    assert "The last credential test failed: Could not reach" in page
    listing = client.get(reverse("console:connectors")).content.decode()
    assert "Unreachable" in listing and "Healthy" not in listing


def test_a_passing_test_after_a_failure_makes_it_healthy_again(alice, browser, fake_server):
    slack = FakeSlack(fake_server)
    fake_server.route(
        "POST", "/api/auth.test", lambda request: (200, {"ok": True, "user": "cadre", "team": "A"})
    )
    connector = _slack(alice, f"http://127.0.0.1:{_closed_port()}/api")
    client = browser(alice)
    client.post(reverse("console:connector_test", args=[connector.pk]))
    url = reverse("console:connector", args=[connector.pk])
    assert _badge(client.get(url).content.decode()) == "Unreachable"
    connector.settings = {"api_base_url": slack.url}
    connector.save(update_fields=["settings"])
    client.post(reverse("console:connector_test", args=[connector.pk]))
    assert _badge(client.get(url).content.decode()) == "Healthy"


def test_refused_credentials_and_a_failed_delivery_are_shown(alice, browser, fake_server):
    slack = FakeSlack(fake_server)
    fake_server.route(
        "POST", "/api/auth.test", lambda request: (200, {"ok": False, "error": "invalid_auth"})
    )
    connector = _slack(alice, slack.url)
    client = browser(alice)
    client.post(reverse("console:connector_test", args=[connector.pk]))
    url = reverse("console:connector", args=[connector.pk])
    page = client.get(url).content.decode()
    assert _badge(page) == "Credentials refused" and "invalid_auth" in page

    delivery, _ = connectors.claim_delivery(
        connector, idempotency_key="k1", kind="text", recipient="U1", body={"text": "hi"}
    )
    connectors.mark_delivery(delivery, sent=False, error="channel_not_found")
    page = client.get(url).content.decode()
    assert _badge(page) == "Sending fails"
    assert "The last message to Slack failed: channel_not_found" in page


# --- an invitation says whether it was e-mailed ----------------------------------------------


def _invite(client, email="new@acme.test"):
    return client.post(
        reverse("console:member_invite"),
        {"email": email, "display_name": "Newcomer", "roles": ["employee"]},
    )


def test_without_a_mail_server_the_page_says_to_copy_the_link(alice, browser, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.console.EmailBackend"
    client = browser(alice)
    body = _invite(client).content.decode()
    assert "Invitation link created — copy it and send it" in body
    assert "No e-mail was sent" in body and "Invitation sent" not in body
    assert re.search(r"http://testserver/invite/[A-Za-z0-9_\-]+/", body)
    assert mail.outbox == []
    assert not AuditEvent.objects.filter(action="member.invitation_email").exists()
    member = Invitation.objects.get(email="new@acme.test").member
    detail = client.get(reverse("console:member", args=[member.pk])).content.decode()
    assert "Invitation sent" not in detail and "Invitation e-mailed" not in detail
    assert "Invitation link created for new@acme.test" in detail


def test_with_a_mail_server_the_invitation_is_emailed(alice, browser):
    # The tests' EMAIL_BACKEND is Django's locmem backend: a configured one.
    client = browser(alice)
    body = _invite(client).content.decode()
    link = re.search(r"http://testserver/invite/[A-Za-z0-9_\-]+/", body).group(0)
    assert "Invitation e-mailed to new@acme.test" in body
    (message,) = mail.outbox
    assert message.to == ["new@acme.test"]
    assert link in message.body and "Alice" in message.subject
    event = AuditEvent.objects.get(action="member.invitation_email")
    assert event.changes == {"email": "new@acme.test", "sent": True, "error": ""}
    assert link.rsplit("/", 2)[-2] not in str(event.changes)  # the link is never audited
    member = Invitation.objects.get(email="new@acme.test").member
    detail = client.get(reverse("console:member", args=[member.pk])).content.decode()
    assert "Invitation e-mailed to new@acme.test" in detail


def test_a_refusing_mail_server_is_said_and_the_link_still_shown(alice, browser, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", _closed_port()
    settings.EMAIL_TIMEOUT = 5
    client = browser(alice)
    body = _invite(client).content.decode()
    assert "Invitation link created — copy it and send it" in body
    assert "the mail server refused the message" in body
    assert re.search(r"http://testserver/invite/[A-Za-z0-9_\-]+/", body)
    event = AuditEvent.objects.get(action="member.invitation_email")
    assert event.changes["sent"] is False and event.changes["error"]
    member = Invitation.objects.get(email="new@acme.test").member
    detail = client.get(reverse("console:member", args=[member.pk])).content.decode()
    assert "Invitation link created for new@acme.test" in detail


# --- placeholders are filled in what the model reads and a person is shown ------------------


def test_instructions_reach_the_model_and_the_reply_with_placeholders_filled(
    alice, alice_agent, monkeypatch
):
    sent: list[list[dict]] = []
    for name in ("complete", "stream"):
        original = getattr(OfflineProvider, name)

        def recording(self, messages, tools, _original=original, **params):
            sent.append(messages)
            return _original(self, messages, tools, **params)

        monkeypatch.setattr(OfflineProvider, name, recording)
    run = runtime.run_start(
        actor=member_actor(alice), agent=alice_agent, text="who do you help sell?"
    )
    drain()
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED
    reply = run.output["text"]
    # The offline model quotes what it retrieved: the persona, filled for Alice.
    assert "You help Alice sell." in reply
    assert "{{" not in reply and "member.display_name" not in reply
    assert sent, "the model was called"
    payload = "\n".join(str(message.get("content", "")) for message in sent[0])
    assert "You help Alice sell." in payload
    assert "{{member" not in payload


def test_an_evaluation_replay_sends_the_instructions_with_placeholders_filled(alice):
    """A replay sends what a run would: the version's text filled for the case's person."""
    from cadre.agents.evaluation import replay
    from cadre.agents.evaluation.models import EvalCase

    version = types.SimpleNamespace(
        agent_md="You help {{member.display_name}} sell.",
        sop="Greet {{member.display_name}}.",
        user_md_template="Name: {{member.display_name}}",
        skills=[],
    )
    case = EvalCase(organization=alice.organization, member=alice, conversation=[])
    pieces = replay._pieces(case, version, "hello", [])
    assert pieces.agent_md == f"You help {alice.display_name} sell."
    assert pieces.sop == f"Greet {alice.display_name}."
    assert pieces.user_md == f"Name: {alice.display_name}"
    neutral = replay._pieces(EvalCase(organization=alice.organization), version, "hi", [])
    assert "{{" not in neutral.agent_md + neutral.sop + neutral.user_md
