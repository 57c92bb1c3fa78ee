# ruff: noqa: F811 - the fixtures imported from other test modules are parameters here
"""The console says only what is true (issue #32), walked in a real browser (Debian's Chromium
through Playwright, pages served by uvicorn): the audit log offers a call chain only on rows
tied to a run; a Slack connector whose credential test could not reach Slack stops saying
"Healthy" at once; an invitation says whether it was e-mailed; an agent's reply quotes its
instructions with the member's name, never `{{member.display_name}}`.
Screenshots in var/screenshots/truthful-*.png (git-ignored)."""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest
from django.core import mail
from django.urls import reverse

from cadre.governance import audit
from cadre.governance.models import AuditEvent
from cadre.tenancy import services as tenancy
from cadre.tenancy.actors import member_actor
from connectors.base import services as connectors
from connectors.slack.tests.fake_api import BOT_TOKEN
from tests.console.agents_setup import (  # noqa: F401 - fixtures
    alice_agent,
    deployment,
    owner,
    published,
    sales,
    template,
)
from tests.console.test_agents_pages_sessions import _run
from tests.console.test_browser_chat import (  # noqa: F401 - fixtures and helpers
    PASSWORD,
    browser_page,
    chromium,
    expect,
    live_server_url,
)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
SHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"


@pytest.fixture
def page(chromium, live_server_url):
    SHOTS.mkdir(parents=True, exist_ok=True)
    with browser_page(chromium, live_server_url) as page:
        page.set_viewport_size({"width": 1280, "height": 900})
        yield page


def sign_in(page, member, next_url: str) -> None:
    page.goto(f"/login/?next={next_url}")
    page.get_by_label("Email").fill(member.user.email)
    page.get_by_label("Password").fill(PASSWORD)
    with page.expect_navigation():
        page.get_by_role("button", name="Sign in").click()
    assert page.url.endswith(next_url), page.url


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_the_audit_log_offers_a_call_chain_only_for_runs(page, alice, bob, alice_agent):
    run = _run(alice, alice_agent, "hello")
    actor = member_actor(alice)
    tenancy.member_update(actor=actor, member=bob, title="Engineer")
    update = AuditEvent.objects.get(action="member.update")
    sign_in(page, alice, reverse("console:audit"))
    row = page.locator("tbody tr", has_text="member.update")
    expect(row).to_have_count(1)
    expect(row.get_by_role("link", name="Details")).to_be_visible()
    expect(row.get_by_test_id("call-chain")).to_have_count(0)
    # No row links to a "run" numbered like an audit event.
    hrefs = page.get_by_test_id("call-chain").evaluate_all(
        "links => links.map(link => link.getAttribute('href'))"
    )
    assert f"/runs/{update.pk}/call-chain/" not in hrefs or update.pk == run.pk
    assert set(hrefs) <= {reverse("console:run_call_chain", args=[run.pk])}
    page.screenshot(path=str(SHOTS / "truthful-audit.png"), full_page=True)

    # An event about the run opens that run's chain.
    audit.record(actor=actor, action="test.about_run", target=("run", str(run.pk), "a run"))
    page.reload()
    page.locator("tbody tr", has_text="test.about_run").get_by_test_id("call-chain").click()
    page.wait_for_url(f"**/runs/{run.pk}/call-chain/")


def test_a_failed_slack_credential_test_turns_the_health_badge(page, alice):
    port = _closed_port()
    connector = connectors.connector_create(
        actor=member_actor(alice),
        platform="slack",
        name="Acme Slack",
        credentials={"bot_token": BOT_TOKEN, "signing_secret": "s"},
        settings={"api_base_url": f"http://127.0.0.1:{port}/api"},
    )
    sign_in(page, alice, reverse("console:connector", args=[connector.pk]))
    badge = page.locator("#connector-health")
    expect(badge).to_have_text("Healthy")  # nothing was asked of Slack yet
    page.get_by_role("button", name="Test credentials").click()
    expect(page.get_by_test_id("test-result")).to_contain_text(f"Could not reach 127.0.0.1:{port}")
    # The same answer turns the header's badge: no reload needed, no "Healthy" left.
    expect(badge).to_have_text("Unreachable")
    expect(page.get_by_test_id("health-alert")).to_contain_text("The last credential test failed")
    expect(page.get_by_test_id("last-outcome")).to_contain_text("Credential test failed")
    page.screenshot(path=str(SHOTS / "truthful-connector.png"), full_page=True)
    page.reload()
    expect(badge).to_have_text("Unreachable")
    expect(page.get_by_test_id("last-outcome")).to_contain_text("Credential test failed")
    page.goto(reverse("console:connectors"))
    row = page.locator("tbody tr", has_text="Acme Slack")
    expect(row.get_by_test_id("health-badge")).to_have_text("Unreachable")
    expect(page.get_by_text("Healthy", exact=True)).to_have_count(0)


def _invite(page, email: str) -> None:
    page.goto(reverse("console:member_invite"))
    page.get_by_label("Email").fill(email)
    page.get_by_label("Name").fill("Newcomer")
    page.get_by_role("button", name="Create invitation").click()


def test_an_invitation_says_whether_it_was_emailed(page, alice, settings):
    sign_in(page, alice, reverse("console:members"))
    # With the tests' mail backend (Django's locmem, a configured one) the link is e-mailed.
    _invite(page, "mailed@acme.test")
    outcome = page.get_by_test_id("invitation-outcome")
    expect(outcome).to_contain_text("Invitation e-mailed to mailed@acme.test")
    link = page.locator("#invite-url").input_value()
    (message,) = mail.outbox
    assert message.to == ["mailed@acme.test"] and link in message.body
    page.screenshot(path=str(SHOTS / "truthful-invitation-emailed.png"), full_page=True)
    page.get_by_role("link", name="Go to Newcomer").click()
    expect(page.get_by_test_id("pending-invitation")).to_contain_text(
        "Invitation e-mailed to mailed@acme.test"
    )

    # Without a mail server nothing is sent, and the page says to copy the link.
    settings.EMAIL_BACKEND = "django.core.mail.backends.console.EmailBackend"
    _invite(page, "copied@acme.test")
    expect(outcome).to_contain_text("Invitation link created — copy it and send it")
    expect(outcome).to_contain_text("No e-mail was sent")
    expect(page.get_by_text("Invitation sent")).to_have_count(0)
    assert re.match(
        r"http://.+/invite/[A-Za-z0-9_\-]+/$", page.locator("#invite-url").input_value()
    )
    assert len(mail.outbox) == 1
    page.screenshot(path=str(SHOTS / "truthful-invitation-link.png"), full_page=True)
    page.get_by_role("link", name="Go to Newcomer").click()
    pending = page.get_by_test_id("pending-invitation")
    expect(pending).to_contain_text("Invitation link created for copied@acme.test")
    expect(pending).not_to_contain_text("e-mailed to")


def test_a_reply_quotes_its_instructions_with_the_members_name(page, alice, alice_agent):
    run = _run(alice, alice_agent, "who do you help sell?")
    sign_in(page, alice, reverse("console:session", args=[run.session_id]))
    transcript = page.locator("main")
    expect(transcript).to_contain_text("You help Alice sell.")
    expect(transcript).not_to_contain_text("{{")
    expect(transcript).not_to_contain_text("member.display_name")
    page.screenshot(path=str(SHOTS / "truthful-instructions.png"), full_page=True)
