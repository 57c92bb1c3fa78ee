"""Skill lifecycle write paths: proposals, candidates, review stages, decisions, publication.

Every change is audited in its transaction. Final approval publishes through the Hub's own
`package_publish` (validate → scan → version → sign), in the same transaction as the decision:
if the Hub refuses (a blocked scan, a taken version), the decision is not recorded either.
"""

from __future__ import annotations

import base64
import difflib
from collections.abc import Callable
from dataclasses import replace

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext, ngettext

from cadre.errors import Conflict, InvalidInput, NotFound, NotPermitted
from cadre.governance import audit
from cadre.governance.budgets import account_for_member
from cadre.llm.metering import Account, charged_to, current_account
from cadre.ports import Listeners
from cadre.queues import enqueue
from cadre.skills import distill, drafting, scoring, selectors
from cadre.skills.models import (
    CandidateRevision,
    DistillationRecord,
    ReviewDecision,
    ReviewStage,
    SkillCandidate,
    SkillEvidence,
    SkillProposal,
)
from cadre.tenancy.actors import Actor, system_actor
from cadre.tenancy.roles import PERMISSIONS, ROLES
from hub import services as hub_services
from hub.approval import Approval
from hub.bundles import bundle_from_files, read_bundle
from hub.models import DistTag, SkillPackage, SkillVersion, UsedVersion
from hub.validation import MAX_NAME, NAME_PATTERN, parse_skill_md
from hub.versions import parse_version

MAX_STAGES = 6
MAX_COMMENT = 4000
MAX_CHANGELOG = 2000
DECISIONS = ("approve", "reject", "request_changes")
EVIDENCE_KINDS_COUNTED = ("conversation", "trajectories", "upload")
# The purposes skills' model calls are metered under (docs/budgets.md).
SCORING_PURPOSE = "skills.scoring"
DISTILL_PURPOSE = "skills.distill"


def encode_files(files: dict[str, bytes]) -> dict[str, str]:
    return {path: base64.b64encode(content).decode("ascii") for path, content in files.items()}


def _snapshot(candidate: SkillCandidate) -> dict:
    return {
        "status": candidate.status,
        "stage_index": candidate.stage_index,
        "revision": candidate.revision,
        "fingerprint": candidate.fingerprint,
        "scan_verdict": candidate.scan_verdict,
        "score": candidate.score,
    }


# --- review stages ---------------------------------------------------------------------------


def _clean_stage(raw, index: int) -> dict:
    if not isinstance(raw, dict):
        raise InvalidInput(
            gettext("Each stage is an object."), details={"stages": [f"Stage {index + 1}."]}
        )
    name = str(raw.get("name") or "").strip()[:100]
    roles = raw.get("roles") or []
    permission = str(raw.get("permission") or "").strip()
    problems = []
    if not name:
        problems.append(gettext("Stage %(number)s needs a name.") % {"number": index + 1})
    if not isinstance(roles, list) or any(role not in ROLES for role in roles):
        problems.append(
            gettext("Stage %(number)s: roles must be among %(roles)s.")
            % {"number": index + 1, "roles": ", ".join(ROLES)}
        )
    if permission and permission not in PERMISSIONS:
        problems.append(
            gettext("Stage %(number)s: unknown permission '%(permission)s'.")
            % {"number": index + 1, "permission": permission}
        )
    if not roles and not permission:
        problems.append(
            gettext("Stage %(number)s names no role and no permission: nobody could decide.")
            % {"number": index + 1}
        )
    if problems:
        raise InvalidInput(problems[0], details={"stages": problems})
    return {
        "name": name,
        "roles": list(dict.fromkeys(roles)),
        "permission": permission,
        "allow_requester": bool(raw.get("allow_requester", False)),
    }


@transaction.atomic
def review_stages_set(*, actor: Actor, stages: list) -> list[dict]:
    """Replace the organization's review stages (candidates already in review keep theirs)."""
    actor.require("policy.manage")
    if not isinstance(stages, list) or not 1 <= len(stages) <= MAX_STAGES:
        raise InvalidInput(
            gettext("Give between 1 and %(max_stages)s stages.") % {"max_stages": MAX_STAGES},
            details={"stages": ["1 to 6 stages."]},
        )
    cleaned = [_clean_stage(stage, index) for index, stage in enumerate(stages)]
    organization = actor.organization
    before = selectors.stages_for(organization)
    ReviewStage.objects.filter(organization=organization).delete()
    ReviewStage.objects.bulk_create(
        [
            ReviewStage(organization=organization, position=index, **stage)
            for index, stage in enumerate(cleaned)
        ]
    )
    audit.record(
        actor=actor,
        action="skills.stages.set",
        target=("organization", organization.pk, organization.name),
        before={"stages": before},
        after={"stages": cleaned},
    )
    return cleaned


# --- candidates ------------------------------------------------------------------------------


def _checked(files: dict[str, bytes], name: str | None = None):
    """(bundle, validation report, scan) through the Hub's bundle reader and checks."""
    bundle = bundle_from_files(files, folder_name=name)
    report, scan = hub_services.check_bundle(bundle, name=name)
    if not report.ok:
        raise InvalidInput(
            gettext("The skill is not valid: %(value)s") % {"value": report.errors[0]},
            code="invalid_skill",
            details={"problems": [p.as_dict() for p in report.problems]},
        )
    return bundle, report, scan


def _target_package(organization, name: str):
    """The organization's Hub package of that name (in its own namespace), and its latest."""
    package = (
        SkillPackage.objects.filter(
            organization=organization, namespace__handle=organization.slug, name=name
        )
        .select_related("namespace")
        .first()
    )
    if package is None:
        return None, None
    tag = DistTag.objects.filter(package=package, tag="latest").select_related("version").first()
    return package, (tag.version if tag else None)


def _apply_checks(candidate: SkillCandidate, files: dict[str, bytes]) -> None:
    bundle, report, scan = _checked(files, candidate.name or None)
    candidate.files = encode_files({f.path: f.content for f in bundle.files})
    candidate.fingerprint = bundle.fingerprint
    candidate.validation = report.as_dict()
    candidate.scan_verdict = scan.verdict
    candidate.scan_findings = [f.as_dict() for f in scan.findings]
    description = report.frontmatter.get("description", "")
    candidate.description = description if isinstance(description, str) else ""


def _scoring_account(candidate: SkillCandidate) -> Account:
    """What scoring's model rubric is charged to: the current account (a run's hook) under
    `skills.scoring`, else the member who asked for the skill, else the organization."""
    current = current_account()
    if current is not None:
        return replace(current, purpose=SCORING_PURPOSE)
    if candidate.requested_by_id is not None:
        return account_for_member(candidate.requested_by, purpose=SCORING_PURPOSE)
    return Account(organization_id=candidate.organization_id, purpose=SCORING_PURPOSE)


def _rescore(candidate: SkillCandidate, *, provider=None) -> None:
    """Score the candidate now; a skills model's rubric is asked once the transaction that
    stores the candidate commits (a model call never holds a transaction open)."""
    cases = sum(e.weight for e in candidate.evidence.all() if e.kind in EVIDENCE_KINDS_COUNTED)
    if provider is None:
        provider = drafting.model_for_organization(candidate.organization)
    candidate.score, candidate.score_components = scoring.score_candidate(
        candidate, evidence_cases=cases, provider=None
    )
    candidate.save(update_fields=["score", "score_components"])
    if provider is None:
        return
    for component in candidate.score_components:
        if component["key"] == "model_rubric":
            component["detail"] = "asked of the skills model once the candidate is saved"
    candidate.save(update_fields=["score_components"])
    account = _scoring_account(candidate)
    candidate_id, revision = candidate.pk, candidate.revision
    transaction.on_commit(lambda: _model_rubric(candidate_id, revision, provider, account))


def _model_rubric(candidate_id: int, revision: int, provider, account: Account) -> None:
    """The skills model's rubric for a candidate's revision, after its transaction."""
    candidate = SkillCandidate.objects.filter(pk=candidate_id, revision=revision).first()
    if candidate is None:
        return
    with charged_to(account):
        rubric = scoring.model_rubric_component(provider, scoring.candidate_skill_md(candidate))
    with transaction.atomic():
        candidate = (
            SkillCandidate.objects.select_for_update()
            .filter(pk=candidate_id, revision=revision)
            .first()
        )
        if candidate is None:
            return  # resubmitted meanwhile: its own rubric is on its way
        components = [
            rubric if component["key"] == "model_rubric" else component
            for component in candidate.score_components
        ]
        candidate.score, candidate.score_components = scoring.total(components), components
        candidate.save(update_fields=["score", "score_components"])


def candidate_create(
    *,
    actor: Actor,
    source: str,
    files: dict[str, bytes],
    requested_by=None,
    evidence: list[dict] = (),
    note: str = "",
    package=None,
    base_version=None,
    changelog: str = "",
) -> SkillCandidate:
    """A candidate from checked files, with its evidence, first revision and score.
    `changelog` is the author's public changelog for the version it becomes."""
    _bundle, report, _scan = _checked(files)
    name = report.frontmatter.get("name")
    if package is None:
        package, base_version = _target_package(actor.organization, name)
    with transaction.atomic():
        candidate = SkillCandidate(
            organization=actor.organization,
            source=source,
            name=name,
            requested_by=requested_by,
            department=getattr(requested_by, "department", None),
            package=package,
            base_version=base_version,
            stages=selectors.stages_for(actor.organization),
            changelog=(changelog or "").strip()[:MAX_CHANGELOG],
        )
        _apply_checks(candidate, files)
        candidate.save()
        CandidateRevision.objects.create(
            candidate=candidate,
            number=1,
            files=candidate.files,
            fingerprint=candidate.fingerprint,
            note=note[:MAX_COMMENT],
            created_by=requested_by,
        )
        SkillEvidence.objects.bulk_create(
            [SkillEvidence(candidate=candidate, **item) for item in evidence]
        )
        _rescore(candidate)
        audit.record(
            actor=actor,
            action="skills.candidate.create",
            target=candidate,
            after={
                **_snapshot(candidate),
                "name": candidate.name,
                "source": source,
                "package": package.full_name if package else None,
                "evidence": len(evidence),
            },
        )
    return candidate


def candidate_upload(
    *, actor: Actor, data: bytes, note: str = "", changelog: str = ""
) -> SkillCandidate:
    """An author's bundle (zip or tar.gz, read by the Hub's bundle reader) as a candidate, with
    the author's public `changelog` (the `note` is for the reviewers)."""
    actor.require("skill.publish")
    if actor.member is None:
        raise NotPermitted(gettext("Uploading a skill candidate needs a member."))
    bundle = read_bundle(data)
    files = {f.path: f.content for f in bundle.files}
    return candidate_create(
        actor=actor,
        source=SkillCandidate.Source.UPLOAD,
        files=files,
        requested_by=actor.member,
        note=note,
        changelog=changelog,
        evidence=[
            {
                "kind": SkillEvidence.Kind.UPLOAD,
                "summary": ngettext(
                    "Uploaded by %(label)s: %(count)s file.",
                    "Uploaded by %(label)s: %(count)s files.",
                    len(files),
                )
                % {"label": actor.label, "count": len(files)},
                "data": {"fingerprint": bundle.fingerprint, "files": sorted(files), "note": note},
                "weight": 1,
            }
        ],
    )


@transaction.atomic
def candidate_resubmit(
    *,
    actor: Actor,
    candidate: SkillCandidate,
    files: dict[str, bytes],
    note: str = "",
    changelog: str | None = None,
) -> SkillCandidate:
    """After "request changes": new files, checked and scored again, back to the first stage
    (and, when given, a new public `changelog`)."""
    candidate = SkillCandidate.objects.select_for_update().get(pk=candidate.pk)
    is_requester = actor.member is not None and candidate.requested_by_id == actor.member.pk
    if not (is_requester or actor.can("skill.review", candidate)):
        raise NotPermitted(
            gettext("Only the member who asked for this skill or a reviewer may resubmit.")
        )
    if candidate.status != SkillCandidate.Status.CHANGES_REQUESTED:
        raise Conflict(
            gettext(
                "The candidate is %(lower)s; only a candidate with changes requested "
                "can be resubmitted."
            )
            % {"lower": candidate.get_status_display().lower()},
            code="not_changes_requested",
        )
    before = _snapshot(candidate)
    _apply_checks(candidate, files)
    name = candidate.validation.get("frontmatter", {}).get("name")
    if name != candidate.name:
        raise InvalidInput(
            gettext("The skill is called '%(name)s'; a resubmission keeps its name.")
            % {"name": candidate.name},
            code="name_changed",
        )
    if changelog is not None:
        candidate.changelog = changelog.strip()[:MAX_CHANGELOG]
    candidate.revision += 1
    candidate.status = SkillCandidate.Status.IN_REVIEW
    candidate.stage_index = 0
    candidate.stages = selectors.stages_for(candidate.organization)
    candidate.updated_at = timezone.now()
    candidate.save()
    CandidateRevision.objects.create(
        candidate=candidate,
        number=candidate.revision,
        files=candidate.files,
        fingerprint=candidate.fingerprint,
        note=note[:MAX_COMMENT],
        created_by=actor.member,
    )
    ReviewDecision.objects.create(
        candidate=candidate,
        revision=candidate.revision,
        stage_index=0,
        stage_name=candidate.stages[0]["name"],
        decision=ReviewDecision.Decision.RESUBMIT,
        comment=note[:MAX_COMMENT],
        decided_by=actor.member,
    )
    _rescore(candidate)
    audit.record(
        actor=actor,
        action="skills.candidate.resubmit",
        target=candidate,
        before=before,
        after=_snapshot(candidate),
        reason=note,
    )
    return candidate


EDITABLE = ("name", "description", "body")


def _line_changes(before: str, after: str) -> dict[str, int]:
    """How many lines an edit added and removed (the audit's diff summary: counts, no text)."""
    added = removed = 0
    for line in difflib.ndiff(before.splitlines(), after.splitlines()):
        added += line.startswith("+ ")
        removed += line.startswith("- ")
    return {"added": added, "removed": removed}


def _check_new_name(candidate: SkillCandidate, name: str) -> None:
    if candidate.package_id is not None or candidate.base_version_id is not None:
        raise InvalidInput(
            gettext("This is a new version of '%(name)s'; a new version keeps the skill's name.")
            % {"name": candidate.name},
            code="name_changed",
            details={"name": ["A new version keeps its skill's name."]},
        )
    if not NAME_PATTERN.match(name) or len(name) > MAX_NAME:
        raise InvalidInput(
            gettext("A skill name is lowercase letters, digits and single hyphens (at most 64)."),
            code="invalid_name",
            details={"name": ["Lowercase letters, digits and hyphens, e.g. discount-limit."]},
        )
    package, _latest = _target_package(candidate.organization, name)
    other = (
        SkillCandidate.objects.filter(
            organization_id=candidate.organization_id,
            name=name,
            status__in=[SkillCandidate.Status.IN_REVIEW, SkillCandidate.Status.CHANGES_REQUESTED],
        )
        .exclude(pk=candidate.pk)
        .exists()
    )
    if package is not None or other:
        raise Conflict(
            gettext(
                "'%(name)s' is already a skill of the organization (or in review): "
                "choose another name."
            )
            % {"name": name},
            code="name_taken",
        )


@transaction.atomic
def candidate_edit(
    *,
    actor: Actor,
    candidate: SkillCandidate,
    name: str | None = None,
    description: str | None = None,
    body: str | None = None,
    changelog: str | None = None,
    note: str = "",
    revision: int | None = None,
) -> SkillCandidate:
    """A reviewer edits the candidate in review before deciding: its SKILL.md name, description
    or body (a new revision, checked, scanned and scored again like a resubmission) and its
    public changelog. Only who may decide the current stage edits; the edit is recorded as a
    decision of the stage (with the internal `note`) and audited with a diff summary (fields,
    line counts, fingerprints: no text beyond the skill's name). An edit at a later stage sends
    the candidate back to the first: the earlier approvals were of other text. What is then
    approved and published is the edited revision."""
    candidate = (
        SkillCandidate.objects.select_for_update(of=("self",))
        .select_related("organization")
        .get(pk=candidate.pk)
    )
    rule = selectors.decide_rule(actor, candidate)
    if not rule.allowed:
        if candidate.current_stage is None:
            raise Conflict(
                gettext(
                    "The candidate is %(lower)s; only a candidate in review is edited by "
                    "its reviewers."
                )
                % {"lower": candidate.get_status_display().lower()},
                code="not_in_review",
            )
        raise NotPermitted(
            gettext("Editing a candidate in review is its reviewer's: %(reason)s")
            % {"reason": rule.reason}
        )
    if revision is not None and revision != candidate.revision:
        raise Conflict(
            gettext(
                "The candidate is at revision %(revision)s, not %(revision2)s: read it "
                "again before editing."
            )
            % {"revision": candidate.revision, "revision2": revision},
            code="revision_changed",
        )
    files = selectors.decode_files(candidate.files)
    old_text = files.get("SKILL.md", b"").decode("utf-8", errors="replace")
    new_name = name.strip() if name is not None and name.strip() != candidate.name else None
    if new_name is not None:
        _check_new_name(candidate, new_name)
    new_text = drafting.skill_md_edited(old_text, name=new_name, description=description, body=body)
    changelog = None if changelog is None else changelog.strip()[:MAX_CHANGELOG]
    changelog_set = changelog is not None and changelog != candidate.changelog
    if new_text == old_text and not changelog_set:
        raise InvalidInput(
            gettext(
                "Nothing to change: the name, description, body and changelog are as they were."
            ),
            code="no_change",
        )
    before = {**_snapshot(candidate), "name": candidate.name}
    old_document, _ = parse_skill_md(old_text)
    new_document, _ = parse_skill_md(new_text)
    edited = [
        field
        for field in EDITABLE
        if (old_document.body if field == "body" else old_document.frontmatter.get(field))
        != (new_document.body if field == "body" else new_document.frontmatter.get(field))
    ]
    note = (note or "").strip()[:MAX_COMMENT]
    if changelog_set:
        candidate.changelog = changelog
    if new_text != old_text:
        files["SKILL.md"] = new_text.encode("utf-8")
        candidate.name = new_name or candidate.name
        _apply_checks(candidate, files)
        candidate.revision += 1
        stage = candidate.current_stage
        candidate.stage_index = 0
        CandidateRevision.objects.create(
            candidate=candidate,
            number=candidate.revision,
            files=candidate.files,
            fingerprint=candidate.fingerprint,
            note=note or f"Edited in review by {actor.label}.",
            created_by=actor.member,
        )
        ReviewDecision.objects.create(
            candidate=candidate,
            revision=candidate.revision,
            stage_index=before["stage_index"],
            stage_name=stage["name"],
            decision=ReviewDecision.Decision.EDIT,
            comment=note,
            decided_by=actor.member,
        )
    candidate.updated_at = timezone.now()
    candidate.save()
    if new_text != old_text:
        _rescore(candidate)
    audit.record(
        actor=actor,
        action="skills.candidate.edit",
        target=candidate,
        before=before,
        after={
            **_snapshot(candidate),
            "name": candidate.name,
            "fields": edited,
            "diff": {"SKILL.md": _line_changes(old_text, new_text)},
            "changelog_set": changelog_set,
        },
    )
    return candidate


# --- review decisions and publication ----------------------------------------------------------


def _next_version(package) -> str:
    """1.0.0 for a new skill; otherwise the next minor after every number the package used."""
    if package is None:
        return "1.0.0"
    used = [
        parse_version(text)
        for text in UsedVersion.objects.filter(package=package).values_list("version", flat=True)
    ]
    if not used:
        return "1.0.0"
    top = max(used, key=lambda v: (v.major, v.minor, v.patch))
    return f"{top.major}.{top.minor + 1}.0"


def _publish(actor: Actor, candidate: SkillCandidate, approval: Approval):
    """Publish the candidate through the Hub with the final stage's `approval`: the Hub's own
    review is this workflow, so the publication needs no second review there. The version's
    changelog is the candidate's (public, set by its author or a reviewer); a reviewer's
    comment stays on the decision."""
    if candidate.scan_verdict == "block":
        raise InvalidInput(
            gettext("The security scan blocked this skill; a blocked skill never publishes."),
            code="scan_blocked",
            details={"findings": candidate.scan_findings},
        )
    if actor.member is None:
        raise NotPermitted(gettext("Publishing needs a member."))
    # The same person and permissions; the audit trail says they publish as final approver.
    publisher = replace(actor, label=f"{actor.label} (final skill approval)")
    package = candidate.package
    if package is not None and package.organization_id != candidate.organization_id:
        raise Conflict(gettext("The target skill belongs to another organization."))
    bundle = bundle_from_files(selectors.decode_files(candidate.files), folder_name=candidate.name)
    note = review_note(candidate)
    outcome = hub_services.package_publish(
        actor=publisher,
        bundle=bundle,
        version=_next_version(package),
        name=candidate.name,
        changelog=candidate.changelog
        or f"From skill candidate {candidate.pk} ({candidate.get_source_display().lower()})",
        display_name=candidate.name.replace("-", " ").capitalize(),
        review_note=note,
        approval=approval,
    )
    version = outcome.version
    if version.status == SkillVersion.Status.PENDING_REVIEW:  # a `warn` verdict waits in the Hub
        version = hub_services.version_review(
            actor=publisher, version=version, approve=True, note=note, approval=approval
        )
    return version


def review_note(candidate: SkillCandidate) -> str:
    """The Hub version's review note: each stage's approval of the current revision, by whom
    (the one being recorded included), a sole reviewer's justification quoted."""
    parts = []
    for decision in candidate.decisions.filter(
        revision=candidate.revision, decision=ReviewDecision.Decision.APPROVE
    ).select_related("decided_by"):
        who = decision.decided_by.display_name if decision.decided_by else "someone"
        if decision.sole_reviewer:
            parts.append(
                f"{decision.stage_name}: decided by the requester {who} as sole reviewer "
                f"(“{decision.justification}”)"
            )
        else:
            parts.append(f"{decision.stage_name}: approved by {who}")
    return (f"Skill candidate {candidate.pk} review: " + "; ".join(parts))[:4000]


@transaction.atomic
def candidate_decide(
    *,
    actor: Actor,
    candidate: SkillCandidate,
    decision: str,
    comment: str = "",
    sole_reviewer_justification: str = "",
    changelog: str | None = None,
    revision: int | None = None,
) -> SkillCandidate:
    """Approve (next stage, or publish at the last), reject, or request changes.

    The `comment` is internal: the requester and the reviewers read it, the Hub does not. The
    public changelog is the candidate's own, which `changelog` sets when given. `revision`,
    when given, is the revision the reviewer read: deciding another one (edited or resubmitted
    meanwhile) is refused, so what is approved is what was read.

    The requester decides their own candidate only where the stage allows it, or as sole
    reviewer when no other member could decide the stage: then `sole_reviewer_justification`
    is required, and recorded on the decision, in the audit event and on the Hub version.
    """
    if decision not in DECISIONS:
        raise InvalidInput(
            gettext("Unknown decision '%(decision)s'.") % {"decision": decision},
            details={"decision": [", ".join(DECISIONS)]},
        )
    comment = (comment or "").strip()[:MAX_COMMENT]
    if decision != "approve" and not comment:
        raise InvalidInput(
            gettext("Say why: rejecting or requesting changes needs a comment."),
            details={"comment": ["Required for this decision."]},
        )
    candidate = (
        SkillCandidate.objects.select_for_update(of=("self",))
        .select_related("package", "organization")
        .get(pk=candidate.pk)
    )
    rule = selectors.decide_rule(actor, candidate)
    if not rule.allowed:
        if candidate.current_stage is None:
            raise Conflict(rule.reason, code="not_in_review")
        raise NotPermitted(rule.reason)
    justification = ""
    if rule.sole_reviewer:
        justification = (sole_reviewer_justification or "").strip()[:MAX_COMMENT]
        if not justification:
            raise InvalidInput(
                gettext(
                    "You asked for this skill and decide it as sole reviewer: say why no "
                    "one else reviews it."
                ),
                code="justification_required",
                details={"sole_reviewer_justification": ["Required to decide as sole reviewer."]},
            )
    if revision is not None and revision != candidate.revision:
        raise Conflict(
            gettext(
                "The candidate is at revision %(revision)s, not %(revision2)s: read it "
                "again before deciding."
            )
            % {"revision": candidate.revision, "revision2": revision},
            code="revision_changed",
        )
    before = _snapshot(candidate)
    stage = candidate.current_stage
    changelog_set = changelog is not None and changelog.strip() != candidate.changelog
    if changelog_set:
        candidate.changelog = changelog.strip()[:MAX_CHANGELOG]
    ReviewDecision.objects.create(
        candidate=candidate,
        revision=candidate.revision,
        stage_index=candidate.stage_index,
        stage_name=stage["name"],
        decision=decision,
        comment=comment,
        decided_by=actor.member,
        sole_reviewer=rule.sole_reviewer,
        justification=justification,
    )
    published = None
    if decision == "reject":
        candidate.status = SkillCandidate.Status.REJECTED
    elif decision == "request_changes":
        candidate.status = SkillCandidate.Status.CHANGES_REQUESTED
    elif candidate.stage_index + 1 < len(candidate.stages):
        candidate.stage_index += 1
    else:
        published = _publish(actor, candidate, rule)
        candidate.status = SkillCandidate.Status.PUBLISHED
        candidate.published_version = published
        candidate.package = published.package
        candidate.stage_index = len(candidate.stages)
    candidate.updated_at = timezone.now()
    candidate.save(
        update_fields=[
            "status",
            "stage_index",
            "published_version",
            "package",
            "changelog",
            "updated_at",
        ]
    )
    after = {**_snapshot(candidate), "stage": stage["name"], "changelog_set": changelog_set}
    if rule.sole_reviewer:
        after.update({"sole_reviewer": True, "justification": justification, "comment": comment})
    audit.record(
        actor=actor,
        action=f"skills.candidate.{decision}",
        target=candidate,
        before=before,
        after=after,
        reason=justification or comment,
    )
    if published is not None:
        audit.record(
            actor=actor,
            action="skills.candidate.publish",
            target=candidate,
            after={"package": published.package.full_name, "version": published.version},
        )
    return candidate


# --- proposals (backflow) ---------------------------------------------------------------------

# Ports for the layers above (the IM connectors) that bring a proposal to the employee: told of
# a new pending proposal after it commits (by the `skills.proposal_notify` task; a listener
# returns how many cards it sent), and of each decision inside its transaction with how it was
# taken (`via`: "console", "api", "agent_reply", "im:<platform>").
proposal_created: Listeners[Callable[[SkillProposal], int]] = Listeners("skill proposal created")
proposal_decided: Listeners[Callable[[SkillProposal, str], None]] = Listeners(
    "skill proposal decided"
)


@transaction.atomic
def proposal_create(
    *,
    actor: Actor,
    run,
    draft: drafting.Draft,
    correction: str,
    messages: list[dict],
    package=None,
    base_version=None,
) -> SkillProposal:
    """The drafted change the employee is asked to confirm (one per run)."""
    existing = SkillProposal.objects.filter(run=run).first()
    if existing is not None:
        return existing
    proposal = SkillProposal.objects.create(
        organization_id=run.organization_id,
        member_id=run.member_id,
        run=run,
        session_id=run.session_id,
        kind=draft.kind,
        package=package,
        base_version=base_version,
        name=draft.name,
        summary=draft.summary[:2000],
        correction=correction[:4000],
        files=draft.files,
        messages=messages,
        drafted_by=draft.drafted_by,
    )
    audit.record(
        actor=actor,
        action="skills.proposal.create",
        target=proposal,
        organization=run.organization,
        after={"name": proposal.name, "kind": proposal.kind, "run": run.pk, "by": draft.drafted_by},
    )
    transaction.on_commit(lambda: enqueue("skills.proposal_notify", proposal.pk))
    return proposal


def proposal_send_cards(*, proposal_id: int) -> int:
    """Tell every `proposal_created` listener of a proposal still pending (the task
    `proposal_notify` calls this after commit); returns the cards they sent."""
    proposal = (
        SkillProposal.objects.select_related("member", "session", "organization")
        .filter(pk=proposal_id, status=SkillProposal.Status.PENDING)
        .first()
    )
    if proposal is None:
        return 0
    return sum(sent or 0 for sent in proposal_created.notify(proposal))


def _proposal_files(proposal: SkillProposal) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    if proposal.base_version is not None:  # a new version keeps the skill's other files
        files = {
            f.path: bytes(f.blob.content)
            for f in proposal.base_version.files.select_related("blob")
        }
    files.update({path: text.encode("utf-8") for path, text in proposal.files.items()})
    return files


@transaction.atomic
def proposal_confirm(*, actor: Actor, proposal: SkillProposal, via: str = "api") -> SkillCandidate:
    """The employee confirms: the draft becomes a candidate with the conversation as evidence."""
    proposal = SkillProposal.objects.select_for_update().get(pk=proposal.pk)
    if actor.member is None or actor.member.pk != proposal.member_id:
        raise NotFound(gettext("No such skill proposal."), code="proposal_not_found")
    if proposal.status != SkillProposal.Status.PENDING:
        raise Conflict(
            gettext("The proposal is already %(status)s.")
            % {"status": proposal.get_status_display().lower()},
            code="proposal_decided",
        )
    candidate = candidate_create(
        actor=actor,
        source=SkillCandidate.Source.BACKFLOW,
        files=_proposal_files(proposal),
        requested_by=proposal.member,
        package=proposal.package,
        base_version=proposal.base_version,
        note=proposal.summary,
        evidence=[
            {
                "kind": SkillEvidence.Kind.CONVERSATION,
                "summary": gettext("Correction in conversation: “%(correction)s”")
                % {"correction": proposal.correction[:300]},
                "data": {
                    "session_id": proposal.session_id,
                    "run_ids": sorted(
                        {m.get("run_id") for m in proposal.messages if m.get("run_id")}
                    ),
                    "messages": proposal.messages,
                    "drafted_by": proposal.drafted_by,
                    "confirmed_via": via,
                },
                "weight": 1,
            }
        ],
    )
    proposal.status = SkillProposal.Status.CONFIRMED
    proposal.candidate = candidate
    proposal.decided_at = timezone.now()
    proposal.save(update_fields=["status", "candidate", "decided_at"])
    audit.record(
        actor=actor,
        action="skills.proposal.confirm",
        target=proposal,
        before={"status": SkillProposal.Status.PENDING},
        after={"status": proposal.status, "candidate": candidate.pk, "via": via},
    )
    proposal_decided.notify(proposal, via)
    return candidate


@transaction.atomic
def proposal_dismiss(
    *, actor: Actor, proposal: SkillProposal, reason: str = "", via: str = "console"
) -> SkillProposal:
    proposal = SkillProposal.objects.select_for_update().get(pk=proposal.pk)
    if actor.member is None or actor.member.pk != proposal.member_id:
        raise NotFound(gettext("No such skill proposal."), code="proposal_not_found")
    if proposal.status != SkillProposal.Status.PENDING:
        raise Conflict(
            gettext("The proposal is already %(status)s.")
            % {"status": proposal.get_status_display().lower()},
            code="proposal_decided",
        )
    proposal.status = SkillProposal.Status.DISMISSED
    proposal.decided_at = timezone.now()
    proposal.save(update_fields=["status", "decided_at"])
    audit.record(
        actor=actor,
        action="skills.proposal.dismiss",
        target=proposal,
        before={"status": SkillProposal.Status.PENDING},
        after={"status": proposal.status, "via": via},
        reason=reason[:MAX_COMMENT],
    )
    proposal_decided.notify(proposal, via)
    return proposal


# --- memory-to-skill ---------------------------------------------------------------------------


def memory_distill(*, organization) -> list:
    """Cluster the organization's task trajectories and keep the drafts that pass the
    counterfactual check as candidates; every cluster looked at is recorded, kept or dropped.
    Idempotent: a cluster (the same trajectories) is looked at once."""
    actor = system_actor(organization, label="memory-to-skill")
    trajectories = distill.load_trajectories(organization)
    if not trajectories:
        return []
    model = distill.attach_vectors(trajectories)
    provider = drafting.model_for_organization(organization)
    # No one asked for it: the counterfactual check's calls are the organization's.
    account = Account(organization_id=organization.pk, purpose=DISTILL_PURPOSE)
    records = []
    for members in distill.cluster(trajectories, model=model):
        if sum(1 for t in members if t.success) < distill.MIN_SUCCESSES:
            continue  # too small to say anything: not recorded, it may grow
        # Looked at before: skipped before any model call (the counterfactual check).
        if DistillationRecord.objects.filter(
            organization=organization, cluster_key=distill.cluster_key(members)
        ).exists():
            continue
        with charged_to(account):
            result = distill.distill_cluster(members, provider)
        records.append(_record_distillation(actor, organization, result, model.id))
    return records


@transaction.atomic
def _record_distillation(actor: Actor, organization, result, model_id: str):
    candidate = None
    pending = (
        SkillCandidate.objects.filter(
            organization=organization,
            name=result.name,
            status__in=[SkillCandidate.Status.IN_REVIEW, SkillCandidate.Status.CHANGES_REQUESTED],
        ).first()
        if result.kept
        else None
    )
    if pending is not None:  # the cluster grew since: one candidate per skill at a time
        result.kept = False
        result.reason = f"{result.reason}; not proposed again: candidate {pending.pk} is in review"
    if result.kept:
        try:
            candidate = candidate_create(
                actor=actor,
                source=SkillCandidate.Source.MEMORY,
                files={"SKILL.md": result.draft.encode("utf-8")},
                note=result.reason,
                evidence=[
                    {
                        "kind": SkillEvidence.Kind.TRAJECTORIES,
                        "summary": f"{len(result.successes)} successful and "
                        f"{len(result.failures)} failed task runs in memory",
                        "data": {
                            "memory_ids": sorted(t.memory_id for t in result.members),
                            "successes": [t.memory_id for t in result.successes],
                            "failures": [t.memory_id for t in result.failures],
                            "embedding_model": model_id,
                        },
                        "weight": len(result.successes),
                    },
                    {
                        "kind": SkillEvidence.Kind.COUNTERFACTUAL,
                        "summary": result.reason,
                        "data": {"method": result.method, **result.figures, "steps": result.steps},
                        "weight": 0,
                    },
                ],
            )
        except InvalidInput as error:
            result.kept = False
            result.reason = f"the draft is not a valid skill: {error.message}"
    record = DistillationRecord.objects.create(
        organization=organization,
        cluster_key=result.key,
        memory_ids=sorted(t.memory_id for t in result.members),
        successes=len(result.successes),
        failures=len(result.failures),
        name=result.name,
        draft=result.draft,
        steps=result.steps,
        check_method=result.method,
        figures=result.figures,
        kept=result.kept,
        reason=result.reason,
        candidate=candidate,
    )
    audit.record(
        actor=actor,
        action="skills.distillation.keep" if result.kept else "skills.distillation.drop",
        target=record,
        after={
            "name": result.name,
            "kept": result.kept,
            "candidate": getattr(candidate, "pk", None),
        },
        reason=result.reason,
    )
    return record
