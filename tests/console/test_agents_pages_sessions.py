# ruff: noqa: F811 - the fixtures imported from tests.console.agents_setup are parameters here
"""Agents & sessions in the console: who may look, finding agents, and a session's transcript
(steps, tool effects, confirmations, context records, usage and trace id)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from cadre.agents.runtime.lifecycle import execution as engine
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.memory.models import ContextRecord, ContextRecordItem
from cadre.tenancy.actors import member_actor
from tests.console.agents_setup import (  # noqa: F401 - fixtures
    alice_agent,
    bob_agent,
    client,
    deployment,
    owner,
    published,
    sales,
    second_version,
    template,
)

pytestmark = pytest.mark.django_db


def _run(member, agent, text, session=None):
    run = runtime.run_start(actor=member_actor(member), agent=agent, text=text, session=session)
    engine.run_execute(run.pk)
    run.refresh_from_db()
    return run


def test_agent_pages_for_viewers_only(bob_agent, bob, make_member):
    auditor = make_member(roles=["auditor"])
    listing = client(auditor).get(reverse("console:agents"))
    assert listing.status_code == 200
    assert "Sales assistant · Bob" in listing.content.decode()
    detail = client(auditor).get(reverse("console:agent", args=[bob_agent.pk]))
    assert detail.status_code == 200
    assert client(bob).get(reverse("console:agents")).status_code == 403
    assert client(bob).get(reverse("console:agent", args=[bob_agent.pk])).status_code == 403


def test_outsider_gets_404_for_agents_and_sessions(bob, bob_agent, charlie):
    run = _run(bob, bob_agent, "hello")
    outsider = client(charlie)
    assert outsider.get(reverse("console:agent", args=[bob_agent.pk])).status_code == 404
    assert outsider.get(reverse("console:session", args=[run.session_id])).status_code == 404


def test_find_agents_by_member_position_and_version(
    alice, owner, alice_agent, bob_agent, bob, second_version, make_member
):
    from cadre.agents import services
    from tests.factories import PositionFactory

    support = PositionFactory(organization=alice.organization, name="Support", code="support")
    dana = make_member(display_name="Dana")
    dana.positions.add(support)
    services.deployment_create(
        actor=owner,
        name="Support agents",
        template=second_version.template,
        version=second_version,
        positions=[support],
    )
    browser = client(alice)
    by_member = browser.get(reverse("console:agents"), {"member": bob.pk}).content.decode()
    assert "Sales assistant · Bob" in by_member and "Sales assistant · Alice" not in by_member
    by_position = browser.get(reverse("console:agents"), {"position": support.pk}).content.decode()
    assert "Sales assistant · Dana" in by_position and "· Bob" not in by_position
    by_version = browser.get(
        reverse("console:agents"), {"version": second_version.pk}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert by_version.startswith('<div id="agent-results">')
    assert "· Dana" in by_version and "· Bob" not in by_version and "· Alice" not in by_version


def test_agent_detail_lists_its_sessions(alice, bob, bob_agent):
    first = _run(bob, bob_agent, "What is the standard discount?")
    _run(bob, bob_agent, "and for renewals?", session=first.session)
    other = _run(bob, bob_agent, "remind me to call ACME")
    page = client(alice).get(reverse("console:agent", args=[bob_agent.pk])).content.decode()
    assert reverse("console:session", args=[first.session_id]) in page
    assert reverse("console:session", args=[other.session_id]) in page
    assert "What is the standard discount?" in page


def test_session_transcript_shows_steps_effects_usage_and_trace(alice, bob, bob_agent):
    run = _run(bob, bob_agent, "remind me to call ACME on 2030-01-02")
    ContextRecord.objects.create(
        organization=bob.organization, run_id=str(run.pk), step_id="1", query="call ACME"
    )
    page = client(alice).get(reverse("console:session", args=[run.session_id])).content.decode()
    assert run.trace_id and run.trace_id in page
    assert "Model call" in page and "Tool call" in page and "<code>task_create</code>" in page
    assert "Tool effect recorded" in page  # the task's ToolEffect record
    assert f"{run.tokens_in} tokens in / {run.tokens_out} out" in page
    assert "What was sent to the model" in page and "Standard discount is 5 percent" in page
    assert "call ACME" in page and "Context records" in page


def test_session_transcript_lists_the_memories_a_model_call_was_given(alice, bob, bob_agent):
    from cadre.memory import services as memory_services

    run = _run(bob, bob_agent, "hello")
    memory = memory_services.memory_add(
        actor=member_actor(bob),
        scope="user",
        scope_id=bob.pk,
        kind="preference",
        content="Prefers short answers",
        source_kind="user_statement",
    )
    record = ContextRecord.objects.create(
        organization=bob.organization, run_id=str(run.pk), step_id="2", query="hello"
    )
    ContextRecordItem.objects.create(
        context=record, memory=memory, memory_version=1, rank=1, score=0.87, tokens=4
    )
    page = client(alice).get(reverse("console:session", args=[run.session_id])).content.decode()
    assert "Prefers short answers" in page
    assert reverse("console:memory_detail", args=[memory.pk]) in page
    assert "score 0.870" in page


def test_a_deleted_memory_shows_as_its_marker_in_the_transcript(alice, bob, bob_agent):
    """A context record keeps pointing at a deleted memory (ids only): the transcript shows the
    deletion marker in place of its text and no link to its (404) page."""
    from cadre.memory import services as memory_services

    run = _run(bob, bob_agent, "hello")
    memory = memory_services.memory_add(
        actor=member_actor(bob),
        scope="user",
        scope_id=bob.pk,
        kind="preference",
        content="Prefers answers in bullet points",
        source_kind="user_statement",
    )
    record = ContextRecord.objects.create(
        organization=bob.organization, run_id=str(run.pk), step_id="2", query="hello"
    )
    ContextRecordItem.objects.create(
        context=record, memory=memory, memory_version=1, rank=1, score=0.5, tokens=6
    )
    memory = memory_services.memory_delete(actor=member_actor(bob), memory=memory)
    page = client(alice).get(reverse("console:session", args=[run.session_id])).content.decode()
    assert "Prefers answers in bullet points" not in page
    assert memory.deletion["marker"] in page
    assert reverse("console:memory_detail", args=[memory.pk]) not in page


def test_session_transcript_shows_a_paused_runs_confirmation(alice, bob, bob_agent):
    run = _run(bob, bob_agent, "send hello to group:all-staff")
    assert run.status == "waiting"
    page = client(alice).get(reverse("console:session", args=[run.session_id])).content.decode()
    assert "Confirmations" in page and "im_send" in page
    assert "Waits" in page and "Pending" in page


def test_transcript_queries_do_not_grow_with_runs(
    alice, bob, bob_agent, django_assert_max_num_queries
):
    first = _run(bob, bob_agent, "hello")
    for text in ("one", "two", "three", "four"):
        _run(bob, bob_agent, text, session=first.session)
    browser = client(alice)
    url = reverse("console:session", args=[first.session_id])
    browser.get(url)  # warm the session and caches
    with django_assert_max_num_queries(25):
        assert browser.get(url).status_code == 200
