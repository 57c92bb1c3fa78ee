"""IM identities: which platform account belongs to which member."""

from __future__ import annotations

from django.db import transaction
from django.utils.translation import gettext as _

from cadre.errors import InvalidInput
from cadre.governance import audit
from cadre.im import platforms
from cadre.tenancy.actors import Actor
from cadre.tenancy.models import IMIdentity, Member
from cadre.tenancy.services.common import save_unique
from cadre.tenancy.services.members import hold_sso_link


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
            _("Unknown platform %(platform)r.") % {"platform": platform},
            details={
                "platform": [_("Choose from %(platforms)s.") % {"platforms": ", ".join(platforms)}]
            },
        )
    identity = IMIdentity(
        organization=actor.organization,
        member=member,
        platform=platform,
        platform_user_id=platform_user_id.strip(),
        tenant_key=tenant_key,
        display_name=display_name,
    )
    held = hold_sso_link(actor, member)  # an IM login finds the member by it
    save_unique(
        identity, _("This platform account is already mapped to a member."), "platform_user_id"
    )
    if held:
        member.save(update_fields=held)
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
