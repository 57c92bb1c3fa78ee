"""SCIM provisioning writes: an identity provider's users become members, its groups departments.

Each function takes plain field values (the SCIM layer parses the protocol) and goes through
the member and department services, so permissions, uniqueness and audit are theirs.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import transaction
from django.db.models.functions import Lower
from django.utils import timezone
from django.utils.translation import gettext

from cadre.errors import InvalidInput
from cadre.governance import audit
from cadre.identifiers import parse_pk
from cadre.tenancy.actors import Actor
from cadre.tenancy.models import Department, Member
from cadre.tenancy.services.members import (
    check_owner_target,
    member_create,
    member_deactivate,
    member_reactivate,
    member_update,
)
from cadre.tenancy.services.organizations import (
    department_archive,
    department_create,
    department_update,
)

_PROFILE = (
    "user_name",
    "email",
    "display_name",
    "given_name",
    "family_name",
    "title",
    "mobile",
    "external_id",
    "employee_no",
)


def _department_named(actor: Actor, name: str) -> Department | None:
    """The enterprise extension's `department` names a department; a new name creates one."""
    if not name:
        return None
    found = (
        Department.objects.filter(organization=actor.organization, is_archived=False)
        .annotate(lowered=Lower("name"))
        .filter(lowered=name.lower())
        .order_by("parent_id", "pk")
        .first()
    )
    return found or department_create(actor=actor, name=name[:200])


def _field_limit(name: str) -> int:
    return Member._meta.get_field(name).max_length


def _check_identifiers(member: Member | None, profile: dict) -> None:
    """userName and e-mail are identifiers: one too long or an e-mail Cadre would not accept
    elsewhere is refused, never cut. Only what the identity provider changes is checked, so a
    value Cadre already holds never blocks a deprovisioning call."""

    def changed(name: str) -> bool:
        return member is None or getattr(member, name) != profile[name]

    user_name, email = profile["user_name"], profile["email"]
    if changed("user_name") and len(user_name) > _field_limit("user_name"):
        message = gettext("userName is longer than %(limit)d characters.") % {
            "limit": _field_limit("user_name")
        }
        raise InvalidInput(message, details={"userName": [message]})
    if email and changed("email"):
        try:
            validate_email(email)
            if len(email) > _field_limit("email"):
                raise ValidationError(gettext("too long"))
        except ValidationError:
            message = gettext("%(email)s is not an e-mail address Cadre accepts.") % {
                "email": email[:100]
            }
            raise InvalidInput(message, details={"emails": [message]}) from None


@transaction.atomic
def scim_user_provision(*, actor: Actor, member: Member | None, fields: dict) -> Member:
    """Create (member None) or bring a member in line with the identity provider's record."""
    if not fields.get("user_name"):
        raise InvalidInput(
            gettext("userName is required."), details={"userName": [gettext("Required.")]}
        )
    department = _department_named(actor, fields.get("department_name", ""))
    profile = {name: fields.get(name, "") for name in _PROFILE}
    if not profile["display_name"]:
        profile["display_name"] = profile["user_name"][: _field_limit("display_name")]
    _check_identifiers(member, profile)
    language = fields.get("language")  # None: the identity provider did not send one
    if member is None:
        member = member_create(actor=actor, department=department, **profile)
        if language:
            member = member_update(actor=actor, member=member, language=language)
        if not fields.get("active", True):
            member_deactivate(actor=actor, member=member, reason="provisioned inactive (SCIM)")
        return member
    changed = {name: value for name, value in profile.items() if getattr(member, name) != value}
    if fields.get("department_name") is not None and department != member.department:
        changed["department"] = department
    if language is not None and language != member.language:
        changed["language"] = language
    if changed:
        member = member_update(actor=actor, member=member, **changed)
    active = fields.get("active", True)
    if not active and member.status != Member.Status.DEACTIVATED:
        member_deactivate(actor=actor, member=member, reason="deprovisioned by SCIM (active false)")
    elif active and member.status == Member.Status.DEACTIVATED:
        member_reactivate(actor=actor, member=member)
    return member


@transaction.atomic
def scim_user_delete(*, actor: Actor, member: Member) -> Member:
    """Deprovision: deactivate (agents stop, keys revoked, data kept) and stop serving it."""
    if member.status != Member.Status.DEACTIVATED:
        member_deactivate(actor=actor, member=member, reason="deleted by SCIM")
    else:
        check_owner_target(actor, member, "delete")
    member.scim_deleted_at = timezone.now()
    member.save(update_fields=["scim_deleted_at"])
    audit.record(
        actor=actor,
        action="member.scim_delete",
        target=member,
        after={"scim_deleted_at": member.scim_deleted_at},
    )
    return member


def _members_of(actor: Actor, member_ids: list[str]) -> list[Member]:
    ids = [parse_pk(pk) for pk in member_ids]
    found = list(
        Member.objects.filter(
            organization=actor.organization,
            pk__in=[pk for pk in ids if pk is not None],
            scim_deleted_at=None,
        )
    )
    if None in ids or len(found) != len(set(ids)):
        raise InvalidInput(
            gettext("A group member is not a user of this organization."),
            details={"members": [gettext("Unknown user id.")]},
        )
    return found


@transaction.atomic
def scim_group_provision(
    *,
    actor: Actor,
    department: Department | None,
    name: str,
    external_id: str = "",
    member_ids: list[str] | None = None,
) -> Department:
    """A group is a department: its members are the members whose department it is.

    A member belongs to one department, so joining a group moves them out of another one.
    """
    name = (name or "").strip()
    if not name:
        raise InvalidInput(
            gettext("displayName is required."), details={"displayName": [gettext("Required.")]}
        )
    external_id = (external_id or "")[:191]
    if department is None:
        department = department_create(actor=actor, name=name[:200], external_id=external_id)
    else:
        changed = {}
        if department.name != name[:200]:
            changed["name"] = name[:200]
        if department.external_id != external_id:
            changed["external_id"] = external_id
        if changed:
            department = department_update(actor=actor, department=department, **changed)
    if member_ids is not None:
        wanted = _members_of(actor, member_ids)
        wanted_ids = {m.pk for m in wanted}
        for member in wanted:
            if member.department_id != department.pk:
                member_update(actor=actor, member=member, department=department)
        for member in department.members.exclude(pk__in=wanted_ids):
            member_update(actor=actor, member=member, department=None)
    return department


@transaction.atomic
def scim_group_delete(*, actor: Actor, department: Department) -> Department:
    """The group is gone: its members leave the department, which is archived (history kept)."""
    for member in department.members.all():
        member_update(actor=actor, member=member, department=None)
    return department_archive(actor=actor, department=department)
