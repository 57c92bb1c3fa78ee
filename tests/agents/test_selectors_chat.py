# ruff: noqa: F811 - the fixtures imported from tests.console.agents_setup are parameters here
"""What a web-chat session shows (`chat_transcript`, shared by the chat page, its socket and its
confirm endpoint): its own runs and confirmations, never another session's or another member's."""

from __future__ import annotations

import pytest
from django.urls import reverse

from cadre.agents import selectors
from cadre.agents.models import RunEvent
from cadre.agents.runtime.lifecycle import execution as engine
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.governance.models import Confirmation
from cadre.tenancy.actors import member_actor
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

pytestmark = pytest.mark.django_db

RISKY = "send hello to group:all-staff"


@pytest.fixture
def waiting_run(bob, bob_agent):
    """A run of Bob's first session, paused on a confirmation Bob decides."""
    run = runtime.run_start(actor=member_actor(bob), agent=bob_agent, text=RISKY)
    engine.run_execute(run.pk)
    return run


@pytest.fixture
def other_session_run(bob, bob_agent):
    """A finished run of another of Bob's sessions."""
    run = runtime.run_start(actor=member_actor(bob), agent=bob_agent, text="the discount?")
    engine.run_execute(run.pk)
    return run


def test_transcript_shows_this_sessions_pending_confirmation(bob, waiting_run):
    confirmation = Confirmation.objects.get(run_id=waiting_run.pk)
    transcript = selectors.chat_transcript(member_actor(bob), waiting_run.session)
    assert transcript["pending"] == [confirmation]
    assert transcript["pending"][0].can_decide
    [turn] = transcript["turns"]
    assert turn["run"] == waiting_run and turn["confirmations"] == [confirmation]
    assert turn["failed_messages"] == []
    # The run still waits: a socket streams it from its first event.
    first = RunEvent.objects.filter(run=waiting_run).order_by("id").first()
    assert transcript["after"] == first.pk - 1


def test_a_confirmation_of_another_session_is_not_shown(bob, waiting_run, other_session_run):
    assert other_session_run.session_id != waiting_run.session_id
    actor = member_actor(bob)
    confirmation = Confirmation.objects.get(run_id=waiting_run.pk)
    transcript = selectors.chat_transcript(actor, other_session_run.session)
    assert transcript["pending"] == []
    assert [turn["confirmations"] for turn in transcript["turns"]] == [[]]
    assert (
        selectors.chat_confirmation_get(actor, other_session_run.session_id, confirmation.pk)
        is None
    )
    assert (
        selectors.chat_confirmation_get(actor, waiting_run.session_id, confirmation.pk)
        == confirmation
    )
    # Nothing of this session is still going: a socket streams only what comes next.
    latest = RunEvent.objects.order_by("-id").first()
    assert transcript["after"] == latest.pk


def test_deciding_another_sessions_confirmation_from_a_chat_is_not_found(
    bob, waiting_run, other_session_run
):
    confirmation = Confirmation.objects.get(run_id=waiting_run.pk)
    url = reverse("console:chat_decide", args=[other_session_run.session_id, confirmation.pk])
    assert client(bob).post(url, {"decision": "approve"}).status_code == 404
    confirmation.refresh_from_db()
    assert confirmation.status == Confirmation.Status.PENDING


def test_another_members_session_is_not_found(alice, bob, alice_agent, waiting_run):
    assert selectors.chat_session_get(member_actor(alice), waiting_run.session_id) is None
    url = reverse("console:chat_session", args=[waiting_run.session_id])
    assert client(alice).get(url).status_code == 404
    assert client(bob).get(url).status_code == 200
