# ruff: noqa: F811 - the fixtures imported from the other browser tests are parameters here
"""Home, walked in a real browser (Debian's Chromium, uvicorn) as the owner and as an invited
employee (#32): the owner signs in to what to do first (each step done or not, with its link),
what waits for their decision (their agent's message to all staff), a plain word that agents
answer with the offline model and activity in sentences; an invited employee accepts the
invitation and lands on their agents and conversations — no organization figures — opens their
agent from home, finds the conversation there afterwards, and reads their memory's scopes as
names, not keys. Screenshots in var/screenshots/home-*.png (git-ignored)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cadre.agents import services as agent_services
from cadre.agents.runtime.lifecycle import execution as engine
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.agents.runtime.records.grants import agent_actor
from cadre.governance.models import Confirmation
from cadre.memory import services as memory_services
from cadre.tenancy import services as tenancy
from cadre.tenancy.actors import member_actor
from tests.conftest import PASSWORD
from tests.console.agents_setup import (  # noqa: F401 - fixtures (offline, no embedding hooks)
    alice_agent,
    deployment,
    owner,
    published,
    sales,
    template,
)
from tests.console.test_browser_chat import (  # noqa: F401 - fixtures and page helpers
    browser_page,
    chromium,
    expect,
    live_server_url,
    start_conversation,
)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
SHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"
ASKS = "Sales assistant asks to send a message — waiting for your decision"


def shot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"home-{name}.png"), full_page=True)


def sign_in_home(page, email: str) -> None:
    """Through the sign-in form without a destination: where a person lands is home."""
    page.goto("/login/")
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(re.compile(r"/$"))


def test_the_owner_is_told_what_to_do_first_and_what_waits(
    chromium, live_server_url, alice, bob, alice_agent
):
    run = runtime.run_start(
        actor=member_actor(alice), agent=alice_agent, text="send hello to group:all-staff"
    )
    engine.run_execute(run.pk)
    confirmation = Confirmation.objects.get(run_id=run.pk, status="pending")
    with browser_page(chromium, live_server_url) as page:
        page.set_viewport_size({"width": 1400, "height": 900})
        sign_in_home(page, alice.user.email)
        main = page.locator("main")
        expect(page.get_by_role("heading", name=alice.organization.name)).to_be_visible()
        expect(main).not_to_contain_text("Welcome back")

        checklist = page.get_by_test_id("checklist")
        expect(checklist).to_contain_text("2 of 4 done")
        for key, done in (("model", "false"), ("im", "false"), ("people", "true")):
            expect(page.get_by_test_id(f"step-{key}")).to_have_attribute("data-done", done)
        expect(page.get_by_test_id("step-dispatch")).to_have_attribute("data-done", "true")
        expect(page.get_by_test_id("step-model")).to_contain_text("offline model")

        offline = page.get_by_test_id("offline-model")
        expect(offline).to_contain_text("2 of 2 agents answer with the offline model.")

        waiting = page.get_by_test_id("waiting-item")
        expect(waiting).to_have_count(1)
        expect(waiting).to_contain_text(ASKS)
        activity = page.get_by_test_id("activity")
        expect(activity).to_contain_text(ASKS)
        expect(activity).not_to_contain_text("im_send (pending)")
        expect(activity).not_to_contain_text("confirmation.request")
        shot(page, "owner-1-first-steps")

        # What waits leads to the decision; the first open step to its page.
        waiting.get_by_role("link", name="Decide").click()
        page.wait_for_url(re.compile(rf"/confirmations/{confirmation.pk}/$"))
        expect(main).to_contain_text("im_send")
        shot(page, "owner-2-decide")
        page.go_back()
        page.get_by_test_id("step-model").get_by_role("link", name="Add a model provider").click()
        page.wait_for_url(re.compile(r"/models/$"))
        expect(page.get_by_role("heading", name="Models", exact=True)).to_be_visible()


def test_an_invited_employee_lands_on_their_agents_and_conversations(
    chromium, live_server_url, alice, bob, owner, deployment, sales
):
    erin, _invitation, token = tenancy.member_invite(
        actor=owner,
        email="erin@acme.test",
        display_name="Erin",
        roles=["employee"],
        positions=[sales],
    )
    with browser_page(chromium, live_server_url) as page:
        page.set_viewport_size({"width": 1400, "height": 900})
        page.goto(f"/invite/{token}/")
        page.get_by_label("Your name").fill("Erin")
        page.get_by_label("Password", exact=True).fill(PASSWORD)
        page.get_by_label("Repeat the password").fill(PASSWORD)
        page.get_by_role("button", name="Create account and join").click()
        page.wait_for_url(re.compile(r"/$"))
        main = page.locator("main")
        expect(page.get_by_role("heading", name="Hello, Erin")).to_be_visible()
        expect(main).to_contain_text("Welcome to")
        expect(main).not_to_contain_text("Welcome back")
        expect(page.get_by_test_id("my-agents")).to_contain_text("You have no agent yet")
        expect(page.locator(".stat-label")).to_have_count(0)  # no organization figures
        expect(page.get_by_test_id("checklist")).to_have_count(0)
        expect(page.get_by_test_id("activity")).to_have_count(0)
        shot(page, "employee-1-joined")

        # The owner brings the dispatch up to date: Erin's agent appears on her home.
        agent_services.deployment_sync(actor=owner, deployment=deployment)
        agent = deployment.agents.get(member=erin)
        page.reload()
        mine = page.get_by_test_id("my-agent")
        expect(mine).to_have_count(1)
        expect(mine).to_contain_text("Sales assistant")
        expect(mine).not_to_contain_text("· Erin")
        expect(page.get_by_test_id("offline-model")).to_contain_text(
            "Your agents answer with the offline model for now."
        )
        shot(page, "employee-2-agent")

        mine.get_by_role("link", name="Chat with Sales assistant").click()
        page.wait_for_url(re.compile(rf"/chat/agents/{agent.pk}/$"))
        session_id = start_conversation(page, "What is our standard discount?")
        page.goto("/")
        conversation = page.get_by_test_id("conversation")
        expect(conversation).to_have_count(1)
        expect(conversation).to_contain_text("Sales assistant")
        shot(page, "employee-3-conversation")
        conversation.get_by_role("link").first.click()
        page.wait_for_url(re.compile(rf"/chat/sessions/{session_id}/$"))

        # Her memory page names the scopes; the keys are not shown to her.
        erin.refresh_from_db()  # active since she accepted
        memory_services.memory_add(
            actor=member_actor(erin),
            scope="user",
            scope_id=erin.pk,
            kind="preference",
            content="Erin prefers answers in bullet points",
            source_kind="user_statement",
        )
        memory_services.memory_add(
            actor=agent_actor(agent),
            scope="agent",
            kind="fact",
            content="ACME renews its contract in May",
            source_kind="user_statement",
        )
        page.goto("/memory/")
        rows = page.locator("tbody tr")
        expect(rows).to_have_count(2)
        expect(page.locator("tr", has_text="bullet points").get_by_test_id("scope")).to_have_text(
            "You"
        )
        expect(page.locator("tr", has_text="ACME renews").get_by_test_id("scope")).to_have_text(
            "Your agent Sales assistant"
        )
        expect(page.get_by_test_id("scope-key")).to_have_count(0)
        table = page.locator("table").first.inner_text()
        assert f"user:{erin.pk}" not in table and f"agent:{agent.pk}" not in table, table
        shot(page, "employee-4-memory")
