"""Skill lifecycle reads: candidates the actor may see, proposals, stages, decider checks, diffs.

A candidate carries conversation evidence, so it is not shown to everyone who may browse
skills: reviewers (organization-wide, or by a `skill.review` grant on the candidate's
department) and the member who asked for it see it; others get 404.
"""

from __future__ import annotations

import base64
import difflib

from django.db.models import Q, QuerySet
from django.utils.translation import gettext as _

from cadre.errors import NotFound
from cadre.skills.models import ReviewStage, SkillCandidate, SkillProposal
from hub.approval import REVIEW_PERMISSION, Approval, review_approval
from hub.models import DistTag, SkillVersion
from hub.services import NO_REVIEW_NOTE
from hub.validation import parse_skill_md

DEFAULT_STAGES = [
    {"name": "Skill review", "roles": [], "permission": REVIEW_PERMISSION, "allow_requester": False}
]
MAX_DIFF_LINES = 2000


def stages_for(organization) -> list[dict]:
    """The organization's review stages in order (one `skill.review` stage by default)."""
    configured = [
        stage.as_rule() for stage in ReviewStage.objects.filter(organization=organization)
    ]
    return configured or [dict(stage) for stage in DEFAULT_STAGES]


def candidates_visible(actor) -> QuerySet[SkillCandidate]:
    if actor is None or actor.organization is None:
        return SkillCandidate.objects.none()
    reviewable = SkillCandidate.objects.restrict(actor, "review")
    condition = Q(pk__in=reviewable.values("pk"))
    if actor.member is not None:
        condition |= Q(organization=actor.organization, requested_by=actor.member)
    return SkillCandidate.objects.filter(condition).select_related(
        "requested_by", "department", "package__namespace", "published_version"
    )


def candidate_get(actor, pk) -> SkillCandidate:
    try:
        candidate = candidates_visible(actor).filter(pk=int(pk)).first()
    except (TypeError, ValueError):
        candidate = None
    if candidate is None:
        raise NotFound(_("No such skill candidate."), code="candidate_not_found")
    return candidate


def proposals_for(actor) -> QuerySet[SkillProposal]:
    """The actor's own proposals (a proposal is the employee's to confirm, nobody else's)."""
    if actor is None or actor.organization is None or actor.member is None:
        return SkillProposal.objects.none()
    return SkillProposal.objects.filter(
        organization=actor.organization, member=actor.member
    ).select_related("package__namespace", "candidate")


def proposal_get(actor, pk) -> SkillProposal:
    try:
        proposal = proposals_for(actor).filter(pk=int(pk)).first()
    except (TypeError, ValueError):
        proposal = None
    if proposal is None:
        raise NotFound(_("No such skill proposal."), code="proposal_not_found")
    return proposal


def decide_rule(actor, candidate: SkillCandidate, cache: dict | None = None) -> Approval:
    """The rule for deciding the candidate's current stage (`hub.approval.review_approval`,
    the one rule the Hub's own review asks too). Pass one `cache` dict when checking many
    candidates: grants and other deciders are then resolved once."""
    if candidate.current_stage is None:
        return Approval(
            False,
            _("The candidate is %(status)s, not in review.")
            % {"status": candidate.get_status_display().lower()},
        )
    return review_approval(
        actor,
        stages=candidate.stages,
        stage_index=candidate.stage_index,
        organization_id=candidate.organization_id,
        department_id=candidate.department_id,
        requester_id=candidate.requested_by_id,
        cache=cache,
    )


def may_decide(actor, candidate: SkillCandidate, cache: dict | None = None) -> tuple[bool, str]:
    """(allowed, why) for deciding the candidate's current stage (see `decide_rule`)."""
    rule = decide_rule(actor, candidate, cache)
    return rule.allowed, rule.reason


def decidable(actor, candidates: QuerySet[SkillCandidate]) -> QuerySet[SkillCandidate]:
    """The candidates (of a visible queryset) waiting at a stage the actor may decide."""
    cache: dict = {}
    waiting = (
        candidates.filter(status=SkillCandidate.Status.IN_REVIEW)
        .select_related(None)
        .only(
            "pk",
            "organization_id",
            "department_id",
            "requested_by_id",
            "status",
            "stages",
            "stage_index",
        )
    )
    ids = [c.pk for c in waiting if may_decide(actor, c, cache)[0]]
    return candidates.filter(pk__in=ids)


def decode_files(files: dict) -> dict[str, bytes]:
    return {path: base64.b64decode(content) for path, content in (files or {}).items()}


def candidate_skill_text(candidate: SkillCandidate) -> dict | None:
    """The candidate's SKILL.md as a reviewer edits it: name, description and body (None when
    it has no parseable SKILL.md)."""
    content = decode_files(candidate.files).get("SKILL.md")
    document, _problems = (
        parse_skill_md(content.decode("utf-8", errors="replace")) if content else (None, [])
    )
    if document is None:
        return None
    return {
        "name": str(document.frontmatter.get("name", "")),
        "description": str(document.frontmatter.get("description", "")),
        "body": document.body.strip("\n"),
    }


def _text(content: bytes) -> list[str] | None:
    try:
        return content.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        return None


def files_diff(before: dict[str, bytes], after: dict[str, bytes], *, label: str) -> list[dict]:
    """Per file: added / removed / changed / unchanged, with a unified diff for text files."""
    rows = []
    for path in sorted(set(before) | set(after)):
        old, new = before.get(path), after.get(path)
        status = (
            "added"
            if old is None
            else "removed"
            if new is None
            else "unchanged"
            if old == new
            else "changed"
        )
        lines: list[str] = []
        if status != "unchanged":
            old_lines = _text(old or b"")
            new_lines = _text(new or b"")
            if old_lines is None or new_lines is None:
                lines = ["(binary file)"]
            else:
                lines = list(
                    difflib.unified_diff(
                        old_lines,
                        new_lines,
                        fromfile=f"{label}/{path}" if old is not None else "/dev/null",
                        tofile=f"candidate/{path}" if new is not None else "/dev/null",
                        lineterm="",
                    )
                )[:MAX_DIFF_LINES]
        rows.append({"path": path, "status": status, "lines": lines})
    return rows


def previous_files(candidate: SkillCandidate) -> tuple[str, dict[str, bytes]]:
    """(label, files) to compare with: the Hub's latest published version of the skill (once
    published, the version it was based on), else the candidate's previous revision, else
    nothing (every file is new)."""
    version = None
    if candidate.published_version_id is not None:
        # Published: shown against what it was reviewed against (nothing for a new skill),
        # not against the version it became.
        version = candidate.base_version
    elif candidate.package_id is not None:
        tag = (
            DistTag.objects.filter(package_id=candidate.package_id, tag="latest")
            .select_related("version")
            .first()
        )
        version = tag.version if tag else candidate.base_version
    if version is not None and version.status == SkillVersion.Status.PUBLISHED:
        files = {f.path: bytes(f.blob.content) for f in version.files.select_related("blob")}
        return f"{version.package.full_name}@{version.version}", files
    previous = candidate.revisions.filter(number__lt=candidate.revision).order_by("-number").first()
    if previous is not None:
        return f"revision {previous.number}", decode_files(previous.files)
    return "nothing", {}


def candidate_diff(candidate: SkillCandidate) -> tuple[str, list[dict]]:
    label, before = previous_files(candidate)
    return label, files_diff(before, decode_files(candidate.files), label=label)


def version_review_record(version, actor=None) -> dict:
    """How a Hub version came to be published, as it happened:

    - `stages`: through a skill candidate's review stages; `steps` lists each approval (stage,
      who, when), a sole-reviewer decision with its justification (public), and the reviewer's
      comment only for an `actor` who sees the candidate (its reviewers and requester: a review
      comment is internal, the version's changelog is its public text);
    - `hub`: approved in the Hub's own review by `by`;
    - `unreviewed`: published without review (the publisher holds `skill.review`, or the
      organization publishes without review);
    - `pending` / `rejected`: not published.
    """
    candidate = (
        SkillCandidate.objects.filter(published_version=version)
        .select_related("requested_by")
        .first()
    )
    if candidate is not None:
        decisions = candidate.decisions.filter(
            revision=candidate.revision, decision="approve"
        ).select_related("decided_by")
        internal = actor is not None and candidates_visible(actor).filter(pk=candidate.pk).exists()
        steps = [
            {
                "stage": decision.stage_name,
                "by": decision.decided_by,
                "at": decision.created_at,
                "comment": decision.comment if internal else "",
                "sole_reviewer": decision.sole_reviewer,
                "justification": decision.justification,
            }
            for decision in decisions.order_by("stage_index", "pk")
        ]
        return {
            "kind": "stages",
            "candidate": candidate,
            "steps": steps,
            "sole_reviewer": any(step["sole_reviewer"] for step in steps),
        }
    if version.status == SkillVersion.Status.PENDING_REVIEW:
        return {"kind": "pending"}
    if version.status == SkillVersion.Status.REJECTED:
        return {"kind": "rejected", "by": version.reviewed_by, "note": version.review_note}
    if version.status != SkillVersion.Status.PUBLISHED:
        return {"kind": version.status}
    if version.review_note == NO_REVIEW_NOTE:
        return {"kind": "unreviewed", "by": version.created_by, "at": version.published_at}
    return {
        "kind": "hub",
        "by": version.reviewed_by,
        "at": version.published_at,
        "note": version.review_note,
    }
