"""Hot list endpoints run a bounded number of queries, however many rows they return."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from cadre.governance import audit
from cadre.tenancy import services
from cadre.tenancy.actors import member_actor
from tests.factories import DepartmentFactory, IMIdentityFactory, MemberFactory, PositionFactory


def _populate_members(org, count: int) -> None:
    departments = [DepartmentFactory(organization=org) for _ in range(3)]
    positions = [PositionFactory(organization=org) for _ in range(3)]
    for n in range(count):
        member = MemberFactory(organization=org, department=departments[n % 3])
        member.positions.set(positions[: 1 + n % 3])
        IMIdentityFactory(member=member)


def _queries(client, url: str) -> int:
    client.get(url)  # warm up: the first request stores the session's organization
    with CaptureQueriesContext(connection) as context:
        response = client.get(url)
    assert response.status_code == 200
    return len(context.captured_queries)


def test_members_list_query_count_does_not_grow_with_members(
    org_a, alice, client_for, django_assert_max_num_queries
):
    client = client_for(alice)
    _populate_members(org_a, 5)
    few = _queries(client, "/api/v1/members/")
    _populate_members(org_a, 40)
    many = _queries(client, "/api/v1/members/")
    assert many == few
    with django_assert_max_num_queries(8):
        response = client.get("/api/v1/members/")
    assert response.json()["count"] == 46
    rows = [row for row in response.json()["results"] if row["id"] != alice.pk]
    assert all(row["positions"] and row["im_identities"] for row in rows)


@pytest.mark.parametrize(
    "url",
    [
        "/api/v1/departments/",
        "/api/v1/positions/",
        "/api/v1/im-identities/",
        "/api/v1/api-keys/",
        "/api/v1/invitations/",
        "/api/v1/audit-events/",
        "/api/v1/grants/",
    ],
)
def test_list_endpoints_query_count_does_not_grow_with_rows(org_a, alice, client_for, url):
    client = client_for(alice)
    owner = member_actor(alice)

    def add(batch: int) -> None:
        for n in range(batch):
            department = DepartmentFactory(organization=org_a)
            PositionFactory(organization=org_a)
            member = MemberFactory(organization=org_a, department=department)
            IMIdentityFactory(member=member)
            services.api_key_create(actor=owner, name=f"k{n}", scopes=["org:read"])
            services.member_invite(actor=owner, email=f"inv{department.pk}@acme.test")
            services.object_grant(
                actor=owner, member=member, permission="member.manage", target=department
            )
            audit.record(actor=owner, action="test.row")

    add(2)
    few = _queries(client, url)
    add(6)
    many = _queries(client, url)
    assert many == few, (url, few, many)
