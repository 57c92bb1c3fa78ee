"""Object-level grants (django-guardian): one permission on one object for one member."""

from __future__ import annotations

from django.db import transaction
from django.utils.translation import gettext as _

from cadre.errors import InvalidInput
from cadre.governance import audit
from cadre.tenancy.actors import Actor
from cadre.tenancy.models import Member
from cadre.tenancy.roles import GRANTABLE, grant_codename
from cadre.tenancy.services.common import same_org


def _grant_target_type(target) -> str:
    return target._meta.model_name


@transaction.atomic
def object_grant(*, actor: Actor, member: Member, permission: str, target) -> None:
    """Grant `permission` on one object (e.g. member.manage on a department) to a member."""
    from guardian.shortcuts import assign_perm

    actor.require("grant.manage")
    same_org(actor, member, target)
    allowed = GRANTABLE.get(_grant_target_type(target), ())
    if permission not in allowed:
        raise InvalidInput(
            _("%(permission)r cannot be granted on a %(target)s.")
            % {"permission": permission, "target": _grant_target_type(target)},
            details={
                "permission": [
                    _("Choose from: %(value)s") % {"value": ", ".join(allowed) or _("nothing")}
                ]
            },
        )
    if member.user_id is None:
        raise InvalidInput(
            _("Grants are for members who sign in; invite this member first."),
            details={"member": [_("Has no console login.")]},
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
    same_org(actor, member, target)
    remove_perm(f"{target._meta.app_label}.{grant_codename(permission)}", member.user, target)
    audit.record(
        actor=actor,
        action="grant.remove",
        target=target,
        before={"member": member.pk, "permission": permission},
    )
