"""Registry: for each model served under /api/v1/, how to make one object of an organization.

The cross-tenant sweep (tests/api/test_cross_tenant.py) discovers every route from the URL
resolver; a detail route whose model has no entry here fails the sweep, so a new endpoint is
never silently left out. Add an entry when you add an API for a new model.
"""

from __future__ import annotations

from collections.abc import Callable

from guardian.models import UserObjectPermission

from cadre.governance.models import AuditEvent
from cadre.tenancy import services
from cadre.tenancy.actors import member_actor
from cadre.tenancy.models import (
    ApiKey,
    Department,
    IMIdentity,
    Invitation,
    Member,
    Position,
)
from tests.factories import DepartmentFactory, IMIdentityFactory, MemberFactory, PositionFactory


def _member(owner: Member) -> Member:
    return MemberFactory(organization=owner.organization)


def _invitation(owner: Member) -> Invitation:
    _, invitation, _ = services.member_invite(
        actor=member_actor(owner), email=f"invitee{Invitation.objects.count()}@example.test"
    )
    return invitation


def _api_key(owner: Member) -> ApiKey:
    key, _ = services.api_key_create(actor=member_actor(owner), name="sweep", scopes=["org:read"])
    return key


def _audit_event(owner: Member) -> AuditEvent:
    department = services.department_create(actor=member_actor(owner), name="Audited dept")
    return AuditEvent.objects.filter(target_type="department", target_id=str(department.pk)).get()


def _grant(owner: Member) -> UserObjectPermission:
    department = DepartmentFactory(organization=owner.organization)
    grantee = MemberFactory(organization=owner.organization)
    services.object_grant(
        actor=member_actor(owner), member=grantee, permission="member.manage", target=department
    )
    return UserObjectPermission.objects.get(user=grantee.user, object_pk=str(department.pk))


# model -> factory(owner of the organization) -> a saved object of that organization
FACTORIES: dict[type, Callable[[Member], object]] = {
    Department: lambda owner: DepartmentFactory(organization=owner.organization),
    Position: lambda owner: PositionFactory(organization=owner.organization),
    Member: _member,
    Invitation: _invitation,
    IMIdentity: lambda owner: IMIdentityFactory(member=_member(owner)),
    ApiKey: _api_key,
    AuditEvent: _audit_event,
    UserObjectPermission: _grant,
}
