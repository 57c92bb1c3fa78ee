"""Every built-in role against every tenancy/audit API action, through the real endpoints.

The expected matrix is written out here on purpose, independent of `cadre.tenancy.roles`: a
change to a role's permissions that is not also made here fails this test.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
from guardian.models import UserObjectPermission

from cadre.tenancy import services
from cadre.tenancy.actors import member_actor
from cadre.tenancy.models import ApiKey, Department, Member
from tests.factories import DepartmentFactory, IMIdentityFactory, MemberFactory, PositionFactory
from tests.refusals import nothing_changes

ROLE_COLUMNS = ("owner", "it_admin", "business_admin", "skill_reviewer", "auditor", "employee")

# Y = allowed (2xx), - = denied (403).
#                               owner it_admin business_admin skill_reviewer auditor employee
EXPECTED_MATRIX = """
organization.view                 Y      Y          Y              Y          Y       Y
organization.update               Y      -          -              -          -       -
department.list                   Y      Y          Y              Y          Y       Y
department.retrieve               Y      Y          Y              Y          Y       Y
department.create                 Y      Y          -              -          -       -
department.update                 Y      Y          -              -          -       -
department.archive                Y      Y          -              -          -       -
position.list                     Y      Y          Y              Y          Y       Y
position.retrieve                 Y      Y          Y              Y          Y       Y
position.create                   Y      Y          Y              -          -       -
position.update                   Y      Y          Y              -          -       -
position.archive                  Y      Y          Y              -          -       -
member.list                       Y      Y          Y              Y          Y       Y
member.retrieve                   Y      Y          Y              Y          Y       Y
member.create                     Y      Y          -              -          -       -
member.invite                     Y      Y          -              -          -       -
member.update                     Y      Y          -              -          -       -
member.deactivate                 Y      Y          -              -          -       -
member.reactivate                 Y      Y          -              -          -       -
member.role_change                Y      Y          -              -          -       -
member.owner_role_grant           Y      -          -              -          -       -
member.owner_role_remove          Y      -          -              -          -       -
invitation.list                   Y      Y          Y              Y          Y       Y
invitation.revoke                 Y      Y          -              -          -       -
im_identity.list                  Y      Y          Y              Y          Y       Y
im_identity.create                Y      Y          -              -          -       -
im_identity.delete                Y      Y          -              -          -       -
api_key.list                      Y      Y          -              -          Y       -
api_key.retrieve                  Y      Y          -              -          Y       -
api_key.create                    Y      Y          -              -          -       -
api_key.revoke                    Y      Y          -              -          -       -
audit.list                        Y      Y          -              -          Y       -
audit.retrieve                    Y      Y          -              -          Y       -
grant.list                        Y      Y          -              -          Y       -
grant.create                      Y      Y          -              -          -       -
grant.delete                      Y      Y          -              -          -       -
role.list                         Y      Y          Y              Y          Y       Y
"""


def _parse_matrix(text: str) -> dict[tuple[str, str], bool]:
    expected = {}
    for line in text.strip().splitlines():
        action, *marks = line.split()
        assert len(marks) == len(ROLE_COLUMNS), line
        for role, mark in zip(ROLE_COLUMNS, marks, strict=True):
            expected[(action, role)] = mark == "Y"
    return expected


EXPECTED = _parse_matrix(EXPECTED_MATRIX)
ACTIONS = sorted({action for action, _ in EXPECTED})


@dataclass
class Request:
    method: str
    url: str
    data: dict | None = None


@dataclass
class World:
    """Organization A, its owner, and helpers to arrange objects as the owner."""

    org: object
    owner: Member

    @property
    def owner_actor(self):
        return member_actor(self.owner)

    def member(self, **fields) -> Member:
        return MemberFactory(organization=self.org, **fields)


def _invitation(world: World):
    _, invitation, _ = services.member_invite(actor=world.owner_actor, email="invitee@acme.test")
    return invitation


def _api_key(world: World) -> ApiKey:
    key, _ = services.api_key_create(actor=world.owner_actor, name="ci", scopes=["org:read"])
    return key


def _audit_event_id(world: World) -> int:
    from cadre.governance.models import AuditEvent

    services.department_create(actor=world.owner_actor, name="Audited")
    return AuditEvent.objects.filter(organization=world.org).order_by("-sequence").first().pk


def _grant_id(world: World) -> int:
    department = DepartmentFactory(organization=world.org)
    member = world.member()
    services.object_grant(
        actor=world.owner_actor, member=member, permission="member.manage", target=department
    )
    return UserObjectPermission.objects.get(user=member.user, object_pk=str(department.pk)).pk


BUILDERS: dict[str, Callable[[World], Request]] = {
    "organization.view": lambda w: Request("get", "/api/v1/organization/"),
    "organization.update": lambda w: Request("patch", "/api/v1/organization/", {"name": "Acme2"}),
    "department.list": lambda w: Request("get", "/api/v1/departments/"),
    "department.retrieve": lambda w: Request(
        "get", f"/api/v1/departments/{DepartmentFactory(organization=w.org).pk}/"
    ),
    "department.create": lambda w: Request("post", "/api/v1/departments/", {"name": "Sales"}),
    "department.update": lambda w: Request(
        "patch",
        f"/api/v1/departments/{DepartmentFactory(organization=w.org).pk}/",
        {"name": "Renamed"},
    ),
    "department.archive": lambda w: Request(
        "delete", f"/api/v1/departments/{DepartmentFactory(organization=w.org).pk}/"
    ),
    "position.list": lambda w: Request("get", "/api/v1/positions/"),
    "position.retrieve": lambda w: Request(
        "get", f"/api/v1/positions/{PositionFactory(organization=w.org).pk}/"
    ),
    "position.create": lambda w: Request("post", "/api/v1/positions/", {"name": "Key accounts"}),
    "position.update": lambda w: Request(
        "patch",
        f"/api/v1/positions/{PositionFactory(organization=w.org).pk}/",
        {"description": "Sells"},
    ),
    "position.archive": lambda w: Request(
        "delete", f"/api/v1/positions/{PositionFactory(organization=w.org).pk}/"
    ),
    "member.list": lambda w: Request("get", "/api/v1/members/"),
    "member.retrieve": lambda w: Request("get", f"/api/v1/members/{w.member().pk}/"),
    "member.create": lambda w: Request("post", "/api/v1/members/", {"display_name": "Dora"}),
    "member.invite": lambda w: Request(
        "post", "/api/v1/members/invite/", {"email": "eve@acme.test"}
    ),
    "member.update": lambda w: Request(
        "patch", f"/api/v1/members/{w.member().pk}/", {"title": "Lead"}
    ),
    "member.deactivate": lambda w: Request(
        "post", f"/api/v1/members/{w.member().pk}/deactivate/", {}
    ),
    "member.reactivate": lambda w: Request(
        "post", f"/api/v1/members/{w.member(status='deactivated').pk}/reactivate/", {}
    ),
    "member.role_change": lambda w: Request(
        "patch", f"/api/v1/members/{w.member().pk}/", {"roles": ["employee", "auditor"]}
    ),
    "member.owner_role_grant": lambda w: Request(
        "patch", f"/api/v1/members/{w.member().pk}/", {"roles": ["owner"]}
    ),
    "member.owner_role_remove": lambda w: Request(
        "patch", f"/api/v1/members/{w.member(roles=['owner']).pk}/", {"roles": ["employee"]}
    ),
    "invitation.list": lambda w: Request("get", "/api/v1/invitations/"),
    "invitation.revoke": lambda w: Request(
        "post", f"/api/v1/invitations/{_invitation(w).pk}/revoke/", {}
    ),
    "im_identity.list": lambda w: Request("get", "/api/v1/im-identities/"),
    "im_identity.create": lambda w: Request(
        "post",
        "/api/v1/im-identities/",
        {"member": w.member().pk, "platform": "slack", "platform_user_id": "U123"},
    ),
    "im_identity.delete": lambda w: Request(
        "delete", f"/api/v1/im-identities/{IMIdentityFactory(member=w.member()).pk}/"
    ),
    "api_key.list": lambda w: Request("get", "/api/v1/api-keys/"),
    "api_key.retrieve": lambda w: Request("get", f"/api/v1/api-keys/{_api_key(w).pk}/"),
    "api_key.create": lambda w: Request(
        "post", "/api/v1/api-keys/", {"name": "mine", "scopes": ["hub:read"]}
    ),
    "api_key.revoke": lambda w: Request("delete", f"/api/v1/api-keys/{_api_key(w).pk}/"),
    "audit.list": lambda w: Request("get", "/api/v1/audit-events/"),
    "audit.retrieve": lambda w: Request("get", f"/api/v1/audit-events/{_audit_event_id(w)}/"),
    "grant.list": lambda w: Request("get", "/api/v1/grants/"),
    "grant.create": lambda w: Request(
        "post",
        "/api/v1/grants/",
        {
            "member": w.member().pk,
            "permission": "member.manage",
            "target_type": "department",
            "target_id": DepartmentFactory(organization=w.org).pk,
        },
    ),
    "grant.delete": lambda w: Request("delete", f"/api/v1/grants/{_grant_id(w)}/"),
    "role.list": lambda w: Request("get", "/api/v1/roles/"),
}


def test_every_matrix_action_has_a_request_builder():
    assert set(BUILDERS) == set(ACTIONS)


@pytest.mark.parametrize("role", ROLE_COLUMNS)
@pytest.mark.parametrize("action", ACTIONS)
def test_role_is_allowed_or_denied_as_documented(
    action, role, org_a, alice, make_member, client_for
):
    world = World(org=org_a, owner=alice)
    request = BUILDERS[action](world)
    acting = make_member(roles=[role])
    client = client_for(acting)
    response = getattr(client, request.method)(request.url, request.data, format="json")
    if EXPECTED[(action, role)]:
        assert 200 <= response.status_code < 300, (action, role, response.content)
    else:
        assert response.status_code == 403, (action, role, response.content)
        assert response.json()["error"]["code"] == "permission_denied"


# --- API keys: scopes and the creator's role cap -------------------------------------------


def test_key_with_only_org_read_cannot_create_a_department(alice, key_client):
    client = key_client(alice, ["org:read"])
    assert client.get("/api/v1/departments/").status_code == 200
    with nothing_changes(Department):
        response = client.post("/api/v1/departments/", {"name": "Sales"}, format="json")
    assert response.status_code == 403


def test_key_with_org_write_can_create_a_department(alice, key_client):
    client = key_client(alice, ["org:read", "org:write"])
    response = client.post("/api/v1/departments/", {"name": "Sales"}, format="json")
    assert response.status_code == 201


def test_key_without_audit_scope_cannot_read_audit_log(alice, key_client):
    client = key_client(alice, ["org:read", "org:write"])
    assert client.get("/api/v1/audit-events/").status_code == 403
    assert key_client(alice, ["audit:read"]).get("/api/v1/audit-events/").status_code == 200


def test_key_loses_permissions_when_its_creator_is_demoted(alice, make_member, key_client):
    admin = make_member(roles=["it_admin"])
    client = key_client(admin, ["org:read", "org:write"])
    assert client.post("/api/v1/departments/", {"name": "A"}, format="json").status_code == 201
    services.member_update(actor=member_actor(alice), member=admin, roles=["employee"])
    assert client.post("/api/v1/departments/", {"name": "B"}, format="json").status_code == 403
    assert client.get("/api/v1/departments/").status_code == 200


def test_key_never_exceeds_creator_role_even_if_scopes_were_stored(org_a, make_member):
    from rest_framework.test import APIClient

    from cadre.tenancy.services import api_key_hash

    employee = make_member(roles=["employee"])
    token = "cadre_abcdef12_" + "x" * 40
    ApiKey.objects.create(
        organization=org_a,
        name="forged",
        prefix="abcdef12",
        key_hash=api_key_hash(token),
        scopes=["org:read", "org:write", "audit:read"],
        created_by=employee,
    )
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert client.get("/api/v1/members/").status_code == 200
    assert client.post("/api/v1/departments/", {"name": "X"}, format="json").status_code == 403
    assert client.get("/api/v1/audit-events/").status_code == 403
    assert client.get("/api/v1/api-keys/").status_code == 403


def test_member_cannot_create_key_with_scopes_beyond_own_role(make_member, client_for):
    auditor = make_member(roles=["auditor"])
    with nothing_changes(ApiKey):
        response = client_for(auditor).post(
            "/api/v1/api-keys/", {"name": "k", "scopes": ["org:write"]}, format="json"
        )
    assert response.status_code == 403


def test_key_cannot_change_roles_even_for_an_owner_creator(alice, bob, key_client):
    client = key_client(alice, ["org:read", "org:write"])
    response = client.patch(f"/api/v1/members/{bob.pk}/", {"roles": ["owner"]}, format="json")
    assert response.status_code == 403
    response = client.post(
        "/api/v1/members/", {"display_name": "Admin", "roles": ["it_admin"]}, format="json"
    )
    assert response.status_code == 403
    bob.refresh_from_db()
    assert bob.roles == ["employee"]
    response = client.post("/api/v1/members/", {"display_name": "Plain"}, format="json")
    assert response.status_code == 201
