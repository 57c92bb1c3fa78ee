"""A reviewer edits a skill candidate before approving it: the edit is a new revision (checked,
scanned, scored), audited with a diff summary, and what is approved and published is the edited
text. The review comment stays internal; the public changelog is its own field, set explicitly
by the author or a reviewer. Those who may not decide the stage cannot edit, and nothing is
stored when they try."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from cadre.governance.models import AuditEvent
from cadre.skills import services
from cadre.skills.models import CandidateRevision, ReviewDecision, SkillCandidate
from cadre.skills.selectors import decode_files
from cadre.tenancy.actors import member_actor
from hub.bundles import bundle_from_files, write_zip
from hub.models import SkillPackage, SkillVersion
from tests.refusals import nothing_changes
from tests.skills.conftest import skill_md

pytestmark = pytest.mark.django_db

EDITED_BODY = "# Visit prep\n\n## Steps\n\n1. Write the agenda.\n2. Confirm the attendees' names."
COMMENT = "Internal: the first draft was sloppy, fixed the steps myself."


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


def _edit(client, candidate, **fields):
    return client.post(f"/api/v1/skills/candidates/{candidate.pk}/edit/", fields, format="json")


def _decide(client, candidate, decision="approve", **fields):
    return client.post(
        f"/api/v1/skills/candidates/{candidate.pk}/decisions/",
        {"decision": decision, **fields},
        format="json",
    )


def test_a_reviewer_edits_then_approves_and_the_published_version_is_the_edit(
    rita, candidate, client_for
):
    client = client_for(rita)
    detail = client.get(f"/api/v1/skills/candidates/{candidate.pk}/").json()
    assert (
        detail["skill"]["name"] == "visit-prep" and "List the attendees" in detail["skill"]["body"]
    )

    response = _edit(client, candidate, body=EDITED_BODY, revision=1, note="Tightened the steps")
    assert response.status_code == 200, response.content
    edited = response.json()
    assert edited["revision"] == 2 and edited["status"] == "in_review"
    assert edited["skill"]["body"] == EDITED_BODY
    assert edited["decisions"][-1]["decision"] == "edit"
    assert edited["decisions"][-1]["comment"] == "Tightened the steps"
    candidate.refresh_from_db()
    revision = CandidateRevision.objects.get(candidate=candidate, number=2)
    assert revision.created_by == rita and revision.fingerprint == candidate.fingerprint

    # Approving what was read before the edit is refused: what is approved is what was read.
    with nothing_changes(SkillVersion, ReviewDecision, candidate):
        stale = _decide(client, candidate, revision=1)
    assert stale.status_code == 409 and stale.json()["error"]["code"] == "revision_changed"

    approved = _decide(client, candidate, comment=COMMENT, revision=2)
    assert approved.status_code == 200, approved.content
    version = SkillVersion.objects.get(package__name="visit-prep")
    assert version.status == SkillVersion.Status.PUBLISHED
    assert version.body.strip() == EDITED_BODY
    assert version.fingerprint == candidate.fingerprint  # signed over the edited bytes
    published = bytes(version.files.get(path="SKILL.md").blob.content).decode()
    assert published == decode_files(candidate.files)["SKILL.md"].decode()
    assert "Confirm the attendees' names." in published and "List the attendees" not in published
    # The comment is internal: the public changelog does not carry it.
    assert COMMENT not in version.changelog and "sloppy" not in version.changelog
    assert COMMENT not in version.review_note


def test_the_edit_is_audited_with_the_reviewer_and_a_diff_summary_only(rita, candidate, client_for):
    response = _edit(client_for(rita), candidate, body=EDITED_BODY)
    assert response.status_code == 200, response.content
    event = AuditEvent.objects.get(action="skills.candidate.edit")
    assert event.actor_id == str(rita.user_id) or "Rita" in event.actor_label
    before, after = event.changes["before"], event.changes["after"]
    assert before["revision"] == 1 and after["revision"] == 2
    assert after["fields"] == ["body"]
    assert after["diff"]["SKILL.md"]["added"] >= 1
    assert after["diff"]["SKILL.md"]["removed"] >= 1
    assert before["fingerprint"] != after["fingerprint"]
    recorded = json.dumps([event.changes, event.reason], ensure_ascii=False)
    assert "Confirm the attendees" not in recorded and "List the attendees" not in recorded


def test_an_explicit_changelog_is_published_and_a_comment_never_becomes_it(
    rita, candidate, client_for
):
    client = client_for(rita)
    response = _edit(client, candidate, changelog="Adds a check of attendees' names.")
    assert response.status_code == 200, response.content
    assert response.json()["revision"] == 1  # the changelog is not part of the skill's files
    assert _decide(client, candidate, comment=COMMENT).status_code == 200
    version = SkillVersion.objects.get(package__name="visit-prep")
    assert version.changelog == "Adds a check of attendees' names."


def test_approving_with_a_comment_and_no_changelog_publishes_a_neutral_changelog(
    rita, candidate, client_for
):
    assert _decide(client_for(rita), candidate, comment=COMMENT).status_code == 200
    version = SkillVersion.objects.get(package__name="visit-prep")
    assert version.changelog == f"From skill candidate {candidate.pk} (uploaded by an author)"
    # The approval's changelog field sets it explicitly, and only it.
    other = services.candidate_create(
        actor=member_actor(candidate.requested_by),
        source="upload",
        files={"SKILL.md": skill_md("visit-follow-up", "Follow up a customer visit.", ["Send"])},
        requested_by=candidate.requested_by,
    )
    answer = _decide(client_for(rita), other, comment=COMMENT, changelog="First version.")
    assert answer.status_code == 200, answer.content
    assert SkillVersion.objects.get(package__name="visit-follow-up").changelog == "First version."


def test_the_author_sets_the_changelog_at_upload(dave, rita, client_for):
    files = {"SKILL.md": skill_md("visit-recap", "Recap a customer visit.", ["Write the recap"])}
    bundle = SimpleUploadedFile(
        "visit-recap.zip", write_zip(bundle_from_files(files, folder_name="visit-recap"))
    )
    response = client_for(dave).post(
        "/api/v1/skills/candidates/",
        {"bundle": bundle, "note": "please review", "changelog": "First recap skill."},
        format="multipart",
    )
    assert response.status_code == 201, response.content
    assert response.json()["changelog"] == "First recap skill."
    candidate = SkillCandidate.objects.get(pk=response.json()["id"])
    assert _decide(client_for(rita), candidate, comment=COMMENT).status_code == 200
    assert SkillVersion.objects.get(package__name="visit-recap").changelog == "First recap skill."


def test_a_reviewer_renames_a_new_skill_and_it_publishes_under_the_new_name(
    rita, candidate, client_for
):
    client = client_for(rita)
    response = _edit(client, candidate, name="customer-visit-prep")
    assert response.status_code == 200, response.content
    assert response.json()["name"] == "customer-visit-prep"
    assert _decide(client, candidate).status_code == 200
    assert SkillPackage.objects.filter(name="customer-visit-prep").exists()
    assert not SkillPackage.objects.filter(name="visit-prep").exists()


def test_an_invalid_edit_is_refused_and_stores_nothing(rita, candidate, client_for):
    client = client_for(rita)
    with nothing_changes(CandidateRevision, ReviewDecision, candidate):
        bad_name = _edit(client, candidate, name="Visit Prep!")
        unchanged = _edit(client, candidate, description=candidate.description)
    assert bad_name.status_code == 400 and bad_name.json()["error"]["code"] == "invalid_name"
    assert unchanged.status_code == 400 and unchanged.json()["error"]["code"] == "no_change"


def test_those_who_may_not_decide_cannot_edit_and_nothing_is_stored(
    bob, charlie, dave, candidate, client_for
):
    watched = (CandidateRevision, ReviewDecision, SkillVersion, candidate)
    with nothing_changes(*watched):
        employee = _edit(client_for(bob), candidate, body=EDITED_BODY)
        outsider = _edit(client_for(charlie), candidate, body=EDITED_BODY)
        requester = _edit(client_for(dave), candidate, body=EDITED_BODY)
    assert employee.status_code == 404  # bob does not even see the candidate
    assert outsider.status_code == 404
    assert requester.status_code == 403  # dave asked for it: someone else reviews it
    assert requester.json()["error"]["code"] == "permission_denied"


def test_an_edit_at_a_later_stage_sends_the_candidate_back_to_the_first(
    alice, rita, dave, make_member, client_for
):
    make_member(roles=("it_admin",), display_name="Ivan", email="ivan@acme.test")
    stages = [
        {"name": "Department review", "permission": "skill.review"},
        {"name": "IT security", "roles": ["owner"]},
    ]
    assert (
        client_for(alice)
        .put("/api/v1/skills/stages/", {"stages": stages}, format="json")
        .status_code
        == 200
    )
    candidate = services.candidate_create(
        actor=member_actor(dave),
        source="upload",
        files={"SKILL.md": skill_md("visit-prep", "Prepare a customer visit.", ["Agenda"])},
        requested_by=dave,
    )
    assert _decide(client_for(rita), candidate).status_code == 200
    candidate.refresh_from_db()
    assert candidate.stage_index == 1
    edited = _edit(client_for(alice), candidate, body=EDITED_BODY)
    assert edited.status_code == 200, edited.content
    assert edited.json()["stage_index"] == 0 and edited.json()["revision"] == 2
    assert edited.json()["current_stage"]["name"] == "Department review"


def test_the_review_page_edits_the_draft_then_decides_with_an_internal_comment(
    rita, dave, candidate, browser
):
    client = browser(rita)
    url = reverse("console:skill_review", args=[candidate.pk])
    page = client.get(url).content.decode()
    assert 'id="edit-candidate"' in page and "Changelog (public)" in page
    saved = client.post(
        url,
        {
            "action": "edit",
            "edit-name": "visit-prep",
            "edit-description": candidate.description,
            "edit-body": EDITED_BODY,
            "edit-changelog": "Checks attendees' names.",
            "edit-note": "clearer steps",
            "edit-revision": "1",
        },
    )
    assert saved.status_code == 302, saved.content.decode()[:2000]
    candidate.refresh_from_db()
    assert candidate.revision == 2 and candidate.changelog == "Checks attendees' names."
    done = client.post(
        url,
        {
            "action": "decide",
            "decision": "approve",
            "comment": COMMENT,
            "changelog": "Checks attendees' names.",
            "revision": "2",
        },
    )
    assert done.status_code == 302
    version = SkillVersion.objects.get(package__name="visit-prep")
    assert version.changelog == "Checks attendees' names."
    assert "Confirm the attendees' names." in version.body
    # The requester sees the form-less page; the edit form is the reviewer's only.
    assert 'id="edit-candidate"' not in browser(dave).get(url).content.decode()


def test_the_hub_version_page_shows_the_review_comment_only_to_reviewers_and_the_author(
    rita, dave, bob, candidate, browser
):
    services.candidate_decide(
        actor=member_actor(rita), candidate=candidate, decision="approve", comment=COMMENT
    )
    version = SkillVersion.objects.get(package__name="visit-prep")
    url = reverse(
        "console:hub_version",
        args=[version.package.namespace.handle, "visit-prep", version.version],
    )
    assert COMMENT in browser(rita).get(url).content.decode()
    assert COMMENT in browser(dave).get(url).content.decode()
    employee = browser(bob).get(url)
    assert employee.status_code == 200
    assert COMMENT not in employee.content.decode()
    assert "approved by Rita" in employee.content.decode()
