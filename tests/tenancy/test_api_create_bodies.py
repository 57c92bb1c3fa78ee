"""Every create endpoint of the tenancy API takes JSON, form and multipart bodies alike.

Form and multipart bodies always carry a model's booleans (an absent HTML checkbox is false),
so a view passing validated_data through to a service answered 500 for them (issue 14).
"""

from __future__ import annotations

import itertools

import pytest

from cadre.governance.models import AuditEvent
from cadre.tenancy.models import ApiKey, Department, IMIdentity, Invitation, Member, Position
from tests.api.request_bodies import FORMATS, post_as
from tests.factories import DepartmentFactory, MemberFactory, PositionFactory

_serial = itertools.count()


def _payloads(org):
    n = next(_serial)
    department = DepartmentFactory(organization=org)
    position = PositionFactory(organization=org)
    member = MemberFactory(organization=org)
    return {
        "departments": (
            {"name": f"Sales {n}", "code": f"sales-{n}", "parent": department.pk},
            Department,
            {"name": f"Sales {n}", "parent_id": department.pk, "is_archived": False},
        ),
        "positions": (
            {"name": f"Analyst {n}", "description": "Reads numbers", "department": department.pk},
            Position,
            {"name": f"Analyst {n}", "department_id": department.pk, "is_archived": False},
        ),
        "members": (
            {
                "display_name": f"Dana {n}",
                "email": f"dana{n}@acme.test",
                "title": "Engineer",
                "department": department.pk,
                "positions": [position.pk],
                "roles": ["employee"],
            },
            Member,
            {"display_name": f"Dana {n}", "department_id": department.pk, "title": "Engineer"},
        ),
        "members/invite": (
            {"email": f"erin{n}@acme.test", "display_name": f"Erin {n}", "roles": ["employee"]},
            Invitation,
            {"email": f"erin{n}@acme.test"},
        ),
        "im-identities": (
            {"member": member.pk, "platform": "slack", "platform_user_id": f"U{n:05d}"},
            IMIdentity,
            {"member_id": member.pk, "platform_user_id": f"U{n:05d}"},
        ),
        "api-keys": (
            {"name": f"CI {n}", "scopes": ["org:read", "audit:read"]},
            ApiKey,
            {"name": f"CI {n}"},
        ),
    }


ENDPOINTS = ["departments", "positions", "members", "members/invite", "im-identities", "api-keys"]


@pytest.mark.parametrize("body_format", FORMATS)
@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_create_takes_every_body_format(alice, client_for, endpoint, body_format):
    data, model, expected = _payloads(alice.organization)[endpoint]
    before = AuditEvent.objects.count()

    response = post_as(client_for(alice), f"/api/v1/{endpoint}/", data, body_format)

    assert response.status_code == 201, response.content
    row = model.objects.get(**expected)
    assert row.organization_id == alice.organization_id
    assert AuditEvent.objects.count() > before
    if endpoint == "members":
        assert list(row.positions.values_list("pk", flat=True)) == data["positions"]
        assert row.roles == ["employee"]
    if endpoint == "api-keys":
        assert sorted(row.scopes) == ["audit:read", "org:read"]
        assert response.json()["secret"]


@pytest.mark.parametrize("body_format", FORMATS)
@pytest.mark.parametrize("endpoint", ["departments", "positions"])
def test_a_new_record_cannot_start_archived(alice, client_for, endpoint, body_format):
    model = Department if endpoint == "departments" else Position
    count = model.objects.count()
    response = post_as(
        client_for(alice),
        f"/api/v1/{endpoint}/",
        {"name": "Born archived", "is_archived": "true"},
        body_format,
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid"
    assert "is_archived" in response.json()["error"]["details"]
    assert model.objects.count() == count
