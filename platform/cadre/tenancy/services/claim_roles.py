"""Groups → roles: an identity provider's group (or department) claim values grant Cadre roles.

The mapping is a list of {"value": <group claim value>, "roles": [<role>, …]}. On each sign-in
the roles the mapping names are recomputed from the groups the provider sent: a member gains
those their groups grant and loses those it no longer grants; roles the mapping does not name
(given in the console, over SCIM…) are left alone. The last active owner is never demoted.
"""

from __future__ import annotations

from django.utils.translation import gettext as _

from cadre.errors import InvalidInput, NotPermitted
from cadre.governance import audit
from cadre.tenancy.models import IdentityProvider, Member
from cadre.tenancy.roles import ROLES


def groups_of(provider: IdentityProvider, claims: dict) -> list[str]:
    """The provider's group claim as a list of strings (a list, a single value, or numbers)."""
    if not provider.claim_groups:
        return []
    value = claims.get(provider.claim_groups)
    if value is None or value == "":
        return []
    if not isinstance(value, (list, tuple)):
        value = [value]
    return [str(item) for item in value if item is not None and not isinstance(item, (dict, list))]


def mapping_check(mapping, *, actor=None) -> list[dict]:
    """A clean copy of a mapping, or InvalidInput; granting "owner" needs an owner's hand."""
    if not isinstance(mapping, list):
        raise InvalidInput(_("The groups → roles mapping must be a list."))
    clean = []
    for number, entry in enumerate(mapping, 1):
        if not isinstance(entry, dict) or not str(entry.get("value") or "").strip():
            raise InvalidInput(
                _("Mapping line %(number)s: a group value is needed.") % {"number": number}
            )
        roles = entry.get("roles")
        if not isinstance(roles, list) or not roles:
            raise InvalidInput(
                _("Mapping line %(number)s: at least one role is needed.") % {"number": number}
            )
        unknown = [role for role in roles if role not in ROLES]
        if unknown:
            raise InvalidInput(
                _("Mapping line %(number)s: unknown role %(unknown)r.")
                % {"number": number, "unknown": unknown[0]}
            )
        clean.append({"value": str(entry["value"]).strip(), "roles": list(dict.fromkeys(roles))})
    if actor is not None and any("owner" in entry["roles"] for entry in clean):
        member = actor.member
        if actor.kind != "system" and (member is None or "owner" not in member.roles):
            raise NotPermitted(_("Only an owner may map a group to the owner role."))
    return clean


def mapped_roles(provider: IdentityProvider, groups: list[str], current: list[str]) -> list[str]:
    """The member's roles once the mapping is applied to `groups` (unchanged without a mapping)."""
    mapping = provider.group_roles or []
    if not mapping:
        return list(current)
    managed = {role for entry in mapping for role in entry["roles"]}
    present = set(groups)
    granted = [role for entry in mapping if entry["value"] in present for role in entry["roles"]]
    kept = [role for role in current if role not in managed]
    new = list(dict.fromkeys(kept + [role for role in ROLES if role in granted]))
    return new or ["employee"]


def _other_active_owner(member: Member) -> bool:
    owners = (
        Member.objects.select_for_update()
        .filter(
            organization_id=member.organization_id,
            status=Member.Status.ACTIVE,
            roles__contains=["owner"],
        )
        .exclude(pk=member.pk)
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    return bool(list(owners))


def roles_plan(
    provider: IdentityProvider, member: Member | None, groups: list[str], *, lock: bool = False
) -> dict:
    """What a sign-in would do to the member's roles: before, after, and whether the owner
    role was kept because the member is the organization's last active owner."""
    before = list(member.roles) if member is not None else ["employee"]
    after = mapped_roles(provider, groups, before)
    owner_kept = False
    if member is not None and "owner" in before and "owner" not in after:
        others = (
            _other_active_owner(member)
            if lock
            else Member.objects.filter(
                organization_id=member.organization_id,
                status=Member.Status.ACTIVE,
                roles__contains=["owner"],
            )
            .exclude(pk=member.pk)
            .exists()
        )
        if not others:
            # Keep the owner role (and no "employee" fallback it would not otherwise need).
            after = ["owner", *[r for r in after if r != "employee" or "employee" in before]]
            owner_kept = True
    return {"before": before, "after": after, "changed": after != before, "owner_kept": owner_kept}


def roles_apply(*, provider: IdentityProvider, member: Member, groups: list[str], actor) -> dict:
    """Apply the mapping to a signed-in member; a change is audited as a role change from claims."""
    plan = roles_plan(provider, member, groups, lock=True)
    if plan["changed"]:
        member.roles = plan["after"]
        member.save(update_fields=["roles"])
        audit.record(
            actor=actor,
            action="sso.role_change",
            target=member,
            reason="role changed from claims",
            before={"roles": plan["before"]},
            after={
                "roles": plan["after"],
                "provider": provider.slug,
                "groups": groups[:50],
                "owner_kept": plan["owner_kept"],
            },
        )
    elif plan["owner_kept"]:
        audit.record(
            actor=actor,
            action="sso.role_change_refused",
            target=member,
            reason="last_owner",
            after={"provider": provider.slug, "groups": groups[:50]},
        )
    return plan
