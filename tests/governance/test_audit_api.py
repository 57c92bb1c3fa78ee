"""The audit log API: read-only, for auditors/IT admins/owners, with working filters; and
events made through HTTP carry the request's id, address, user agent and trace id."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from cadre.governance import audit
from cadre.governance.models import AuditEvent
from cadre.tenancy import services
from cadre.tenancy.actors import member_actor, system_actor

URL = "/api/v1/audit-events/"


def test_events_from_http_requests_carry_request_context(org_a, alice, client_for):
    client = client_for(alice)
    response = client.post(
        "/api/v1/departments/",
        {"name": "Sales"},
        format="json",
        HTTP_USER_AGENT="pytest-agent/1.0",
        HTTP_X_REQUEST_ID="req-0123456789abcdef",
        REMOTE_ADDR="203.0.113.7",
    )
    assert response.status_code == 201
    assert response["X-Request-ID"] == "req-0123456789abcdef"
    event = AuditEvent.objects.filter(organization=org_a, action="department.create").get()
    assert event.request_id == "req-0123456789abcdef"
    assert event.ip == "203.0.113.7"
    assert event.user_agent == "pytest-agent/1.0"
    assert len(event.trace_id) == 32 and int(event.trace_id, 16) != 0


def test_request_without_id_gets_a_generated_one_on_its_events(org_a, alice, client_for):
    response = client_for(alice).patch("/api/v1/organization/", {"name": "X"}, format="json")
    assert response.status_code == 200
    event = AuditEvent.objects.filter(organization=org_a, action="organization.update").get()
    assert event.request_id == response["X-Request-ID"]
    assert len(event.request_id) == 32


def test_events_outside_requests_have_no_request_context(org_a):
    event = audit.record(actor=system_actor(org_a), action="test.offline")
    assert (event.request_id, event.ip, event.user_agent) == ("", None, "")


@pytest.mark.parametrize("method", ["post", "put", "patch", "delete"])
def test_audit_api_is_read_only(org_a, alice, client_for, method):
    event = audit.record(actor=member_actor(alice), action="test.read_only")
    client = client_for(alice)
    for url in (URL, f"{URL}{event.pk}/"):
        response = getattr(client, method)(url, {"action": "forged"}, format="json")
        assert response.status_code == 405, (method, url, response.content)
        assert response.json()["error"]["code"] == "method_not_allowed"
    assert AuditEvent.objects.filter(organization=org_a).count() == 1


@pytest.mark.parametrize(
    "role, allowed",
    [
        ("owner", True),
        ("it_admin", True),
        ("auditor", True),
        ("business_admin", False),
        ("skill_reviewer", False),
        ("employee", False),
    ],
)
def test_only_auditors_it_admins_and_owners_read_the_audit_log(
    make_member, client_for, role, allowed, org_a
):
    event = audit.record(actor=system_actor(org_a), action="test.visible")
    client = client_for(make_member(roles=[role]))
    for url in (URL, f"{URL}{event.pk}/"):
        response = client.get(url)
        assert response.status_code == (200 if allowed else 403), (role, url)


def test_audit_list_only_shows_own_organization(org_a, org_b, alice, charlie, client_for):
    audit.record(actor=member_actor(alice), action="test.a")
    audit.record(actor=member_actor(charlie), action="test.b")
    rows = client_for(charlie).get(URL).json()["results"]
    assert [row["action"] for row in rows] == ["test.b"]


def test_audit_events_are_listed_newest_first_with_chain_fields(org_a, alice, client_for):
    for n in range(3):
        audit.record(actor=member_actor(alice), action=f"test.n{n}")
    audit.seal(organization=org_a)
    rows = client_for(alice).get(URL).json()["results"]
    assert [row["sequence"] for row in rows] == [3, 2, 1]
    assert rows[0]["prev_hash"] == rows[1]["hash"]


@pytest.fixture
def history(org_a, alice, bob):
    owner = member_actor(alice)
    department = services.department_create(actor=owner, name="Sales")
    services.department_update(actor=owner, department=department, name="Field sales")
    position = services.position_create(actor=owner, name="Seller")
    services.member_update(actor=owner, member=bob, title="Seller")
    return {"department": department, "position": position}


def _actions(client, **params) -> list[str]:
    response = client.get(URL, params)
    assert response.status_code == 200, response.content
    return [row["action"] for row in response.json()["results"]]


def test_filter_by_action_exact_and_prefix(alice, client_for, history):
    client = client_for(alice)
    assert _actions(client, action="department.create") == ["department.create"]
    assert _actions(client, action="department.") == ["department.update", "department.create"]
    assert _actions(client, action="department") == []


def test_filter_by_target(alice, client_for, history):
    client = client_for(alice)
    department = history["department"]
    assert _actions(client, target_type="department", target_id=department.pk) == [
        "department.update",
        "department.create",
    ]
    assert _actions(client, target_type="position") == ["position.create"]


def test_filter_by_actor(org_a, alice, bob, client_for, history, key_client):
    client = key_client(alice, ["org:read", "org:write", "audit:read"])
    client.post("/api/v1/departments/", {"name": "Via key"}, format="json")
    owner_client = client_for(alice)
    assert _actions(owner_client, actor_type="member", actor_id=alice.pk) == [
        "apikey.create",
        "member.update",
        "position.create",
        "department.update",
        "department.create",
    ]
    key_events = _actions(owner_client, actor_type="api_key")
    assert key_events == ["department.create"]
    assert _actions(owner_client, actor_id=bob.pk) == []


def test_filter_by_time_window(org_a, alice, client_for, history):
    client = client_for(alice)
    now = timezone.now()
    assert len(_actions(client, since=(now - timedelta(minutes=5)).isoformat())) == 4
    assert _actions(client, since=(now + timedelta(minutes=5)).isoformat()) == []
    assert _actions(client, until=(now - timedelta(minutes=5)).isoformat()) == []
    assert len(_actions(client, until=(now + timedelta(minutes=5)).isoformat())) == 4


def test_bad_filter_values_are_400_not_500(alice, client_for, history):
    client = client_for(alice)
    response = client.get(URL, {"since": "yesterday-ish"})
    assert response.status_code == 400
    assert "since" in response.json()["error"]["details"]


def test_audit_event_detail_of_another_org_is_404(org_b, alice, charlie, client_for):
    event = audit.record(actor=member_actor(charlie), action="test.b")
    assert client_for(alice).get(f"{URL}{event.pk}/").status_code == 404
