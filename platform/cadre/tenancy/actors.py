"""Who is acting: a member, an API key, an agent or the system, with their permissions."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.contrib.contenttypes.models import ContentType
from django.utils.translation import gettext as _

from cadre.errors import NotPermitted
from cadre.identifiers import parse_pks
from cadre.tenancy.querysets import grant_filter
from cadre.tenancy.roles import (
    PERMISSIONS,
    grant_codename,
    permissions_for_roles,
    permissions_for_scopes,
)


@dataclass
class Actor:
    kind: str  # "member", "api_key", "agent", "system"
    organization: object | None
    permissions: frozenset[str] = frozenset()
    member: object | None = None
    api_key: object | None = None
    agent: object | None = None
    label: str = ""
    # A system actor's stated reason for what it does; the memory gate refuses a system read
    # without one, and audits it (with the reason) when `audit_reads` is set.
    reason: str = ""
    audit_reads: bool = False
    _grants: dict | None = field(default=None, repr=False)

    # --- identity for audit ---------------------------------------------------------------

    @property
    def actor_id(self) -> str:
        """The id of what acted: the key for a key (not its creator), the agent for an agent."""
        value = {"member": self.member, "api_key": self.api_key, "agent": self.agent}.get(self.kind)
        return str(value.pk) if value is not None else ""

    # --- permissions ----------------------------------------------------------------------

    def has(self, permission: str) -> bool:
        """Organization-wide permission."""
        return permission in self.permissions

    def _load_grants(self) -> dict:
        if self._grants is None:
            self._grants = {}
            user_id = getattr(self.member, "user_id", None)
            # A deactivated member keeps their grant rows (history) but they give nothing.
            active = getattr(self.member, "is_active", False)
            if user_id is not None and self.kind == "member" and active:
                from guardian.models import UserObjectPermission

                rows = UserObjectPermission.objects.filter(user_id=user_id).values_list(
                    "permission__codename", "content_type_id", "object_pk"
                )
                for codename, content_type_id, object_pk in rows:
                    self._grants.setdefault((codename, content_type_id), set()).add(object_pk)
        return self._grants

    def granted_ids(self, permission: str, model) -> set[int]:
        """Primary keys of `model` objects on which this actor holds `permission`."""
        content_type = ContentType.objects.get_for_model(model)
        raw = self._load_grants().get((grant_codename(permission), content_type.id), set())
        return set(parse_pks(raw))

    def may(self, permission: str, model=None) -> bool:
        """Organization-wide, or through at least one grant (on `model`'s grant sources)."""
        if self.has(permission):
            return True
        codename = grant_codename(permission)
        return any(key[0] == codename for key in self._load_grants())

    def can(self, permission: str, obj) -> bool:
        """May the actor do `permission` on this object?

        Organization-wide, or through a grant that reaches the object — e.g. `member.manage`
        on a department reaches that department, its sub-departments and their members.
        """
        if getattr(obj, "organization_id", None) != getattr(self.organization, "pk", None):
            return False
        if self.has(permission):
            return True
        if obj.pk is None:
            return False

        condition = grant_filter(type(obj), self, permission)
        if condition is None:
            return False
        return type(obj)._default_manager.filter(pk=obj.pk).filter(condition).exists()

    def require(self, permission: str, obj=None) -> None:
        allowed = self.can(permission, obj) if obj is not None else self.has(permission)
        if not allowed:
            raise NotPermitted(
                _("You do not have the '%(permission)s' permission.") % {"permission": permission}
            )


def member_actor(member) -> Actor:
    permissions = permissions_for_roles(member.roles) if member.is_active else frozenset()
    return Actor(
        kind="member",
        organization=member.organization,
        permissions=permissions,
        member=member,
        label=member.display_name,
    )


def api_key_actor(api_key) -> Actor:
    creator = api_key.created_by
    creator_permissions = permissions_for_roles(creator.roles) if creator.is_active else frozenset()
    return Actor(
        kind="api_key",
        organization=api_key.organization,
        permissions=permissions_for_scopes(api_key.scopes) & creator_permissions,
        api_key=api_key,
        member=creator,
        label=f"API key {api_key.name} ({api_key.prefix})",
    )


def system_actor(
    organization=None, label: str = "system", *, reason: str = "", audit_reads: bool = False
) -> Actor:
    """The platform acting for itself, named by `label`. Reading memory needs a `reason`
    (the memory gate refuses a system read without one); `audit_reads` records each read in
    the audit trail with that reason — for jobs whose reads reach a person or a model."""
    return Actor(
        kind="system",
        organization=organization,
        permissions=frozenset(PERMISSIONS),
        label=label,
        reason=reason,
        audit_reads=audit_reads,
    )
