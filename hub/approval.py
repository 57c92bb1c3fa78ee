"""Who approves a skill: the one rule for deciding a review stage.

Both reviews of a skill ask `review_approval`: the skill candidates' review stages
(`cadre.skills.selectors.decide_rule`, one call per stage) and the Hub's own review of an
uploaded version (`version_approval`: may the uploader publish without review, may a
reviewer approve a pending version). The rule is here, below the skills app, so the Hub asks
it without a port; the skills app owns the stages (their configuration and order) and hands
the Hub the `Approval` of a final stage when it publishes, so the Hub does not review again.

A stage (a dict, as `ReviewStage.as_rule()` gives it) is decided by a person — a member, or
their API key or agent — of the subject's organization who holds one of its `roles` (only
when acting for themself) or its `permission` organization-wide or through a grant on a
department whose subtree holds the subject's department. The member who asked for the skill
(`requester_id`) decides it only where the stage allows it, or as sole reviewer when nobody
else could.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.utils.translation import gettext, gettext_lazy, ngettext
from guardian.models import UserObjectPermission

from cadre.tenancy.actors import member_actor
from cadre.tenancy.models import Department, Member, department_subtree_ids
from cadre.tenancy.roles import ROLES, grant_codename

REVIEW_PERMISSION = "skill.review"
# The Hub's own review of an uploaded version: one stage, decided by `skill.review` reaching
# the package; the uploader may decide it (a reviewer's upload publishes at once).
HUB_REVIEW_STAGE = {
    "name": "Hub review",
    "roles": [],
    "permission": REVIEW_PERMISSION,
    "allow_requester": True,
}


# The stage names Cadre writes (the default review, the Hub's), read in the active language;
# a stage an organization named itself keeps its name.
_STAGE_WORDS = {
    "Skill review": gettext_lazy("Skill review"),
    "Hub review": gettext_lazy("Hub review"),
}


def stage_label(name: str) -> str:
    """A review stage's name as a person reads it."""
    return str(_STAGE_WORDS.get(name, name))


@dataclass(frozen=True)
class Approval:
    """May the actor decide a review stage, and what the decision completes.

    `sole_reviewer`: they asked for the skill and nobody else could decide the stage, so they
    may decide it themself, with a justification that is recorded and shown with the version.
    `completes_review`: approving decides the last stage (or there is none to decide), so the
    version publishes without a further review.
    """

    allowed: bool
    reason: str = ""
    sole_reviewer: bool = False
    stage_index: int | None = None
    stage_name: str = ""
    completes_review: bool = False


def _holds(actor, permission: str, department_id: int | None, cache: dict) -> bool:
    """`permission` organization-wide, or through a grant on a department whose subtree holds
    `department_id` (the subtree computed once per `cache`)."""
    if actor.has(permission):
        return True
    if permission not in cache:
        roots = actor.granted_ids(permission, Department)
        cache[permission] = department_subtree_ids(actor.organization.pk, roots) if roots else set()
    return department_id in cache[permission]


def stage_deciders_match(
    actor, stage: dict, *, organization_id: int, department_id: int | None, cache=None
) -> bool:
    """Does the actor meet the stage's rule (a role, or the permission reaching the subject)?"""
    member = actor.member
    if member is None or actor.organization is None:
        return False
    if organization_id != actor.organization.pk:
        return False
    # Roles count only for a person acting for themself: an API key is capped by its scopes.
    if actor.kind == "member" and set(stage.get("roles") or []) & set(member.roles or []):
        return True
    permission = stage.get("permission")
    return bool(permission) and _holds(
        actor, permission, department_id, {} if cache is None else cache
    )


def other_deciders_count(
    stage: dict, *, organization_id: int, department_id: int | None, excluding: int | None
) -> int:
    """How many active members other than `excluding` meet the stage's rule for the subject:
    by a role (the stage's roles, or a role carrying its permission) or by a grant."""
    permission = stage.get("permission") or ""
    roles = set(stage.get("roles") or [])
    if permission:
        roles |= {name for name, role in ROLES.items() if permission in role.permissions}
    members = Member.objects.filter(
        organization_id=organization_id, status=Member.Status.ACTIVE
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
            if stage_deciders_match(
                member_actor(member),
                stage,
                organization_id=organization_id,
                department_id=department_id,
            ):
                by_grant += 1
    return len(by_role) + by_grant


def review_approval(
    actor,
    *,
    stages: list[dict],
    stage_index: int,
    organization_id: int,
    department_id: int | None,
    requester_id: int | None = None,
    cache: dict | None = None,
) -> Approval:
    """The rule for deciding stage `stage_index` of `stages` for a subject (a candidate, a
    package) of `organization_id` whose grants reach through `department_id`. No stages:
    nothing to decide, the review is complete. Pass one `cache` dict when checking many
    subjects: grants and other deciders are then resolved once."""
    if not stages:
        return Approval(
            True, gettext("No review stage: published without review."), completes_review=True
        )
    cache = {} if cache is None else cache
    stage = stages[stage_index]
    last = stage_index == len(stages) - 1
    where = {"stage_index": stage_index, "stage_name": stage["name"]}
    subject = {"organization_id": organization_id, "department_id": department_id}
    if not stage_deciders_match(actor, stage, cache=cache, **subject):
        who = ", ".join(
            [*(gettext("role %(role)s") % {"role": role} for role in stage.get("roles") or [])]
            + ([f"'{stage['permission']}'"] if stage.get("permission") else [])
        )
        return Approval(
            False,
            gettext("The stage “%(stage)s” is decided by %(who)s.")
            % {"stage": stage_label(stage["name"]), "who": who or gettext("nobody")},
            **where,
        )
    is_requester = requester_id is not None and requester_id == actor.member.pk
    if not is_requester or stage.get("allow_requester"):
        return Approval(True, completes_review=last, **where)
    key = ("others", organization_id, department_id, repr(stage))
    if key not in cache:
        cache[key] = other_deciders_count(stage, excluding=actor.member.pk, **subject)
    others = cache[key]
    if others:
        return Approval(
            False,
            ngettext(
                "You asked for this skill: someone else decides “%(stage)s” "
                "(%(count)d other member may).",
                "You asked for this skill: someone else decides “%(stage)s” "
                "(%(count)d other members may).",
                others,
            )
            % {"stage": stage_label(stage["name"]), "count": others},
            **where,
        )
    return Approval(
        True,
        gettext(
            "You asked for this skill and no other member can decide “%(stage)s”: you may "
            "decide it as sole reviewer, with a justification (audited, and shown on the Hub "
            "version page)."
        )
        % {"stage": stage_label(stage["name"])},
        sole_reviewer=True,
        completes_review=last,
        **where,
    )


def hub_review_stages(organization, *, uploading: bool) -> list[dict]:
    """The Hub's own review of a version: none for an upload in an organization that publishes
    without review (its settings' `hub.publish_without_review`), else `HUB_REVIEW_STAGE`."""
    policy = (getattr(organization, "settings", None) or {}).get("hub", {})
    if uploading and policy.get("publish_without_review"):
        return []
    return [HUB_REVIEW_STAGE]


def version_approval(actor, package, *, uploading: bool = False) -> Approval:
    """The Hub's review of a version of `package` by the actor: at upload (`uploading`), may it
    publish without review; otherwise, may the actor approve or reject it."""
    return review_approval(
        actor,
        stages=hub_review_stages(actor.organization, uploading=uploading),
        stage_index=0,
        organization_id=package.organization_id,
        department_id=package.department_id,
    )
