"""Skill lifecycle reads: candidates the actor may see, proposals, stages, decider checks, diffs.

A candidate carries conversation evidence, so it is not shown to everyone who may browse
skills: reviewers (organization-wide, or by a `skill.review` grant on the candidate's
department) and the member who asked for it see it; others get 404.
"""

from __future__ import annotations

import base64
import difflib
from dataclasses import dataclass

from django.db.models import Q, QuerySet

from cadre.errors import NotFound
from cadre.skills.models import ReviewStage, SkillCandidate, SkillProposal
from cadre.tenancy.models import Department, department_subtree_ids

DEFAULT_STAGES = [
    {"name": "Skill review", "roles": [], "permission": "skill.review", "allow_requester": False}
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
        raise NotFound("No such skill candidate.", code="candidate_not_found")
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
        raise NotFound("No such skill proposal.", code="proposal_not_found")
    return proposal


def _holds(actor, permission: str, candidate: SkillCandidate, cache: dict) -> bool:
    """`permission` on the candidate: organization-wide, or through a grant on a department
    whose subtree holds the candidate's department (the subtree computed once per `cache`)."""
    if actor.has(permission):
        return True
    if permission not in cache:
        roots = actor.granted_ids(permission, Department)
        cache[permission] = department_subtree_ids(actor.organization.pk, roots) if roots else set()
    return candidate.department_id in cache[permission]


def stage_deciders_match(actor, candidate: SkillCandidate, stage: dict, cache=None) -> bool:
    """Does the actor meet the stage's rule (a role, or the permission on the candidate)?"""
    member = actor.member
    if member is None or actor.organization is None:
        return False
    if candidate.organization_id != actor.organization.pk:
        return False
    # Roles count only for a person acting for themself: an API key is capped by its scopes.
    if actor.kind == "member" and set(stage.get("roles") or []) & set(member.roles or []):
        return True
    permission = stage.get("permission")
    return bool(permission) and _holds(actor, permission, candidate, {} if cache is None else cache)


@dataclass(frozen=True)
class DecideRule:
    """May the actor decide the candidate's current stage, and how.

    `sole_reviewer`: they asked for the skill and nobody else could decide the stage, so they
    may decide it themself, with a justification that is recorded and shown with the version.
    """

    allowed: bool
    reason: str = ""
    sole_reviewer: bool = False


def other_deciders_count(candidate: SkillCandidate, stage: dict, *, excluding: int | None) -> int:
    """How many active members other than `excluding` meet the stage's rule for the candidate:
    by a role (the stage's roles, or a role carrying its permission) or by a grant."""
    from guardian.models import UserObjectPermission

    from cadre.tenancy.actors import member_actor
    from cadre.tenancy.models import Member
    from cadre.tenancy.roles import ROLES, grant_codename

    permission = stage.get("permission") or ""
    roles = set(stage.get("roles") or [])
    if permission:
        roles |= {name for name, role in ROLES.items() if permission in role.permissions}
    members = Member.objects.filter(
        organization_id=candidate.organization_id, status=Member.Status.ACTIVE
    ).exclude(pk=excluding)
    by_role = set(members.filter(roles__overlap=sorted(roles)).values_list("pk", flat=True))
    by_grant = 0
    if permission:
        grantees = UserObjectPermission.objects.filter(
            permission__codename=grant_codename(permission),
            content_type__app_label=Department._meta.app_label,
            content_type__model=Department._meta.model_name,
        ).values("user_id")
        for member in (
            members.filter(user_id__in=grantees)
            .exclude(pk__in=by_role)
            .select_related("organization")
        ):
            if stage_deciders_match(member_actor(member), candidate, stage):
                by_grant += 1
    return len(by_role) + by_grant


def decide_rule(actor, candidate: SkillCandidate, cache: dict | None = None) -> DecideRule:
    """The rule for deciding the candidate's current stage. Pass one `cache` dict when
    checking many candidates: grants and other deciders are then resolved once."""
    cache = {} if cache is None else cache
    stage = candidate.current_stage
    if stage is None:
        return DecideRule(
            False, f"The candidate is {candidate.get_status_display().lower()}, not in review."
        )
    if not stage_deciders_match(actor, candidate, stage, cache):
        who = ", ".join(
            [*(f"role {role}" for role in stage.get("roles") or [])]
            + ([f"'{stage['permission']}'"] if stage.get("permission") else [])
        )
        return DecideRule(False, f"The stage “{stage['name']}” is decided by {who or 'nobody'}.")
    is_requester = actor.member is not None and candidate.requested_by_id == actor.member.pk
    if not is_requester or stage.get("allow_requester"):
        return DecideRule(True)
    key = ("others", candidate.organization_id, candidate.department_id, repr(stage))
    if key not in cache:
        cache[key] = other_deciders_count(candidate, stage, excluding=actor.member.pk)
    others = cache[key]
    if others:
        return DecideRule(
            False,
            f"You asked for this skill: someone else decides “{stage['name']}” "
            f"({others} other member{'s' if others != 1 else ''} may).",
        )
    return DecideRule(
        True,
        f"You asked for this skill and no other member can decide “{stage['name']}”: you may "
        "decide it as sole reviewer, with a justification (audited, and shown on the Hub "
        "version page).",
        sole_reviewer=True,
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
    from hub.models import DistTag, SkillVersion

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


def version_review_record(version) -> dict:
    """How a Hub version came to be published, as it happened:

    - `stages`: through a skill candidate's review stages; `steps` lists each approval (stage,
      who, when, comment), a sole-reviewer decision with its justification;
    - `hub`: approved in the Hub's own review by `by`;
    - `unreviewed`: published without review (the publisher holds `skill.review`, or the
      organization publishes without review);
    - `pending` / `rejected`: not published.
    """
    from hub.models import SkillVersion
    from hub.services import NO_REVIEW_NOTE

    candidate = (
        SkillCandidate.objects.filter(published_version=version)
        .select_related("requested_by")
        .first()
    )
    if candidate is not None:
        decisions = candidate.decisions.filter(
            revision=candidate.revision, decision="approve"
        ).select_related("decided_by")
        steps = [
            {
                "stage": decision.stage_name,
                "by": decision.decided_by,
                "at": decision.created_at,
                "comment": decision.comment,
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
