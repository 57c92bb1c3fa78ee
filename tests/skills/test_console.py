"""Console: the reviewers' inbox and review page (score components, evidence, diff, comments,
decisions), the employee's proposals page; denied for those without the right, 404 for
outsiders."""

from __future__ import annotations

import pytest
from django.urls import reverse

from cadre.agents.models import Run
from cadre.agents.runtime.lifecycle import execution as engine
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.agents.runtime.lifecycle.after import run_after_hooks
from cadre.skills import services
from cadre.skills.models import SkillCandidate, SkillProposal
from cadre.tenancy.actors import member_actor
from hub.models import SkillVersion
from tests.skills.conftest import make_agent, skill_md

pytestmark = pytest.mark.django_db


@pytest.fixture
def rita(make_member):
    return make_member(roles=("skill_reviewer",), display_name="Rita", email="rita@acme.test")


@pytest.fixture
def dave(make_member):
    return make_member(roles=("business_admin",), display_name="Dave", email="dave@acme.test")


@pytest.fixture
def candidate(dave):
    files = {
        "SKILL.md": skill_md(
            "visit-prep",
            "Prepare a customer visit: agenda, attendees, follow-up list and booth budget.",
            ["Write the agenda", "List the attendees"],
            example="Visit to ACME.",
        )
    }
    return services.candidate_create(
        actor=member_actor(dave), source="upload", files=files, requested_by=dave
    )


def test_reviewer_sees_the_inbox_and_decides_on_the_review_page(rita, candidate, browser):
    client = browser(rita)
    inbox = client.get(reverse("console:skill_reviews"))
    assert inbox.status_code == 200
    assert "visit-prep" in inbox.content.decode()
    assert "<strong>Skill review</strong> (skill.review)" in inbox.content.decode()

    url = reverse("console:skill_review", args=[candidate.pk])
    page = client.get(url).content.decode()
    for label in ("Validation", "Security scan", "Evidence", "Distinct from Hub skills", "Clarity"):
        assert label in page
    assert "Changes against nothing" in page
    assert "+2. List the attendees" in page  # the diff of a new skill: every line added
    assert "Uploaded by" in page  # the evidence
    assert "Record decision" in page

    missing = client.post(url, {"decision": "reject", "comment": ""})
    assert missing.status_code == 200
    assert "needs a comment" in missing.content.decode()
    done = client.post(url, {"decision": "approve", "comment": "Clear and useful"})
    assert done.status_code == 302
    candidate.refresh_from_db()
    assert candidate.status == SkillCandidate.Status.PUBLISHED
    assert SkillVersion.objects.get(package__name="visit-prep").status == "published"
    after = client.get(url).content.decode()
    assert "Clear and useful" in after and "@acme/visit-prep@1.0.0" in after


def test_a_published_new_skill_still_reads_as_new_on_its_review_page(rita, candidate, browser):
    """After publication the candidate names its package: the page must not call it a new
    version of the package it created, nor diff it against itself."""
    services.candidate_decide(
        actor=member_actor(rita), candidate=candidate, decision="approve", comment="Good"
    )
    page = browser(rita).get(reverse("console:skill_review", args=[candidate.pk])).content
    page = page.decode()
    assert "@acme/visit-prep@1.0.0" in page  # published as
    assert "new version of" not in page
    assert "Changes against nothing" in page and "+2. List the attendees" in page


def test_a_published_update_reads_against_the_version_it_changed(rita, dave, candidate, browser):
    """Once published, an update's review page diffs it against the version it was reviewed
    against, not against itself ("unchanged")."""
    services.candidate_decide(
        actor=member_actor(rita), candidate=candidate, decision="approve", comment="Good"
    )
    files = {
        "SKILL.md": skill_md(
            "visit-prep",
            "Prepare a customer visit: agenda, attendees, follow-up list and booth budget.",
            ["Write the agenda", "List the attendees", "Book the meeting room"],
            example="Visit to ACME.",
        )
    }
    update = services.candidate_create(
        actor=member_actor(dave), source="upload", files=files, requested_by=dave
    )
    services.candidate_decide(
        actor=member_actor(rita), candidate=update, decision="approve", comment="Better"
    )
    update.refresh_from_db()
    assert update.status == SkillCandidate.Status.PUBLISHED
    assert update.published_version.version != update.base_version.version
    page = browser(rita).get(reverse("console:skill_review", args=[update.pk])).content.decode()
    assert f"Changes against @acme/visit-prep@{update.base_version.version}" in page
    assert "+3. Book the meeting room" in page
    assert ">unchanged<" not in page


def test_the_requester_sees_their_candidate_but_cannot_decide_it(dave, candidate, browser):
    page = browser(dave).get(reverse("console:skill_review", args=[candidate.pk]))
    assert page.status_code == 200
    body = page.content.decode()
    assert "Record decision" not in body
    assert "is decided by" in body
    forged = browser(dave).post(
        reverse("console:skill_review", args=[candidate.pk]), {"decision": "approve"}
    )
    assert forged.status_code == 200
    candidate.refresh_from_db()
    assert candidate.status == SkillCandidate.Status.IN_REVIEW


def test_employee_is_denied_the_inbox_and_outsider_gets_404(bob, charlie, candidate, browser):
    assert browser(bob).get(reverse("console:skill_reviews")).status_code == 403
    assert browser(bob).get(reverse("console:skill_review", args=[candidate.pk])).status_code == 404
    outsider = browser(charlie)
    inbox = outsider.get(reverse("console:skill_reviews") + "?view=in_review")
    assert inbox.status_code == 200 and "visit-prep" not in inbox.content.decode()
    detail = reverse("console:skill_review", args=[candidate.pk])
    assert outsider.get(detail).status_code == 404
    assert outsider.post(detail, {"decision": "approve"}).status_code == 404
    assert browser().get(reverse("console:skill_reviews")).status_code == 302  # sign in first


def test_employee_confirms_a_proposal_from_the_console(alice, bob, charlie, browser):
    agent = make_agent(alice, bob)
    first = runtime.run_start(
        actor=member_actor(bob), agent=agent, text="Draft the expo plan for Shenzhen."
    )
    assert engine.run_execute(first.pk) == Run.Status.COMPLETED
    second = runtime.run_start(
        actor=member_actor(bob),
        agent=agent,
        text="Next time, also list the booth budget.",
        session=first.session,
    )
    assert engine.run_execute(second.pk) == Run.Status.COMPLETED
    run_after_hooks(second.pk)
    proposal = SkillProposal.objects.get()

    page = browser(bob).get(reverse("console:skill_proposals")).content.decode()
    assert proposal.name in page and "booth budget" in page
    confirm = reverse("console:skill_proposal_confirm", args=[proposal.pk])
    assert browser(alice).post(confirm).status_code == 404  # not alice's to confirm
    assert browser(charlie).post(confirm).status_code == 404
    response = browser(bob).post(confirm)
    proposal.refresh_from_db()
    assert proposal.status == SkillProposal.Status.CONFIRMED
    assert response.status_code == 302
    assert response["Location"] == reverse("console:skill_review", args=[proposal.candidate_id])
