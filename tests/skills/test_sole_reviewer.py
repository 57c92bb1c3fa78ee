"""Small organizations finish the loop: when no other member could decide a stage, the member
who asked for the skill decides it as sole reviewer, with a required justification that is
audited and shown with the Hub version; when someone else could, the requester still cannot.
Version pages say truthfully how each version was reviewed."""

from __future__ import annotations

import pytest
from django.urls import reverse

from cadre.governance.models import AuditEvent
from cadre.skills import selectors, services
from cadre.skills.models import ReviewDecision, SkillCandidate
from cadre.tenancy import services as tenancy_services
from cadre.tenancy.actors import member_actor
from hub import services as hub_services
from hub.bundles import bundle_from_files
from hub.models import SkillVersion
from tests.factories import DepartmentFactory
from tests.skills.conftest import skill_md

pytestmark = pytest.mark.django_db

JUSTIFICATION = "We are a two-person company; I am the only admin."


def _candidate(member, name="visit-prep") -> SkillCandidate:
    files = {
        "SKILL.md": skill_md(
            name,
            "Prepare a customer visit: agenda, attendees, follow-up list and booth budget.",
            ["Write the agenda", "List the attendees", "Send the follow-up list"],
            example="Visit to ACME in May.",
        )
    }
    return services.candidate_create(
        actor=member_actor(member), source="upload", files=files, requested_by=member
    )


def _decide(client, candidate_id, decision="approve", **fields):
    return client.post(
        f"/api/v1/skills/candidates/{candidate_id}/decisions/",
        {"decision": decision, **fields},
        format="json",
    )


def _nothing_decided(candidate: SkillCandidate) -> None:
    candidate.refresh_from_db()
    assert candidate.status == SkillCandidate.Status.IN_REVIEW and candidate.stage_index == 0
    assert not ReviewDecision.objects.filter(candidate=candidate).exists()
    assert not SkillVersion.objects.filter(package__name=candidate.name).exists()
    assert not AuditEvent.objects.filter(
        target_type="skillcandidate",
        target_id=str(candidate.pk),
        action__startswith="skills.candidate.a",
    ).exists()


def test_a_sole_admin_publishes_their_own_skill_with_a_justification(alice, bob, client_for):
    # bob is an employee: he cannot review, so alice is the only member who can.
    candidate = _candidate(alice)
    client = client_for(alice)
    detail = client.get(f"/api/v1/skills/candidates/{candidate.pk}/").json()
    assert detail["may_decide"]["allowed"] is True
    assert detail["may_decide"]["sole_reviewer"] is True
    assert "sole reviewer" in detail["may_decide"]["reason"]

    missing = _decide(client, candidate.pk, comment="Looks fine")
    assert missing.status_code == 400
    error = missing.json()["error"]
    assert error["code"] == "justification_required"
    assert "sole_reviewer_justification" in error["details"]
    _nothing_decided(candidate)

    blank = _decide(client, candidate.pk, sole_reviewer_justification="   ")
    assert blank.status_code == 400
    _nothing_decided(candidate)

    done = _decide(client, candidate.pk, sole_reviewer_justification=JUSTIFICATION)
    assert done.status_code == 200, done.content
    body = done.json()
    assert body["status"] == "published"
    assert body["decisions"][-1]["sole_reviewer"] is True
    assert body["decisions"][-1]["justification"] == JUSTIFICATION

    decision = ReviewDecision.objects.get(candidate=candidate)
    assert decision.sole_reviewer and decision.decided_by == alice
    event = AuditEvent.objects.get(action="skills.candidate.approve", target_id=str(candidate.pk))
    assert event.reason == JUSTIFICATION
    assert event.changes["after"]["sole_reviewer"] is True
    assert event.changes["after"]["justification"] == JUSTIFICATION

    version = SkillVersion.objects.get(package__name="visit-prep")
    assert version.status == SkillVersion.Status.PUBLISHED
    assert "as sole reviewer" in version.review_note and JUSTIFICATION in version.review_note
    record = selectors.version_review_record(version)
    assert record["kind"] == "stages" and record["sole_reviewer"] is True
    assert record["steps"][0]["by"] == alice
    assert record["steps"][0]["justification"] == JUSTIFICATION


def test_the_requester_cannot_decide_when_another_member_may(alice, make_member, client_for):
    make_member(roles=("skill_reviewer",), display_name="Rita", email="rita@acme.test")
    candidate = _candidate(alice)
    client = client_for(alice)
    detail = client.get(f"/api/v1/skills/candidates/{candidate.pk}/").json()
    assert detail["may_decide"] == {
        "allowed": False,
        "reason": "You asked for this skill: someone else decides “Skill review” "
        "(1 other member may).",
        "sole_reviewer": False,
    }
    refused = _decide(client, candidate.pk, sole_reviewer_justification=JUSTIFICATION)
    assert refused.status_code == 403
    assert "someone else decides" in refused.json()["error"]["message"]
    _nothing_decided(candidate)
    # Nor through the service, whatever the caller passes.
    with pytest.raises(Exception, match="someone else decides"):
        services.candidate_decide(
            actor=member_actor(alice),
            candidate=candidate,
            decision="approve",
            sole_reviewer_justification=JUSTIFICATION,
        )
    _nothing_decided(candidate)


def test_a_grant_on_the_candidates_department_counts_as_another_reviewer(org_a, alice, make_member):
    sales = DepartmentFactory(organization=org_a, name="Sales")
    other = DepartmentFactory(organization=org_a, name="Support")
    alice.department = sales
    alice.save(update_fields=["department"])
    erin = make_member(display_name="Erin", email="erin@acme.test")
    tenancy_services.object_grant(
        actor=member_actor(alice), member=erin, permission="skill.review", target=other
    )
    candidate = _candidate(alice)
    # erin's grant is on Support: it does not reach a Sales candidate.
    assert selectors.decide_rule(member_actor(alice), candidate).sole_reviewer is True

    tenancy_services.object_grant(
        actor=member_actor(alice), member=erin, permission="skill.review", target=sales
    )
    rule = selectors.decide_rule(member_actor(alice), candidate)
    assert rule.allowed is False and "1 other member may" in rule.reason


def test_deactivated_members_do_not_count_as_other_reviewers(alice, make_member):
    rita = make_member(roles=("skill_reviewer",), display_name="Rita", email="rita@acme.test")
    candidate = _candidate(alice)
    assert selectors.decide_rule(member_actor(alice), candidate).allowed is False
    rita.status = rita.Status.DEACTIVATED
    rita.save(update_fields=["status"])
    assert selectors.decide_rule(member_actor(alice), candidate).sole_reviewer is True


def test_a_stage_that_allows_the_requester_needs_no_justification(alice, make_member, client_for):
    make_member(roles=("skill_reviewer",), display_name="Rita", email="rita@acme.test")
    services.review_stages_set(
        actor=member_actor(alice),
        stages=[{"name": "Self check", "permission": "skill.review", "allow_requester": True}],
    )
    candidate = _candidate(alice)
    done = _decide(client_for(alice), candidate.pk)
    assert done.status_code == 200, done.content
    decision = ReviewDecision.objects.get(candidate=candidate)
    assert decision.sole_reviewer is False and decision.justification == ""


def test_version_pages_say_how_each_version_was_reviewed(alice, make_member, browser):
    rita = make_member(roles=("skill_reviewer",), display_name="Rita", email="rita@acme.test")
    dave = make_member(roles=("business_admin",), display_name="Dave", email="dave@acme.test")
    client = browser(alice)

    # 1. Through the review stages, approved by another member.
    reviewed = _candidate(dave, name="reviewed-skill")
    services.candidate_decide(
        actor=member_actor(rita), candidate=reviewed, decision="approve", comment="Clear steps"
    )
    version = SkillVersion.objects.get(package__name="reviewed-skill")
    page = client.get(
        reverse(
            "console:hub_version",
            args=[version.package.namespace.handle, "reviewed-skill", version.version],
        )
    ).content.decode()
    assert "How it was reviewed" in page
    assert "reviewed and approved by Rita" in page
    assert "Comment: Clear steps" in page
    assert "sole reviewer" not in page
    assert "Published without review" not in page
    assert "approved by Rita" in version.review_note

    # 2. Published straight to the Hub by a member holding skill.review: no review at all.
    files = {
        "SKILL.md": skill_md(
            "direct-skill",
            "Write a weekly report: wins, risks and next steps for the team.",
            ["List the wins", "List the risks"],
        )
    }
    direct = hub_services.package_publish(
        actor=member_actor(rita),
        bundle=bundle_from_files(files, folder_name="direct-skill"),
        version="1.0.0",
    ).version
    assert direct.status == SkillVersion.Status.PUBLISHED
    assert selectors.version_review_record(direct)["kind"] == "unreviewed"
    page = client.get(
        reverse(
            "console:hub_version",
            args=[direct.package.namespace.handle, "direct-skill", direct.version],
        )
    ).content.decode()
    assert "Published without review" in page and "by Rita" in page

    # 3. The requester as sole reviewer (rita deactivated: alice is the only reviewer left).
    rita.status = rita.Status.DEACTIVATED
    rita.save(update_fields=["status"])
    own = _candidate(alice, name="own-skill")
    services.candidate_decide(
        actor=member_actor(alice),
        candidate=own,
        decision="approve",
        sole_reviewer_justification=JUSTIFICATION,
    )
    version = SkillVersion.objects.get(package__name="own-skill")
    page = client.get(
        reverse(
            "console:hub_version",
            args=[version.package.namespace.handle, "own-skill", version.version],
        )
    ).content.decode()
    assert "decided by the requester, Alice, as" in page
    assert "sole reviewer" in page
    assert "We are a two-person company" in page


def _stages_post(rows: list[dict], *, initial: int) -> dict:
    data = {
        "stages-TOTAL_FORMS": str(len(rows)),
        "stages-INITIAL_FORMS": str(initial),
        "stages-MIN_NUM_FORMS": "0",
        "stages-MAX_NUM_FORMS": "6",
    }
    for index, row in enumerate(rows):
        for key, value in row.items():
            data[f"stages-{index}-{key}"] = value
    return data


def test_console_edits_review_stages_all_or_nothing_and_audited(alice, make_member, browser):
    url = reverse("console:skill_review_stages")
    client = browser(alice)
    page = client.get(url).content.decode()
    assert 'value="Skill review"' in page and "Save stages" in page

    before = selectors.stages_for(alice.organization)
    bad = client.post(
        url,
        _stages_post(
            [
                {"name": "Department review", "permission": "skill.review"},
                {"name": "Nobody", "permission": ""},
            ],
            initial=1,
        ),
    )
    assert bad.status_code == 400
    assert "Nothing was saved." in bad.content.decode()
    assert "nobody could decide" in bad.content.decode()
    assert selectors.stages_for(alice.organization) == before
    assert not AuditEvent.objects.filter(action="skills.stages.set").exists()

    good = client.post(
        url,
        _stages_post(
            [
                {"name": "Department review", "permission": "skill.review"},
                {"name": "IT security", "roles": ["it_admin", "owner"]},
            ],
            initial=1,
        ),
    )
    assert good.status_code == 302
    stages = selectors.stages_for(alice.organization)
    assert [stage["name"] for stage in stages] == ["Department review", "IT security"]
    assert stages[1]["roles"] == ["it_admin", "owner"]
    assert AuditEvent.objects.filter(action="skills.stages.set").count() == 1

    # A reviewer without policy.manage sees the stages but cannot change them.
    rita = make_member(roles=("skill_reviewer",), display_name="Rita", email="rita@acme.test")
    reviewer = browser(rita)
    assert "IT security" in reviewer.get(url).content.decode()
    refused = reviewer.post(url, _stages_post([{"name": "Mine", "roles": ["owner"]}], initial=2))
    assert refused.status_code == 403
    assert [s["name"] for s in selectors.stages_for(alice.organization)] == [
        "Department review",
        "IT security",
    ]


def test_console_sole_reviewer_form_requires_the_justification(alice, browser):
    candidate = _candidate(alice)
    client = browser(alice)
    url = reverse("console:skill_review", args=[candidate.pk])
    page = client.get(url).content.decode()
    assert "Sole reviewer justification" in page and "sole-reviewer-note" in page
    missing = client.post(url, {"decision": "approve", "comment": ""})
    assert missing.status_code == 200
    assert "This field is required." in missing.content.decode()
    _nothing_decided(candidate)
    done = client.post(url, {"decision": "approve", "sole_reviewer_justification": JUSTIFICATION})
    assert done.status_code == 302
    candidate.refresh_from_db()
    assert candidate.status == SkillCandidate.Status.PUBLISHED
    page = client.get(url).content.decode()
    assert "Sole reviewer justification: " + JUSTIFICATION in page
