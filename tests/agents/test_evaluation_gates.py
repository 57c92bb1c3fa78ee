"""Evaluation gates: the settings API, and the gates on publishing a template version,
changing a template's model and activating an embedding model — each blocks without a passing
replay of that change and audits an override with its reason."""

from __future__ import annotations

import pytest

from cadre.governance.models import AuditEvent
from cadre.tenancy.models import Organization
from tests.refusals import nothing_changes

pytestmark = pytest.mark.django_db

GATES_URL = "/api/v1/evaluation/gates/"


def _settings(organization) -> dict:
    return Organization.objects.get(pk=organization.pk).settings


def test_gates_are_read_with_template_view_and_set_with_organization_manage(
    alice, bob, charlie, client_for, make_member, org_a
):
    everything_off = {"template_publish": False}
    assert client_for(bob).get(GATES_URL).json() == everything_off
    response = client_for(alice).put(GATES_URL, {"template_publish": True}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["template_publish"] is True
    assert _settings(org_a)["evaluation_gates"]["template_publish"] is True
    event = AuditEvent.objects.get(action="evaluation.gates.update")
    assert (event.actor_type, event.actor_id) == ("member", str(alice.pk))
    # another organization's setting is its own
    assert client_for(charlie).get(GATES_URL).json()["template_publish"] is False
    # an IT admin (no organization.manage) and an employee may read but not set them
    it_admin = make_member(roles=["it_admin"])
    for member in (bob, it_admin):
        with nothing_changes(Organization.objects.get(pk=org_a.pk)):
            refused = client_for(member).put(GATES_URL, {"template_publish": False}, format="json")
        assert refused.status_code == 403
        assert refused.json()["error"]["code"] == "permission_denied"
    assert client_for(it_admin).get(GATES_URL).json()["template_publish"] is True


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"template_publish": "maybe"}, "invalid"),
        ({"release_day": True}, "unknown_gate"),
        ({"template_publish": True, "release_day": True}, "unknown_gate"),
        (["template_publish"], "invalid_gates"),
    ],
)
def test_a_bad_gates_body_is_refused_and_nothing_changes(alice, client_for, org_a, body, code):
    before = _settings(org_a)
    with nothing_changes(Organization.objects.get(pk=org_a.pk)):
        response = client_for(alice).put(GATES_URL, body, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] == code
    assert _settings(org_a) == before


def test_the_gates_api_is_in_the_schema_with_its_serializer(client):
    schema = client.get("/api/schema/", {"format": "json"}).json()
    item = schema["paths"]["/api/v1/evaluation/gates/"]
    assert set(item) >= {"get", "put"}
    ref = item["put"]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    component = schema["components"]["schemas"][ref.rsplit("/", 1)[1]]
    assert "template_publish" in component["properties"]
    assert item["get"]["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
