"""The organization and its chart: organization settings, departments, positions."""

from __future__ import annotations

from django.db import transaction
from django.utils.text import slugify
from django.utils.translation import gettext as _

from cadre.errors import Conflict, InvalidInput, NotPermitted
from cadre.governance import audit
from cadre.tenancy.actors import Actor, system_actor
from cadre.tenancy.models import (
    Department,
    Member,
    Organization,
    Position,
    User,
    department_subtree_ids,
)
from cadre.tenancy.services import logins
from cadre.tenancy.services.common import same_org, save_unique, snapshot

# --- organizations ------------------------------------------------------------------------

ORGANIZATION_FIELDS = ("name", "locale", "time_zone", "approved_skills")


@transaction.atomic
def organization_create(
    *, name: str, slug: str = "", owner_email: str, owner_name: str = "", password: str | None
) -> tuple[Organization, Member]:
    """Create an organization with its first owner (the only service without an acting member)."""
    slug = slugify(slug or name)[:64]
    if not slug:
        raise InvalidInput(_("The organization needs a name."), details={"name": [_("Required.")]})
    if Organization.objects.filter(slug=slug).exists():
        raise Conflict(
            _("An organization with slug %(slug)r exists.") % {"slug": slug}, code="slug_taken"
        )
    organization = Organization.objects.create(name=name, slug=slug)
    email = owner_email.strip().lower()
    user = User.objects.filter(email=email).first()
    if user is not None and logins.provider_made(user):
        # Another organization's identity provider named that login: it must not own this one.
        logins.login_rename(user=user, reason="the address owns a new organization")
        user = None
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
        after=snapshot(organization, ("name", "slug")),
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
        raise NotPermitted(_("You can only change your own organization."))
    before = snapshot(organization, ORGANIZATION_FIELDS)
    for name, value in fields.items():
        if name not in ORGANIZATION_FIELDS:
            raise InvalidInput(_("Field %(name)r cannot be changed.") % {"name": name})
        if name == "approved_skills" and value not in Organization.ApprovedSkills.values:
            raise InvalidInput(
                _("approved_skills must be one of %(values)s.")
                % {"values": ", ".join(Organization.ApprovedSkills.values)},
                details={"approved_skills": [_("Not a choice.")]},
            )
        setattr(organization, name, value)
    organization.save(update_fields=list(fields))
    audit.record(
        actor=actor,
        action="organization.update",
        target=organization,
        before=before,
        after=snapshot(organization, ORGANIZATION_FIELDS),
    )
    return organization


# --- departments --------------------------------------------------------------------------

DEPARTMENT_FIELDS = ("name", "code", "description", "parent", "is_archived", "external_id")


def _check_parent(department: Department | None, parent: Department | None) -> None:
    if parent is None:
        return
    if parent.is_archived:
        raise InvalidInput(
            _("The parent department is archived."), details={"parent": [_("Archived.")]}
        )
    if department is not None and department.pk:
        below = department_subtree_ids(department.organization_id, {department.pk})
        if parent.pk in below:
            raise InvalidInput(
                _("A department cannot be moved under itself or one of its sub-departments."),
                details={"parent": [_("Would create a cycle.")]},
            )


@transaction.atomic
def department_create(
    *,
    actor: Actor,
    name: str,
    parent: Department | None = None,
    code: str = "",
    description: str = "",
    external_id: str = "",
) -> Department:
    if parent is not None:
        same_org(actor, parent)
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
        external_id=external_id,
    )
    save_unique(department, _("A department with this name exists at this level."), "name")
    audit.record(
        actor=actor,
        action="department.create",
        target=department,
        after=snapshot(department, DEPARTMENT_FIELDS),
    )
    return department


@transaction.atomic
def department_update(*, actor: Actor, department: Department, **fields) -> Department:
    actor.require("department.manage", department)
    before = snapshot(department, DEPARTMENT_FIELDS)
    if "parent" in fields:
        parent = fields["parent"]
        same_org(actor, parent)
        if parent is None:
            actor.require("department.manage")
        else:
            actor.require("department.manage", parent)
        _check_parent(department, parent)
    if fields.get("is_archived") and not department.is_archived:
        _check_can_archive(department)
    for name, value in fields.items():
        if name not in DEPARTMENT_FIELDS:
            raise InvalidInput(_("Field %(name)r cannot be changed.") % {"name": name})
        setattr(department, name, value)
    save_unique(
        department,
        _("A department with this name exists at this level."),
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
        after=snapshot(department, DEPARTMENT_FIELDS),
    )
    return department


def _check_can_archive(department: Department) -> None:
    if department.children.filter(is_archived=False).exists():
        raise Conflict(_("Archive or move its sub-departments first."), code="has_children")
    if department.members.exclude(status=Member.Status.DEACTIVATED).exists():
        raise Conflict(_("Move its members to another department first."), code="has_members")


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
    same_org(actor, department)
    code = slugify(code or name)[:64]
    if not code:
        raise InvalidInput(_("The position needs a name."), details={"name": [_("Required.")]})
    position = Position(
        organization=actor.organization,
        name=name.strip(),
        code=code,
        description=description,
        department=department,
    )
    save_unique(position, _("A position with code %(code)r exists.") % {"code": code}, "code")
    audit.record(
        actor=actor,
        action="position.create",
        target=position,
        after=snapshot(position, POSITION_FIELDS),
    )
    return position


@transaction.atomic
def position_update(*, actor: Actor, position: Position, **fields) -> Position:
    actor.require("position.manage", position)
    same_org(actor, fields.get("department"))
    if "code" in fields:
        fields["code"] = slugify(fields["code"])[:64]
        if not fields["code"]:
            raise InvalidInput(_("The code cannot be blank."), details={"code": [_("Required.")]})
    before = snapshot(position, POSITION_FIELDS)
    for name, value in fields.items():
        if name not in POSITION_FIELDS:
            raise InvalidInput(_("Field %(name)r cannot be changed.") % {"name": name})
        setattr(position, name, value)
    save_unique(
        position, _("A position with this code exists."), "code", update_fields=list(fields)
    )
    archived = fields.get("is_archived") and not before["is_archived"]
    action = "position.archive" if archived else "position.update"
    audit.record(
        actor=actor,
        action=action,
        target=position,
        before=before,
        after=snapshot(position, POSITION_FIELDS),
    )
    return position
