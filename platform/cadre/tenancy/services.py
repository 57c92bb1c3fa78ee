"""Write paths for tenancy. Each service checks the actor's permission and audits itself."""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.text import slugify

from cadre.errors import Conflict, InvalidInput, NotPermitted
from cadre.governance import audit
from cadre.im import platforms
from cadre.tenancy.actors import Actor, system_actor
from cadre.tenancy.models import (
    ApiKey,
    Department,
    IMIdentity,
    Invitation,
    Member,
    Organization,
    Position,
    User,
    department_subtree_ids,
)
from cadre.tenancy.roles import (
    GRANTABLE,
    ROLES,
    SCOPES,
    grant_codename,
    permissions_for_roles,
    permissions_for_scopes,
)


def _hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _snapshot(obj, fields) -> dict:
    data = {}
    for name in fields:
        value = getattr(obj, name)
        if hasattr(value, "pk"):
            value = value.pk
        data[name] = value
    return data


def _check_roles(roles) -> list[str]:
    unknown = [role for role in roles if role not in ROLES]
    if unknown:
        raise InvalidInput(
            f"Unknown role(s): {', '.join(unknown)}.",
            details={"roles": [f"Choose from: {', '.join(ROLES)}"]},
        )
    return sorted(set(roles))


def _same_org(actor: Actor, *objects) -> None:
    for obj in objects:
        if obj is not None and obj.organization_id != actor.organization.pk:
            raise InvalidInput("That object belongs to another organization.")


# --- organizations ------------------------------------------------------------------------

ORGANIZATION_FIELDS = ("name", "locale", "time_zone")


@transaction.atomic
def organization_create(
    *, name: str, slug: str = "", owner_email: str, owner_name: str = "", password: str | None
) -> tuple[Organization, Member]:
    """Create an organization with its first owner (the only service without an acting member)."""
    slug = slugify(slug or name)[:64]
    if not slug:
        raise InvalidInput("The organization needs a name.", details={"name": ["Required."]})
    if Organization.objects.filter(slug=slug).exists():
        raise Conflict(f"An organization with slug {slug!r} exists.", code="slug_taken")
    organization = Organization.objects.create(name=name, slug=slug)
    email = owner_email.strip().lower()
    user = User.objects.filter(email=email).first()
    if user is None:
        user = User.objects.create_user(email, password, display_name=owner_name)
    owner = Member.objects.create(
        organization=organization,
        user=user,
        display_name=owner_name or email.split("@")[0],
        email=email,
        roles=["owner"],
    )
    actor = system_actor(organization, label="setup")
    audit.record(
        actor=actor,
        action="organization.create",
        target=organization,
        after=_snapshot(organization, ("name", "slug")),
    )
    audit.record(
        actor=actor,
        action="member.create",
        target=owner,
        after={"email": email, "roles": ["owner"]},
    )
    return organization, owner


@transaction.atomic
def organization_update(*, actor: Actor, organization: Organization, **fields) -> Organization:
    actor.require("organization.manage")
    if organization.pk != actor.organization.pk:
        raise NotPermitted("You can only change your own organization.")
    before = _snapshot(organization, ORGANIZATION_FIELDS)
    for name, value in fields.items():
        if name not in ORGANIZATION_FIELDS:
            raise InvalidInput(f"Field {name!r} cannot be changed.")
        setattr(organization, name, value)
    organization.save(update_fields=list(fields))
    audit.record(
        actor=actor,
        action="organization.update",
        target=organization,
        before=before,
        after=_snapshot(organization, ORGANIZATION_FIELDS),
    )
    return organization


# --- departments --------------------------------------------------------------------------

DEPARTMENT_FIELDS = ("name", "code", "description", "parent", "is_archived")


def _check_parent(department: Department | None, parent: Department | None) -> None:
    if parent is None:
        return
    if parent.is_archived:
        raise InvalidInput("The parent department is archived.", details={"parent": ["Archived."]})
    if department is not None and department.pk:
        below = department_subtree_ids(department.organization_id, {department.pk})
        if parent.pk in below:
            raise InvalidInput(
                "A department cannot be moved under itself or one of its sub-departments.",
                details={"parent": ["Would create a cycle."]},
            )


def _save_unique(obj, message: str, field: str, **save_kwargs) -> None:
    try:
        with transaction.atomic():
            obj.save(**save_kwargs)
    except IntegrityError:
        raise Conflict(message, code="duplicate", details={field: [message]}) from None


@transaction.atomic
def department_create(
    *,
    actor: Actor,
    name: str,
    parent: Department | None = None,
    code: str = "",
    description: str = "",
) -> Department:
    if parent is not None:
        _same_org(actor, parent)
        actor.require("department.manage", parent)
    else:
        actor.require("department.manage")
    _check_parent(None, parent)
    department = Department(
        organization=actor.organization,
        name=name.strip(),
        parent=parent,
        code=code,
        description=description,
    )
    _save_unique(department, "A department with this name exists at this level.", "name")
    audit.record(
        actor=actor,
        action="department.create",
        target=department,
        after=_snapshot(department, DEPARTMENT_FIELDS),
    )
    return department


@transaction.atomic
def department_update(*, actor: Actor, department: Department, **fields) -> Department:
    actor.require("department.manage", department)
    before = _snapshot(department, DEPARTMENT_FIELDS)
    if "parent" in fields:
        parent = fields["parent"]
        _same_org(actor, parent)
        if parent is None:
            actor.require("department.manage")
        else:
            actor.require("department.manage", parent)
        _check_parent(department, parent)
    if fields.get("is_archived") and not department.is_archived:
        _check_can_archive(department)
    for name, value in fields.items():
        if name not in DEPARTMENT_FIELDS:
            raise InvalidInput(f"Field {name!r} cannot be changed.")
        setattr(department, name, value)
    _save_unique(
        department,
        "A department with this name exists at this level.",
        "name",
        update_fields=list(fields),
    )
    archived = fields.get("is_archived") and not before["is_archived"]
    action = "department.archive" if archived else "department.update"
    audit.record(
        actor=actor,
        action=action,
        target=department,
        before=before,
        after=_snapshot(department, DEPARTMENT_FIELDS),
    )
    return department


def _check_can_archive(department: Department) -> None:
    if department.children.filter(is_archived=False).exists():
        raise Conflict("Archive or move its sub-departments first.", code="has_children")
    if department.members.exclude(status=Member.Status.DEACTIVATED).exists():
        raise Conflict("Move its members to another department first.", code="has_members")


def department_archive(*, actor: Actor, department: Department) -> Department:
    return department_update(actor=actor, department=department, is_archived=True)


# --- positions ----------------------------------------------------------------------------

POSITION_FIELDS = ("name", "code", "description", "department", "is_archived")


@transaction.atomic
def position_create(
    *,
    actor: Actor,
    name: str,
    code: str = "",
    description: str = "",
    department: Department | None = None,
) -> Position:
    actor.require("position.manage")
    _same_org(actor, department)
    code = slugify(code or name)[:64]
    if not code:
        raise InvalidInput("The position needs a name.", details={"name": ["Required."]})
    position = Position(
        organization=actor.organization,
        name=name.strip(),
        code=code,
        description=description,
        department=department,
    )
    _save_unique(position, f"A position with code {code!r} exists.", "code")
    audit.record(
        actor=actor,
        action="position.create",
        target=position,
        after=_snapshot(position, POSITION_FIELDS),
    )
    return position


@transaction.atomic
def position_update(*, actor: Actor, position: Position, **fields) -> Position:
    actor.require("position.manage", position)
    _same_org(actor, fields.get("department"))
    if "code" in fields:
        fields["code"] = slugify(fields["code"])[:64]
        if not fields["code"]:
            raise InvalidInput("The code cannot be blank.", details={"code": ["Required."]})
    before = _snapshot(position, POSITION_FIELDS)
    for name, value in fields.items():
        if name not in POSITION_FIELDS:
            raise InvalidInput(f"Field {name!r} cannot be changed.")
        setattr(position, name, value)
    _save_unique(position, "A position with this code exists.", "code", update_fields=list(fields))
    archived = fields.get("is_archived") and not before["is_archived"]
    action = "position.archive" if archived else "position.update"
    audit.record(
        actor=actor,
        action=action,
        target=position,
        before=before,
        after=_snapshot(position, POSITION_FIELDS),
    )
    return position


# --- members ------------------------------------------------------------------------------

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
)


def _member_snapshot(member: Member) -> dict:
    data = _snapshot(member, MEMBER_FIELDS)
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
        raise NotPermitted("Only an owner can grant or remove the owner role.")


def _check_owner_target(actor: Actor, member: Member, verb: str) -> None:
    """Deactivating or reactivating an owner changes who owns the organization."""
    if "owner" in member.roles and not _acts_as_owner(actor):
        raise NotPermitted(f"Only an owner can {verb} an owner.")


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
        raise Conflict("The organization must keep at least one active owner.", code="last_owner")


def _apply_member_links(actor, member, department, manager, positions) -> None:
    _same_org(actor, department, manager, *(positions or []))
    if department is not None and department.is_archived:
        raise InvalidInput("The department is archived.", details={"department": ["Archived."]})
    if manager is not None and member.pk and manager.pk == member.pk:
        raise InvalidInput(
            "A member cannot be their own manager.", details={"manager": ["Choose someone else."]}
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
) -> Member:
    """Add a member directly (e.g. an employee who will only chat in IM); no login yet."""
    _same_org(actor, department)
    if department is not None:
        actor.require("member.manage", department)
    else:
        actor.require("member.manage")
    roles = _check_roles(roles or ["employee"])
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
    )
    _apply_member_links(actor, member, department, manager, positions)
    _save_unique(member, "A member with this email exists.", "email")
    if positions:
        member.positions.set(positions)
    audit.record(actor=actor, action="member.create", target=member, after=_member_snapshot(member))
    return member


@transaction.atomic
def member_invite(
    *,
    actor: Actor,
    email: str,
    display_name: str = "",
    roles: list[str] | None = None,
    department: Department | None = None,
    positions: list[Position] | None = None,
    member: Member | None = None,
) -> tuple[Member, Invitation, str]:
    """Invite someone to the console: returns the member, the invitation and the link token."""
    email = email.strip().lower()
    if not email:
        raise InvalidInput("An invitation needs an email.", details={"email": ["Required."]})
    if member is None:
        member = Member.objects.filter(organization=actor.organization, email=email).first()
    if member is None:
        member = member_create(
            actor=actor,
            display_name=display_name or email.split("@")[0],
            email=email,
            department=department,
            positions=positions,
            roles=roles,
            status=Member.Status.INVITED,
        )
    else:
        actor.require("member.manage", member)
        if member.user_id is not None:
            raise Conflict("This member can already sign in.", code="already_member")
        if member.status == Member.Status.DEACTIVATED:
            raise Conflict("Reactivate the member before inviting them.", code="deactivated")
        if not member.email:
            member.email = email
            member.save(update_fields=["email"])
    member.invitations.filter(accepted_at=None, revoked_at=None).update(revoked_at=timezone.now())
    token = secrets.token_urlsafe(32)
    invitation = Invitation.objects.create(
        organization=actor.organization,
        member=member,
        email=email,
        token_hash=_hash_token(token),
        invited_by=actor.member or member,
        expires_at=timezone.now() + timedelta(days=settings.CADRE_INVITATION_DAYS),
    )
    audit.record(
        actor=actor,
        action="member.invite",
        target=member,
        after={"email": email, "expires_at": invitation.expires_at},
    )
    return member, invitation, token


def invitation_lookup(token: str) -> Invitation | None:
    return (
        Invitation.objects.select_related("member", "organization")
        .filter(token_hash=_hash_token(token))
        .first()
    )


@transaction.atomic
def invitation_accept(
    *,
    token: str,
    password: str | None,
    display_name: str = "",
    user: User | None = None,
) -> Member:
    """Accept an invitation: an existing signed-in user, or a new user with a password."""
    invitation = (
        Invitation.objects.select_for_update()
        .select_related("member", "organization")
        .filter(token_hash=_hash_token(token))
        .first()
    )
    if invitation is None or invitation.state != "pending":
        state = invitation.state if invitation else "unknown"
        raise InvalidInput(f"This invitation link is {state}.", code=f"invitation_{state}")
    member = invitation.member
    if member.status == Member.Status.DEACTIVATED:
        raise InvalidInput("This membership was deactivated.", code="invitation_revoked")
    if user is None:
        user = User.objects.filter(email=invitation.email).first()
        if user is not None:
            raise Conflict(
                "An account with this email exists: sign in, then open the link.",
                code="sign_in_first",
            )
        candidate = User(email=invitation.email, display_name=display_name)
        try:
            validate_password(password or "", user=candidate)
        except ValidationError as error:
            raise InvalidInput(error.messages[0], details={"password": error.messages}) from None
        user = User.objects.create_user(invitation.email, password, display_name=display_name)
    if Member.objects.filter(organization=invitation.organization, user=user).exists():
        raise Conflict("You are already a member of this organization.", code="already_member")
    member.user = user
    member.status = Member.Status.ACTIVE
    if display_name:
        member.display_name = display_name
    member.save(update_fields=["user", "status", "display_name"])
    invitation.accepted_at = timezone.now()
    invitation.save(update_fields=["accepted_at"])
    from cadre.tenancy.actors import member_actor

    audit.record(
        actor=member_actor(member),
        action="member.invitation_accept",
        target=member,
        after={"status": member.status},
    )
    return member


@transaction.atomic
def invitation_revoke(*, actor: Actor, invitation: Invitation) -> Invitation:
    actor.require("member.manage", invitation.member)
    if invitation.state != "pending":
        raise Conflict(f"The invitation is already {invitation.state}.", code="not_pending")
    invitation.revoked_at = timezone.now()
    invitation.save(update_fields=["revoked_at"])
    audit.record(
        actor=actor,
        action="member.invitation_revoke",
        target=invitation.member,
        after={"invitation": invitation.pk},
    )
    return invitation


@transaction.atomic
def member_update(
    *, actor: Actor, member: Member, positions: list[Position] | None = None, **fields
) -> Member:
    actor.require("member.manage", member)
    before = _member_snapshot(member)
    if "roles" in fields:
        fields["roles"] = _check_roles(fields["roles"])
        _check_role_change(actor, member.roles, fields["roles"])
        _ensure_an_owner_remains(member, "owner" not in fields["roles"])
    if "department" in fields:
        # Moving a member: the actor must manage the destination (org-wide for "none").
        _same_org(actor, fields["department"])
        if fields["department"] is not None:
            actor.require("member.manage", fields["department"])
        else:
            actor.require("member.manage")
    if "status" in fields:
        raise InvalidInput("Use deactivate or reactivate to change a member's status.")
    _apply_member_links(actor, member, fields.get("department"), fields.get("manager"), positions)
    for name, value in fields.items():
        if name not in MEMBER_FIELDS:
            raise InvalidInput(f"Field {name!r} cannot be changed.")
        if name == "email":
            value = value.strip().lower()
        setattr(member, name, value)
    if fields:
        _save_unique(
            member, "A member with this email exists.", "email", update_fields=list(fields)
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
        raise Conflict("The member is already deactivated.", code="already_deactivated")
    if actor.member is not None and actor.member.pk == member.pk:
        raise Conflict("You cannot deactivate yourself.", code="self")
    _check_owner_target(actor, member, "deactivate")
    _ensure_an_owner_remains(member, True)
    before = {"status": member.status}
    member.status = Member.Status.DEACTIVATED
    member.deactivated_at = timezone.now()
    member.save(update_fields=["status", "deactivated_at"])
    member.invitations.filter(accepted_at=None, revoked_at=None).update(revoked_at=timezone.now())
    # Their agents stop at once: open runs are cancelled and no new run starts.
    from cadre.agents.services import agents_stop_for_member

    agents_stop_for_member(actor=actor, member=member, reason=reason or "member deactivated")
    audit.record(
        actor=actor,
        action="member.deactivate",
        target=member,
        before=before,
        after={"status": member.status},
        reason=reason,
    )
    return member


@transaction.atomic
def member_reactivate(*, actor: Actor, member: Member) -> Member:
    actor.require("member.manage", member)
    if member.status != Member.Status.DEACTIVATED:
        raise Conflict("The member is not deactivated.", code="not_deactivated")
    _check_owner_target(actor, member, "reactivate")
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


# --- IM identities ------------------------------------------------------------------------


@transaction.atomic
def im_identity_create(
    *,
    actor: Actor,
    member: Member,
    platform: str,
    platform_user_id: str,
    tenant_key: str = "",
    display_name: str = "",
) -> IMIdentity:
    actor.require("member.manage", member)
    if platform not in platforms:
        raise InvalidInput(
            f"Unknown platform {platform!r}.",
            details={"platform": [f"Choose from {', '.join(platforms)}."]},
        )
    identity = IMIdentity(
        organization=actor.organization,
        member=member,
        platform=platform,
        platform_user_id=platform_user_id.strip(),
        tenant_key=tenant_key,
        display_name=display_name,
    )
    _save_unique(
        identity, "This platform account is already mapped to a member.", "platform_user_id"
    )
    audit.record(
        actor=actor,
        action="member.identity_add",
        target=member,
        after={"platform": platform, "platform_user_id": identity.platform_user_id},
    )
    return identity


@transaction.atomic
def im_identity_delete(*, actor: Actor, identity: IMIdentity) -> None:
    actor.require("member.manage", identity.member)
    audit.record(
        actor=actor,
        action="member.identity_remove",
        target=identity.member,
        before={"platform": identity.platform, "platform_user_id": identity.platform_user_id},
    )
    identity.delete()


# --- API keys -----------------------------------------------------------------------------

API_KEY_PREFIX = "cadre"


_HEX = frozenset("0123456789abcdef")


def api_key_parse(token: str) -> tuple[str, str] | None:
    """`cadre_<prefix>_<secret>` → (prefix, token) or None when malformed."""
    parts = token.split("_", 2)
    if (
        len(parts) != 3
        or parts[0] != API_KEY_PREFIX
        or len(parts[1]) != 8
        or not set(parts[1]) <= _HEX
        or not parts[2]
        or len(token) > 200
        or not token.isascii()
        or not token.isprintable()
    ):
        return None
    return parts[1], token


def api_key_hash(token: str) -> str:
    return _hash_token(token)


@transaction.atomic
def api_key_create(
    *,
    actor: Actor,
    name: str,
    scopes: list[str],
    expires_at=None,
) -> tuple[ApiKey, str]:
    """Create a key; the secret is returned here once and only its hash is kept."""
    actor.require("apikey.manage")
    if actor.member is None or actor.kind != "member":
        raise NotPermitted("API keys are created by a signed-in member.")
    unknown = [scope for scope in scopes if scope not in SCOPES]
    if unknown or not scopes:
        raise InvalidInput(
            "Choose at least one known scope."
            if not unknown
            else f"Unknown scope(s): {', '.join(unknown)}.",
            details={"scopes": [f"Choose from: {', '.join(SCOPES)}"]},
        )
    beyond = permissions_for_scopes(scopes) - permissions_for_roles(actor.member.roles)
    if beyond:
        raise NotPermitted(
            "A key cannot have permissions you do not have: " + ", ".join(sorted(beyond)),
            details={"scopes": ["Exceeds your own permissions."]},
        )
    if expires_at is not None and expires_at <= timezone.now():
        raise InvalidInput(
            "The expiry must be in the future.", details={"expires_at": ["Must be in the future."]}
        )
    prefix = secrets.token_hex(4)
    token = f"{API_KEY_PREFIX}_{prefix}_{secrets.token_urlsafe(32)}"
    key = ApiKey.objects.create(
        organization=actor.organization,
        name=name.strip() or "API key",
        prefix=prefix,
        key_hash=_hash_token(token),
        scopes=sorted(set(scopes)),
        created_by=actor.member,
        expires_at=expires_at,
    )
    audit.record(
        actor=actor,
        action="apikey.create",
        target=key,
        after={"name": key.name, "prefix": prefix, "scopes": key.scopes, "expires_at": expires_at},
    )
    return key, token


@transaction.atomic
def api_key_revoke(*, actor: Actor, key: ApiKey) -> ApiKey:
    actor.require("apikey.manage")
    if key.revoked_at is not None:
        raise Conflict("The key is already revoked.", code="already_revoked")
    key.revoked_at = timezone.now()
    key.revoked_by = actor.member
    key.save(update_fields=["revoked_at", "revoked_by"])
    audit.record(
        actor=actor,
        action="apikey.revoke",
        target=key,
        before={"state": "active"},
        after={"state": "revoked"},
    )
    return key


def api_key_touch(key: ApiKey, ip: str | None) -> None:
    """Record use, at most once a minute per key (not audited: it is not a change of state)."""
    now = timezone.now()
    interval = timedelta(seconds=settings.CADRE_API_KEY_LAST_USED_INTERVAL)
    if key.last_used_at is None or now - key.last_used_at >= interval:
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=now, last_used_ip=ip)
        key.last_used_at, key.last_used_ip = now, ip


# --- object-level grants ------------------------------------------------------------------


def _grant_target_type(target) -> str:
    return target._meta.model_name


@transaction.atomic
def object_grant(*, actor: Actor, member: Member, permission: str, target) -> None:
    """Grant `permission` on one object (e.g. member.manage on a department) to a member."""
    from guardian.shortcuts import assign_perm

    actor.require("grant.manage")
    _same_org(actor, member, target)
    allowed = GRANTABLE.get(_grant_target_type(target), ())
    if permission not in allowed:
        raise InvalidInput(
            f"{permission!r} cannot be granted on a {_grant_target_type(target)}.",
            details={"permission": [f"Choose from: {', '.join(allowed) or 'nothing'}"]},
        )
    if member.user_id is None:
        raise InvalidInput(
            "Grants are for members who sign in; invite this member first.",
            details={"member": ["Has no console login."]},
        )
    assign_perm(f"{target._meta.app_label}.{grant_codename(permission)}", member.user, target)
    audit.record(
        actor=actor,
        action="grant.add",
        target=target,
        after={"member": member.pk, "permission": permission},
    )


@transaction.atomic
def object_grant_revoke(*, actor: Actor, member: Member, permission: str, target) -> None:
    from guardian.shortcuts import remove_perm

    actor.require("grant.manage")
    _same_org(actor, member, target)
    remove_perm(f"{target._meta.app_label}.{grant_codename(permission)}", member.user, target)
    audit.record(
        actor=actor,
        action="grant.remove",
        target=target,
        before={"member": member.pk, "permission": permission},
    )
