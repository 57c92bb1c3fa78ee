"""Members: adding, changing, deactivating and reactivating them; owner protections."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from cadre.errors import Conflict, InvalidInput, NotPermitted
from cadre.governance import audit
from cadre.ports import Listeners
from cadre.tenancy.actors import Actor
from cadre.tenancy.models import Department, Member, Position
from cadre.tenancy.services.common import check_roles, same_org, save_unique, snapshot

# Told when a member is deactivated, inside the deactivation's transaction, as
# ``listener(actor=..., member=..., reason=...)``: a listener that raises rolls it back.
member_deactivated: Listeners = Listeners("member_deactivated")

MEMBER_FIELDS = (
    "display_name",
    "email",
    "mobile",
    "employee_no",
    "title",
    "department",
    "manager",
    "roles",
    "status",
    "user_name",
    "external_id",
    "given_name",
    "family_name",
    "language",
)


def _member_snapshot(member: Member) -> dict:
    data = snapshot(member, MEMBER_FIELDS)
    data["positions"] = sorted(member.positions.values_list("pk", flat=True)) if member.pk else []
    return data


def _acts_as_owner(actor: Actor) -> bool:
    """Owners (and the system) may touch the owner role; an API key acts as its creator."""
    if actor.kind == "system":
        return True
    member = actor.member
    return member is not None and member.is_active and "owner" in member.roles


def _check_role_change(actor: Actor, old: list[str], new: list[str]) -> None:
    if sorted(old) == sorted(new):
        return
    actor.require("member.assign_roles")
    if ("owner" in old) != ("owner" in new) and not _acts_as_owner(actor):
        raise NotPermitted(_("Only an owner can grant or remove the owner role."))


def _sign_in_key(name: str, value) -> str:
    value = value if isinstance(value, str) else ""
    return value.strip().lower() if name == "email" else value


def check_owner_target(actor: Actor, member: Member, verb: str) -> None:
    """Deactivating or reactivating an owner changes who owns the organization."""
    if "owner" in member.roles and not _acts_as_owner(actor):
        messages = {
            "deactivate": _("Only an owner can deactivate an owner."),
            "reactivate": _("Only an owner can reactivate an owner."),
            "delete": _("Only an owner can delete an owner."),
        }
        raise NotPermitted(messages.get(verb) or _("Only an owner can change an owner."))


def _ensure_an_owner_remains(member: Member, leaving: bool) -> None:
    if not leaving or "owner" not in member.roles:
        return
    # Lock every active owner row: two owners removing each other at the same moment queue
    # here, and the second sees the first one gone (so the organization keeps an owner).
    owners = list(
        Member.objects.select_for_update()
        .filter(
            organization_id=member.organization_id,
            status=Member.Status.ACTIVE,
            roles__contains=["owner"],
        )
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    if not [pk for pk in owners if pk != member.pk]:
        raise Conflict(
            _("The organization must keep at least one active owner."), code="last_owner"
        )


def _apply_member_links(actor, member, department, manager, positions) -> None:
    same_org(actor, department, manager, *(positions or []))
    if department is not None and department.is_archived:
        raise InvalidInput(
            _("The department is archived."), details={"department": [_("Archived.")]}
        )
    if manager is not None and member.pk and manager.pk == member.pk:
        raise InvalidInput(
            _("A member cannot be their own manager."),
            details={"manager": [_("Choose someone else.")]},
        )


@transaction.atomic
def member_create(
    *,
    actor: Actor,
    display_name: str,
    email: str = "",
    mobile: str = "",
    employee_no: str = "",
    title: str = "",
    department: Department | None = None,
    manager: Member | None = None,
    positions: list[Position] | None = None,
    roles: list[str] | None = None,
    status: str = Member.Status.ACTIVE,
    user_name: str = "",
    external_id: str = "",
    given_name: str = "",
    family_name: str = "",
) -> Member:
    """Add a member directly (e.g. an employee who will only chat in IM); no login yet."""
    same_org(actor, department)
    if department is not None:
        actor.require("member.manage", department)
    else:
        actor.require("member.manage")
    roles = check_roles(roles or ["employee"])
    _check_role_change(actor, ["employee"], roles)
    member = Member(
        organization=actor.organization,
        display_name=display_name.strip(),
        email=email.strip().lower(),
        mobile=mobile,
        employee_no=employee_no,
        title=title,
        department=department,
        manager=manager,
        roles=roles,
        status=status,
        user_name=user_name.strip(),
        external_id=external_id,
        given_name=given_name,
        family_name=family_name,
    )
    _apply_member_links(actor, member, department, manager, positions)
    save_unique(member, _("A member with this email or user name exists."), "email")
    if positions:
        member.positions.set(positions)
    audit.record(actor=actor, action="member.create", target=member, after=_member_snapshot(member))
    return member


# What single sign-on finds a member by (with their IM accounts): oidc._match.
SIGN_IN_KEYS = ("email", "employee_no")


def hold_sso_link(actor: Actor, member: Member) -> list[str]:
    """Someone changes what single sign-on finds `member` by: an owner's only by an owner, and
    unless it is the member themselves, no provider account not yet linked to the member may
    take them over until they sign in through one that is, or an owner allows it. The fields
    to save."""
    check_owner_target(actor, member, "change")
    if actor.member is not None and actor.member.pk == member.pk:
        return []
    member.sso_link_held = True
    return ["sso_link_held"]


def may_allow_sso_link(actor: Actor, member: Member) -> bool:
    """Whether `actor` may lift `member`'s hold (member_sso_link_allow): an owner managing them."""
    return actor.can("member.manage", member) and _acts_as_owner(actor)


@transaction.atomic
def member_sso_link_allow(*, actor: Actor, member: Member) -> Member:
    """An owner lets single sign-on link this member again (after checking that the e-mail,
    employee number and IM accounts someone else set are really the member's); audited."""
    actor.require("member.manage", member)
    if member.sso_link_held:
        if not _acts_as_owner(actor):
            raise NotPermitted(_("Only an owner can allow single sign-on to link this account."))
        member.sso_link_held = False
        member.save(update_fields=["sso_link_held"])
        audit.record(
            actor=actor,
            action="member.sso_link_allow",
            target=member,
            before={"sso_link_held": True},
            after={"sso_link_held": False},
        )
    return member


@transaction.atomic
def member_update(
    *, actor: Actor, member: Member, positions: list[Position] | None = None, **fields
) -> Member:
    actor.require("member.manage", member)
    before = _member_snapshot(member)
    held = []
    if any(
        name in fields and _sign_in_key(name, fields[name]) != getattr(member, name)
        for name in SIGN_IN_KEYS
    ):
        held = hold_sso_link(actor, member)
    if "roles" in fields:
        fields["roles"] = check_roles(fields["roles"])
        _check_role_change(actor, member.roles, fields["roles"])
        _ensure_an_owner_remains(member, "owner" not in fields["roles"])
    if "department" in fields:
        # Moving a member: the actor must manage the destination (org-wide for "none").
        same_org(actor, fields["department"])
        if fields["department"] is not None:
            actor.require("member.manage", fields["department"])
        else:
            actor.require("member.manage")
    if "status" in fields:
        raise InvalidInput(_("Use deactivate or reactivate to change a member's status."))
    _apply_member_links(actor, member, fields.get("department"), fields.get("manager"), positions)
    for name, value in fields.items():
        if name not in MEMBER_FIELDS:
            raise InvalidInput(_("Field %(name)r cannot be changed.") % {"name": name})
        if name == "email":
            value = value.strip().lower()
        setattr(member, name, value)
    if fields:
        save_unique(
            member,
            _("A member with this email or user name exists."),
            "email",
            update_fields=[*fields, *held],
        )
    if positions is not None:
        member.positions.set(positions)
    audit.record(
        actor=actor,
        action="member.update",
        target=member,
        before=before,
        after=_member_snapshot(member),
    )
    return member


@transaction.atomic
def member_deactivate(*, actor: Actor, member: Member, reason: str = "") -> Member:
    """Stop a member: sign-ins, API keys and agents stop at once; history stays."""
    actor.require("member.manage", member)
    if member.status == Member.Status.DEACTIVATED:
        raise Conflict(_("The member is already deactivated."), code="already_deactivated")
    if actor.member is not None and actor.member.pk == member.pk:
        raise Conflict(_("You cannot deactivate yourself."), code="self")
    check_owner_target(actor, member, "deactivate")
    _ensure_an_owner_remains(member, True)
    before = {"status": member.status}
    member.status = Member.Status.DEACTIVATED
    member.deactivated_at = timezone.now()
    member.save(update_fields=["status", "deactivated_at"])
    member.invitations.filter(accepted_at=None, revoked_at=None).update(revoked_at=timezone.now())
    _revoke_api_keys(actor, member)
    # Their agents stop at once (agents registers a listener that cancels their open runs).
    member_deactivated.notify(actor=actor, member=member, reason=reason or "member deactivated")
    audit.record(
        actor=actor,
        action="member.deactivate",
        target=member,
        before=before,
        after={"status": member.status},
        reason=reason,
    )
    return member


def _revoke_api_keys(actor: Actor, member: Member) -> None:
    """A deactivated member's keys are revoked, not only refused: reactivation must not
    bring back a key that leaked while they were gone."""
    now = timezone.now()
    for key in member.api_keys.filter(revoked_at=None):
        key.revoked_at = now
        key.save(update_fields=["revoked_at"])
        audit.record(
            actor=actor,
            action="apikey.revoke",
            target=key,
            before={"state": "active"},
            after={"state": "revoked"},
            reason="member deactivated",
        )


@transaction.atomic
def member_reactivate(*, actor: Actor, member: Member) -> Member:
    actor.require("member.manage", member)
    if member.status != Member.Status.DEACTIVATED:
        raise Conflict(_("The member is not deactivated."), code="not_deactivated")
    check_owner_target(actor, member, "reactivate")
    # Active again, login or not: an IM-only employee needs no login to use their agents, and
    # deactivation revoked any pending invitation, so "invited" would be a dead end (a new
    # invitation can still be sent to an active member without a login).
    member.status = Member.Status.ACTIVE
    member.deactivated_at = None
    member.save(update_fields=["status", "deactivated_at"])
    audit.record(
        actor=actor,
        action="member.reactivate",
        target=member,
        before={"status": "deactivated"},
        after={"status": member.status},
    )
    return member
