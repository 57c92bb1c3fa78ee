"""Backflow: an employee's correction in a real offline run becomes a proposal; confirming it
(through the API or by replying to the agent) makes a candidate with the conversation as
evidence. A skill in the run's context gets a new-version proposal."""

from __future__ import annotations

import pytest

from cadre.agents.models import Run
from cadre.agents.runtime.lifecycle import execution as engine
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.agents.runtime.lifecycle.after import run_after_hooks
from cadre.governance.models import AuditEvent
from cadre.skills import services
from cadre.skills.models import SkillCandidate, SkillEvidence, SkillProposal
from cadre.skills.selectors import decode_files
from cadre.tenancy.actors import member_actor
from hub.bundles import bundle_from_files
from hub.services import package_publish
from tests.refusals import nothing_changes
from tests.skills.conftest import make_agent, skill_md

pytestmark = pytest.mark.django_db

CORRECTION = "Next time, also include the booth budget and the follow-up list."


def _turn(member, agent, text, session=None) -> Run:
    run = runtime.run_start(actor=member_actor(member), agent=agent, text=text, session=session)
    assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    run.refresh_from_db()
    return run


def _conversation(alice, bob, **agent_kwargs):
    agent = make_agent(alice, bob, **agent_kwargs)
    first = _turn(bob, agent, "Prepare the trade show plan for the Shanghai expo.")
    second = _turn(bob, agent, CORRECTION, session=first.session)
    assert "post_process:skill_backflow" in run_after_hooks(second.pk)
    return agent, first, second


def test_a_correction_becomes_a_proposal_and_confirming_it_makes_a_candidate(
    alice, bob, client_for
):
    _agent, first, second = _conversation(alice, bob)
    proposal = SkillProposal.objects.get(run=second)
    assert proposal.member == bob
    assert proposal.status == SkillProposal.Status.PENDING
    assert proposal.kind == SkillProposal.Kind.NEW_SKILL
    assert proposal.drafted_by.startswith("offline rules")
    text = proposal.files["SKILL.md"]
    assert "booth budget" in text and "follow-up list" in text
    assert "Drafted by rules" in text  # the offline draft is marked as such
    assert second.events.filter(kind="skill_proposal").exists()

    # The proposal is bob's alone: alice (an owner) does not even see it.
    assert client_for(alice).get(f"/api/v1/skills/proposals/{proposal.pk}/").status_code == 404
    response = client_for(bob).post(f"/api/v1/skills/proposals/{proposal.pk}/confirm/")
    assert response.status_code == 201, response.content
    candidate = SkillCandidate.objects.get(pk=response.json()["id"])
    assert candidate.source == SkillCandidate.Source.BACKFLOW
    assert candidate.requested_by == bob
    assert candidate.status == SkillCandidate.Status.IN_REVIEW
    assert b"booth budget" in decode_files(candidate.files)["SKILL.md"]
    evidence = candidate.evidence.get(kind=SkillEvidence.Kind.CONVERSATION)
    assert evidence.data["session_id"] == first.session_id
    assert evidence.data["run_ids"] == [first.pk, second.pk]
    assert [m["content"] for m in evidence.data["messages"]][:3] == [
        first.input["text"],
        first.output["text"],
        CORRECTION,
    ]
    proposal.refresh_from_db()
    assert proposal.status == SkillProposal.Status.CONFIRMED and proposal.candidate == candidate
    actions = set(
        AuditEvent.objects.filter(organization=bob.organization).values_list("action", flat=True)
    )
    assert {
        "skills.proposal.create",
        "skills.proposal.confirm",
        "skills.candidate.create",
    } <= actions
    again = client_for(bob).post(f"/api/v1/skills/proposals/{proposal.pk}/confirm/")
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "proposal_decided"


def test_replying_yes_to_the_agent_confirms_the_pending_proposal(alice, bob):
    agent, _first, second = _conversation(alice, bob)
    proposal = SkillProposal.objects.get(run=second)
    reply = _turn(bob, agent, "Yes, save it", session=second.session)
    run_after_hooks(reply.pk)
    proposal.refresh_from_db()
    assert proposal.status == SkillProposal.Status.CONFIRMED
    evidence = proposal.candidate.evidence.get()
    assert evidence.data["confirmed_via"] == "agent_reply"
    assert not SkillProposal.objects.filter(run=reply).exists()


def test_an_ordinary_message_drafts_nothing(alice, bob):
    agent = make_agent(alice, bob)
    first = _turn(bob, agent, "Prepare the trade show plan for the Shanghai expo.")
    second = _turn(bob, agent, "Thanks, looks good.", session=first.session)
    run_after_hooks(second.pk)
    assert not SkillProposal.objects.exists()
    assert second.steps.get(name="post_process:skill_backflow").output["proposal"] is None


def test_a_skill_in_the_runs_context_gets_a_new_version_proposal(alice, bob):
    files = {
        "SKILL.md": skill_md(
            "trade-show-plan",
            "Plan a trade show: booth, staff, shipping and the trade show plan itself.",
            ["Book the booth", "Plan staff for the trade show"],
        ),
        "references/checklist.md": b"- badges\n",
    }
    package_publish(
        actor=member_actor(alice),
        bundle=bundle_from_files(files, folder_name="trade-show-plan"),
        version="1.0.0",
        name="trade-show-plan",
    )
    _agent, _first, second = _conversation(
        alice, bob, skills=[{"package": "@acme/trade-show-plan", "range": "^1.0.0"}]
    )
    proposal = SkillProposal.objects.get(run=second)
    assert proposal.kind == SkillProposal.Kind.NEW_VERSION
    assert proposal.package.name == "trade-show-plan"
    assert "Book the booth" in proposal.files["SKILL.md"]
    assert "booth budget" in proposal.files["SKILL.md"]
    candidate = services.proposal_confirm(actor=member_actor(bob), proposal=proposal)
    files_now = decode_files(candidate.files)
    assert files_now["references/checklist.md"] == b"- badges\n"  # the other files are kept
    assert candidate.package == proposal.package


def test_the_employee_can_dismiss_a_proposal_and_nothing_reaches_review(alice, bob, client_for):
    _agent, _first, second = _conversation(alice, bob)
    proposal = SkillProposal.objects.get(run=second)
    listed = client_for(bob).get("/api/v1/skills/proposals/?status=pending").json()
    assert [row["id"] for row in listed["results"]] == [proposal.pk]
    assert client_for(alice).get("/api/v1/skills/proposals/").json()["results"] == []
    response = client_for(bob).post(
        f"/api/v1/skills/proposals/{proposal.pk}/dismiss/", {"reason": "one-off"}, format="json"
    )
    assert response.status_code == 200 and response.json()["status"] == "dismissed"
    assert not SkillCandidate.objects.exists()
    event = AuditEvent.objects.get(action="skills.proposal.dismiss")
    assert event.reason == "one-off"
    with nothing_changes(SkillCandidate, proposal):
        assert (
            client_for(bob).post(f"/api/v1/skills/proposals/{proposal.pk}/confirm/").status_code
            == 409
        )
