"""One rule decides who approves a skill (`hub.approval.review_approval`): the Hub's
publish-without-review decision and the skill candidates' review stages ask it and agree,
role by role and grant by grant; the final stage's approval publishes without a second Hub
review, even for an approver who holds neither `skill.publish` nor `skill.review`."""

from __future__ import annotations

import pytest

from cadre.errors import NotPermitted
from cadre.skills import selectors, services
from cadre.skills.models import SkillCandidate
from cadre.tenancy import services as tenancy_services
from cadre.tenancy.actors import member_actor
from cadre.tenancy.roles import ROLES
from hub import services as hub_services
from hub.approval import review_approval, version_approval
from hub.models import SkillPackage, SkillVersion
from hub.tests.factories import publish
from tests.factories import DepartmentFactory
from tests.skills.conftest import skill_md

pytestmark = pytest.mark.django_db

ROLE_NAMES = ["owner", "it_admin", "business_admin", "skill_reviewer", "employee", "auditor"]


def _candidate(requester, *, name="visit-prep") -> SkillCandidate:
    files = {
        "SKILL.md": skill_md(
            name,
            "Prepare a customer visit: agenda, attendees, follow-up list and booth budget.",
            ["Write the agenda", "List the attendees", "Send the follow-up list"],
        )
    }
    return services.candidate_create(
        actor=member_actor(requester), source="upload", files=files, requested_by=requester
    )


def _one_rule(actor, subject) -> bool:
    return review_approval(
        actor,
        stages=selectors.DEFAULT_STAGES,
        stage_index=0,
        organization_id=subject.organization_id,
        department_id=subject.department_id,
    ).allowed


def test_the_roles_list_covers_every_role():
    assert sorted(ROLE_NAMES) == sorted(ROLES)


@pytest.mark.parametrize("role", ROLE_NAMES)
def test_hub_and_review_stages_give_the_one_rules_answer_for_each_role(
    role, org_a, alice, bob, make_member
):
    package = publish(alice, "shared-notes").package
    candidate = _candidate(bob)
    member = make_member(roles=(role,), display_name=role, email=f"{role}@acme.test")
    actor = member_actor(member)
    expected = "skill.review" in ROLES[role].permissions

    one = _one_rule(actor, candidate)
    assert one is _one_rule(actor, package) is expected
    # The Hub: may the member publish a version of the package without review…
    assert version_approval(actor, package, uploading=True).allowed is one
    # …and approve a pending one (the same stage, decided in the Hub).
    if one:
        hub_services.require_reviewer(actor, package)
    else:
        with pytest.raises(NotPermitted):
            hub_services.require_reviewer(actor, package)
    # The skill candidates' review stages.
    rule = selectors.decide_rule(actor, candidate)
    assert rule.allowed is one
    assert (rule.stage_index, rule.stage_name, rule.completes_review) == (0, "Skill review", one)


@pytest.mark.parametrize("role", ["owner", "it_admin", "business_admin", "skill_reviewer"])
def test_an_upload_publishes_at_once_exactly_when_the_rule_allows(role, org_a, make_member):
    member = make_member(roles=(role,), display_name=role, email=f"{role}@acme.test")
    version = publish(member, f"notes-by-{role.replace('_', '-')}")
    allowed = version_approval(member_actor(member), version.package, uploading=True).allowed
    expected = SkillVersion.Status.PUBLISHED if allowed else SkillVersion.Status.PENDING_REVIEW
    assert version.status == expected
    assert allowed is ("skill.review" in ROLES[role].permissions)


def test_the_organizations_no_review_policy_has_no_hub_stage(org_a, alice, make_member):
    org_a.settings = {"hub": {"publish_without_review": True}}
    org_a.save(update_fields=["settings"])
    author = make_member(roles=("business_admin",), display_name="Bea", email="bea@acme.test")
    version = publish(author, "team-notes")
    assert version.status == SkillVersion.Status.PUBLISHED
    assert version_approval(member_actor(author), version.package, uploading=True).allowed
    # Approving a pending version still needs the reviewer.
    assert not version_approval(member_actor(author), version.package).allowed


def test_a_department_grant_reaches_the_same_subjects_on_both_paths(org_a, alice, bob, make_member):
    sales = DepartmentFactory(organization=org_a, name="Sales")
    support = DepartmentFactory(organization=org_a, name="Support")
    bob.department = sales
    bob.save(update_fields=["department"])
    package = publish(alice, "sales-notes").package
    package.visibility, package.department = SkillPackage.Visibility.DEPARTMENT, sales
    package.save(update_fields=["visibility", "department"])
    candidate = _candidate(bob)
    assert candidate.department_id == sales.pk
    erin = make_member(display_name="Erin", email="erin@acme.test")

    for target, expected in ((support, False), (sales, True)):
        tenancy_services.object_grant(
            actor=member_actor(alice), member=erin, permission="skill.review", target=target
        )
        actor = member_actor(erin)
        assert _one_rule(actor, candidate) is _one_rule(actor, package) is expected
        assert version_approval(actor, package, uploading=True).allowed is expected
        assert selectors.decide_rule(actor, candidate).allowed is expected


def test_the_final_stage_publishes_for_an_approver_without_hub_permissions(
    org_a, alice, bob, make_member
):
    services.review_stages_set(
        actor=member_actor(alice), stages=[{"name": "Audit", "roles": ["auditor"]}]
    )
    auditor = make_member(roles=("auditor",), display_name="Aude", email="aude@acme.test")
    actor = member_actor(auditor)
    assert not actor.has("skill.publish") and not actor.has("skill.review")
    candidate = _candidate(bob)
    rule = selectors.decide_rule(actor, candidate)
    assert rule.allowed and rule.completes_review and rule.stage_name == "Audit"

    decided = services.candidate_decide(
        actor=actor, candidate=candidate, decision="approve", comment="Fine"
    )
    assert decided.status == SkillCandidate.Status.PUBLISHED
    version = decided.published_version
    assert version.status == SkillVersion.Status.PUBLISHED
    assert version.reviewed_by == auditor
    # The approval does not outlive the decision: in the Hub the auditor is no reviewer.
    with pytest.raises(NotPermitted):
        hub_services.require_reviewer(actor, version.package)
