"""Skill proposals reach the person: the skills layer tells its `proposal_created` listeners of
a new proposal once it commits and its `proposal_decided` listeners of each decision (with how
it was taken); accepting through the API makes a candidate, dismissing stores none; a stated
preference makes no proposal through the real runtime; web chat renders a pending proposal as a
card and the navigation lists "My skill proposals"."""

from __future__ import annotations

import pytest
from django.urls import reverse

from cadre.governance.models import AuditEvent
from cadre.skills import services
from cadre.skills.models import SkillCandidate, SkillEvidence, SkillProposal
from tests.skills.conftest import make_agent
from tests.skills.test_backflow import _turn

pytestmark = pytest.mark.django_db

REQUEST = "Prepare the project update for the Shanghai launch."
CORRECTION = "You forgot the risks section; next time also include one."
PREFERENCE = "From now on, always write reports in bullet points, and my manager is Li Wei."


def _after(run, capture):
    from cadre.agents.runtime.lifecycle.after import run_after_hooks

    with capture(execute=True):
        run_after_hooks(run.pk)


@pytest.fixture
def celery_eager():
    """Tasks run in-process on commit (the same code a worker runs); restored afterwards."""
    from cadre.celery import app

    saved = (app.conf.task_always_eager, app.conf.task_eager_propagates)
    app.conf.task_always_eager = app.conf.task_eager_propagates = True
    yield
    app.conf.task_always_eager, app.conf.task_eager_propagates = saved


@pytest.fixture
def told():
    """What the ports told their listeners (the connectors' own are set aside here)."""
    created: list[int] = []
    decided: list[tuple[int, str, str]] = []
    with (
        services.proposal_created.overridden([lambda p: created.append(p.pk) or 0]),
        services.proposal_decided.overridden(
            [lambda p, via: decided.append((p.pk, p.status, via))]
        ),
    ):
        yield {"created": created, "decided": decided}


def _correction(alice, bob, capture, text=CORRECTION):
    agent = make_agent(alice, bob)
    first = _turn(bob, agent, REQUEST)
    second = _turn(bob, agent, text, session=first.session)
    _after(second, capture)
    return agent, first, second


def test_a_new_proposal_is_told_to_the_listeners_after_commit(
    alice, bob, told, celery_eager, django_capture_on_commit_callbacks
):
    _agent, _first, second = _correction(alice, bob, django_capture_on_commit_callbacks)
    proposal = SkillProposal.objects.get(run=second)
    assert told["created"] == [proposal.pk]
    event = second.events.get(kind="skill_proposal")
    assert event.data["proposal"] == proposal.pk and event.data["name"] == proposal.name
    steps = proposal.files["SKILL.md"].split("## Steps", 1)[1].split("## When to use", 1)[0]
    # One step from the correction: its second clause only repeats the first ("include one").
    assert [line for line in steps.splitlines() if line[:2] in ("1.", "2.", "3.")] == [
        "1. Include the risks section."
    ]


def test_accepting_through_the_api_makes_a_candidate_and_tells_how(
    alice, bob, told, client_for, celery_eager, django_capture_on_commit_callbacks
):
    _agent, first, second = _correction(alice, bob, django_capture_on_commit_callbacks)
    proposal = SkillProposal.objects.get(run=second)
    response = client_for(bob).post(f"/api/v1/skills/proposals/{proposal.pk}/confirm/")
    assert response.status_code == 201, response.content
    candidate = SkillCandidate.objects.get(pk=response.json()["id"])
    assert candidate.requested_by == bob and candidate.status == SkillCandidate.Status.IN_REVIEW
    evidence = candidate.evidence.get(kind=SkillEvidence.Kind.CONVERSATION)
    assert evidence.data["run_ids"] == [first.pk, second.pk]
    assert told["decided"] == [(proposal.pk, "confirmed", "console")]


def test_dismissing_stores_no_candidate(
    alice, bob, told, client_for, celery_eager, django_capture_on_commit_callbacks
):
    _agent, _first, second = _correction(alice, bob, django_capture_on_commit_callbacks)
    proposal = SkillProposal.objects.get(run=second)
    candidates_before = SkillCandidate.objects.count()
    response = client_for(bob).post(
        f"/api/v1/skills/proposals/{proposal.pk}/dismiss/", {"reason": "one-off"}, format="json"
    )
    assert response.status_code == 200 and response.json()["status"] == "dismissed"
    assert SkillCandidate.objects.count() == candidates_before == 0
    assert not SkillEvidence.objects.exists()
    assert not AuditEvent.objects.filter(action="skills.candidate.create").exists()
    proposal.refresh_from_db()
    assert proposal.candidate is None and proposal.status == SkillProposal.Status.DISMISSED
    assert told["decided"] == [(proposal.pk, "dismissed", "console")]
    # Decided once: neither accepting nor dismissing again changes anything.
    again = client_for(bob).post(f"/api/v1/skills/proposals/{proposal.pk}/confirm/")
    assert again.status_code == 409 and again.json()["error"]["code"] == "proposal_decided"
    assert not SkillCandidate.objects.exists()
    assert len(told["decided"]) == 1


def test_another_member_cannot_accept_or_dismiss_and_nothing_is_stored(
    alice, bob, charlie, told, client_for, celery_eager, django_capture_on_commit_callbacks
):
    _agent, _first, second = _correction(alice, bob, django_capture_on_commit_callbacks)
    proposal = SkillProposal.objects.get(run=second)
    for member in (alice, charlie):
        for action in ("confirm", "dismiss"):
            response = client_for(member).post(f"/api/v1/skills/proposals/{proposal.pk}/{action}/")
            assert response.status_code == 404
            assert response.json()["error"]["code"] == "not_found"
    proposal.refresh_from_db()
    assert proposal.status == SkillProposal.Status.PENDING
    assert not SkillCandidate.objects.exists() and told["decided"] == []


def test_a_stated_preference_makes_no_proposal(
    alice, bob, told, celery_eager, django_capture_on_commit_callbacks
):
    _agent, _first, second = _correction(
        alice, bob, django_capture_on_commit_callbacks, text=PREFERENCE
    )
    assert not SkillProposal.objects.exists()
    assert told["created"] == []
    step = second.steps.get(name="post_process:skill_backflow")
    assert step.output == {"proposal": None, "reason": "no correction in the message"}
    assert not second.events.filter(kind="skill_proposal").exists()


def test_web_chat_renders_the_pending_proposal_and_the_navigation_lists_my_proposals(
    alice, bob, browser, celery_eager, django_capture_on_commit_callbacks
):
    _agent, _first, second = _correction(alice, bob, django_capture_on_commit_callbacks)
    proposal = SkillProposal.objects.get(run=second)
    page = browser(bob).get(reverse("console:chat_session", args=[second.session_id]))
    html = page.content.decode()
    assert f'data-proposal="{proposal.pk}"' in html and "Save as skill" in html
    assert reverse("console:skill_proposal_confirm", args=[proposal.pk]) in html
    assert f'href="{reverse("console:skill_proposals")}"' in html  # the navigation
    assert "My skill proposals" in html

    # Without JavaScript the card's form posts and the chat comes back.
    chat = reverse("console:chat_session", args=[second.session_id])
    response = browser(bob).post(
        reverse("console:skill_proposal_dismiss", args=[proposal.pk]), {"next": chat}
    )
    assert response.status_code == 302 and response["Location"] == chat
    assert "data-proposal=" not in browser(bob).get(chat).content.decode()
    assert not SkillCandidate.objects.exists()
    # An outside address is not followed.
    other = SkillProposal.objects.filter(pk=proposal.pk).update(status="pending")
    assert other == 1
    response = browser(bob).post(
        reverse("console:skill_proposal_dismiss", args=[proposal.pk]),
        {"next": "https://evil.example/"},
    )
    assert response["Location"] == reverse("console:skill_proposals")
