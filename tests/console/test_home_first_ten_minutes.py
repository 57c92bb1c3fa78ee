# ruff: noqa: F811 - the fixtures imported from tests.console.agents_setup are parameters here
"""Home is a person's own (#32): an employee's agents and conversations, not the organization's
figures; the owner's first steps (each done or not, with its link), what waits for their
decision, a plain word when agents answer with the offline model; activity in sentences, and
memory scopes named for people ("You", "Your agent …") where employees read them."""

from __future__ import annotations

import re

from django.test import Client
from django.urls import reverse

from cadre.agents import providers as provider_services
from cadre.agents.models import Step
from cadre.agents.runtime.lifecycle import execution as engine
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.agents.runtime.records.grants import agent_actor
from cadre.console.activity import event_sentences
from cadre.console.scope_names import scope_names
from cadre.governance.confirmations import confirmation_decide
from cadre.governance.models import AuditEvent, Confirmation
from cadre.memory import services as memory_services
from cadre.tenancy import services as tenancy
from cadre.tenancy.actors import member_actor
from connectors.models import Connector
from tests.conftest import PASSWORD
from tests.console.agents_setup import (  # noqa: F401 - fixtures
    alice_agent,
    bob_agent,
    client,
    deployment,
    owner,
    published,
    sales,
    template,
)
from tests.factories import DepartmentFactory, PositionFactory

SEND = "send hello to group:all-staff"  # the offline model calls im_send: a confirmation


def _run(member, agent, text):
    run = runtime.run_start(actor=member_actor(member), agent=agent, text=text)
    engine.run_execute(run.pk)
    run.refresh_from_db()
    return run


def _steps(page: str) -> dict[str, str]:
    return dict(re.findall(r'data-testid="step-(\w+)" data-done="(true|false)"', page))


def test_a_new_owner_is_told_what_to_do_first_each_step_with_its_link(alice):
    page = client(alice).get(reverse("console:home")).content.decode()
    assert _steps(page) == {"model": "false", "im": "false", "people": "false", "dispatch": "false"}
    for url in ("/models/", "/connectors/new/", "/members/invite/", "/deployments/new/"):
        assert f'href="{url}"' in page, url
    assert "0 of 4 done" in page
    assert "Welcome back" not in page


def test_the_checklist_follows_what_was_done_and_leaves_when_all_is(alice, bob, deployment):
    actor = member_actor(alice)
    page = client(alice).get(reverse("console:home")).content.decode()
    assert _steps(page) == {"model": "false", "im": "false", "people": "true", "dispatch": "true"}
    config = provider_services.provider_config_create(
        actor=actor, name="Loopback", kind="openai_compatible", base_url="http://127.0.0.1:9/v1"
    )
    provider_services.provider_config_set_default(actor=actor, config=config)
    page = client(alice).get(reverse("console:home")).content.decode()
    assert _steps(page)["model"] == "true" and "Agents answer with Loopback." in page
    Connector.objects.create(organization=alice.organization, platform="slack", name="Slack")
    page = client(alice).get(reverse("console:home")).content.decode()
    assert 'data-testid="checklist"' not in page  # all four done


def test_the_home_says_plainly_when_agents_answer_with_the_offline_model(alice, bob, deployment):
    owner_page = client(alice).get(reverse("console:home")).content.decode()
    assert 'data-testid="offline-model"' in owner_page
    assert "2 of 2 agents answer with the offline model." in owner_page
    assert 'href="/models/">Connect a model' in owner_page
    employee_page = client(bob).get(reverse("console:home")).content.decode()
    assert "Your agents answer with the offline model for now." in employee_page
    assert 'href="/models/"' not in employee_page


def test_no_offline_notice_when_a_default_provider_serves_the_agents(alice, bob, deployment):
    actor = member_actor(alice)
    config = provider_services.provider_config_create(
        actor=actor, name="Loopback", kind="openai_compatible", base_url="http://127.0.0.1:9/v1"
    )
    provider_services.provider_config_set_default(actor=actor, config=config)
    for member in (alice, bob):
        page = client(member).get(reverse("console:home")).content.decode()
        assert 'data-testid="offline-model"' not in page


def test_what_waits_for_the_owner_is_flagged_and_activity_reads_as_sentences(alice, alice_agent):
    run = _run(alice, alice_agent, SEND)
    confirmation = Confirmation.objects.get(run_id=run.pk)
    assert alice.pk in confirmation.decider_ids
    page = client(alice).get(reverse("console:home")).content.decode()
    waiting = page[page.index('data-testid="waiting"') :]
    assert "Sales assistant asks to send a message — waiting for your decision" in waiting
    assert f'href="/confirmations/{confirmation.pk}/"' in waiting
    activity = page[page.index('data-testid="activity"') :]
    assert "Sales assistant asks to send a message — waiting for your decision" in activity
    assert str(confirmation) not in page  # "confirmation 1 im_send (pending)"
    assert "confirmation.request" not in page


def test_a_decided_request_reads_as_decided(alice, alice_agent):
    run = _run(alice, alice_agent, SEND)
    confirmation = Confirmation.objects.get(run_id=run.pk)
    confirmation_decide(
        confirmation=confirmation, actor=member_actor(alice), decision="reject", via="console"
    )
    page = client(alice).get(reverse("console:home")).content.decode()
    assert 'data-testid="waiting"' not in page
    assert "Sales assistant asks to send a message — rejected" in page
    assert "You rejected: Sales assistant asked to send a message" in page


def test_every_recorded_action_reads_without_codes(alice, bob, alice_agent):
    """Whatever the action, the sentence holds no dotted code, no model name and no id."""
    _run(alice, alice_agent, SEND)
    tenancy.member_invite(actor=member_actor(alice), email="erin@acme.test", display_name="Erin")
    memory_services.memory_add(
        actor=member_actor(alice),
        scope="user",
        scope_id=alice.pk,
        kind="preference",
        content="Short answers",
        source_kind="user_statement",
    )
    events = list(AuditEvent.objects.filter(organization=alice.organization))
    rows = event_sentences(member_actor(alice), events)
    assert len(rows) == len(events) > 5
    for row in rows:
        sentence = row["sentence"]
        assert not re.search(r"\b[a-z_]+\.[a-z_]+\b", sentence), sentence
        assert not re.search(r"\b(user|agent):\d+", sentence), sentence
        assert not re.search(r"\bmemory \d+", sentence), sentence
    sentences = [row["sentence"] for row in rows]
    assert "You invited Erin" in sentences
    assert "You saved a memory" in sentences


def test_an_employees_home_is_their_agents_and_conversations(alice, bob, bob_agent):
    first = _run(bob, bob_agent, "hello there")
    _run(bob, bob_agent, SEND)
    page = client(bob).get(reverse("console:home")).content.decode()
    agents = page[page.index('data-testid="my-agents"') :]
    assert f'href="/chat/agents/{bob_agent.pk}/">Chat with Sales assistant</a>' in agents
    conversations = page[page.index('data-testid="conversations"') :]
    assert f'href="/chat/sessions/{first.session_id}/"' in conversations
    assert "Sales assistant · Bob" not in page  # the agent is named for the person it serves
    assert "Sales assistant asks to send a message — waiting for your decision" in page
    assert 'class="stat-label"' not in page and "Recent activity" not in page  # no figures
    # Another member's agent and conversations are never on it.
    assert client(alice).get(reverse("console:home")).content.decode().count("/chat/sessions/") == 0


def test_accepting_an_invitation_lands_on_the_employees_home(alice):
    _member, _invitation, token = tenancy.member_invite(
        actor=member_actor(alice), email="erin@acme.test", display_name="Erin", roles=["employee"]
    )
    browser = Client()
    response = browser.post(
        reverse("console:invite", args=[token]),
        {"display_name": "Erin", "password": PASSWORD, "password_confirm": PASSWORD},
        follow=True,
    )
    page = response.content.decode()
    assert response.redirect_chain[-1][0] == reverse("console:home")
    assert "Hello, Erin" in page and "Your agents" in page and "You have no agent yet" in page
    assert "Welcome to" in page and "Welcome back" not in page
    assert "Active members" not in page


def test_scope_names_read_as_people_say_them(alice, bob, bob_agent):
    sales_team = DepartmentFactory(organization=alice.organization, name="Sales")
    support = DepartmentFactory(organization=alice.organization, name="Support Team")
    account = PositionFactory(organization=alice.organization, name="Account Executive")
    keys = [
        f"user:{bob.pk}",
        f"user:{alice.pk}",
        f"agent:{bob_agent.pk}",
        f"department:{sales_team.pk}",
        f"department:{support.pk}",
        f"position:{account.pk}",
        "organization",
        "user:999999",
    ]
    names = scope_names(member_actor(bob), keys)
    assert names == {
        f"user:{bob.pk}": "You",
        f"user:{alice.pk}": "Alice",
        f"agent:{bob_agent.pk}": "Your agent Sales assistant",
        f"department:{sales_team.pk}": "Sales team",
        f"department:{support.pk}": "Support Team",
        f"position:{account.pk}": "Everyone in the Account Executive role",
        "organization": f"Everyone at {alice.organization.name}",
        "user:999999": "A former member",
    }
    assert scope_names(member_actor(alice), [f"agent:{bob_agent.pk}"]) == {
        f"agent:{bob_agent.pk}": "Bob's agent Sales assistant"
    }


def test_the_employees_memory_page_names_scopes_and_shows_no_keys(alice, bob, bob_agent):
    actor = member_actor(bob)
    mine = memory_services.memory_add(
        actor=actor,
        scope="user",
        scope_id=bob.pk,
        kind="preference",
        content="Bullet points please",
        source_kind="user_statement",
    )
    memory_services.memory_add(
        actor=agent_actor(bob_agent),
        scope="agent",
        kind="fact",
        content="ACME renews in May",
        source_kind="user_statement",
    )
    page = client(bob).get(reverse("console:memory")).content.decode()
    assert "Your agent Sales assistant" in page
    shown = re.sub(r'value="[^"]*"', "", page)  # the scope filter's option values are keys
    assert f"user:{bob.pk}" not in shown and f"agent:{bob_agent.pk}" not in shown
    detail = client(bob).get(reverse("console:memory_detail", args=[mine.pk])).content.decode()
    assert '<strong data-testid="scope">You</strong>' in detail
    assert f"user:{bob.pk}" not in detail
    # Keys stay for those who read shared memory for the organization.
    admin_page = client(alice).get(reverse("console:memory")).content.decode()
    assert f"agent:{bob_agent.pk}" in admin_page


def test_the_transcript_names_the_scope_a_turn_remembered_in(bob, bob_agent):
    run = _run(bob, bob_agent, "hello")
    memory = memory_services.memory_add(
        actor=member_actor(bob),
        scope="user",
        scope_id=bob.pk,
        kind="preference",
        content="Prefers short answers",
        source_kind="user_statement",
    )
    Step.objects.create(
        run=run,
        index=run.steps.count() + 1,
        kind=Step.Kind.HOOK,
        name="process_memory:memory_write",
        status=Step.Status.COMPLETED,
        idempotency_key=f"{run.pk}:remembered",
        output={"written_memories": [{"id": memory.pk, "scope": memory.scope_key, "kind": "x"}]},
    )
    page = client(bob).get(reverse("console:session", args=[run.session_id])).content.decode()
    remembered = page[page.index('data-testid="memories-written"') :].split("</div>")[0]
    assert f'href="/memory/{memory.pk}/"' in remembered and "(x, You)" in remembered
    assert f"user:{bob.pk}" not in remembered
