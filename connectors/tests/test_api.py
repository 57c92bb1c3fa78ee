"""The connectors management API: owners/IT admins only, credentials write-only, callback URL
shown, bindings scoped to the organization, and the unmapped-user queue readable."""

from __future__ import annotations

import pytest

from connectors.models import Connector, UnmappedIdentity
from tests.factories import PositionFactory
from tests.refusals import nothing_changes

pytestmark = pytest.mark.django_db

SECRET = "whsec-0123456789abcdef"


def _create(client, **overrides):
    body = {"platform": "webhook", "name": "ERP", "credentials": {"signing_secret": SECRET}}
    return client.post("/api/v1/connectors/", body | overrides, format="json")


def test_owner_creates_a_connector_and_never_sees_its_credentials(alice, client_for):
    client = client_for(alice)
    response = _create(client)
    assert response.status_code == 201, response.content
    body = response.json()
    assert SECRET not in response.content.decode()
    assert body["callback_url"].endswith(f"/connectors/webhook/{body['public_id']}/events")
    connector = Connector.objects.get(pk=body["id"])
    assert connector.credentials == {"signing_secret": SECRET}
    listed = client.get("/api/v1/connectors/").content.decode()
    assert body["public_id"] in listed and SECRET not in listed


def test_credentials_must_fit_the_platform(alice, client_for):
    response = _create(client_for(alice), credentials={"token": "x"})
    assert response.status_code == 400
    details = response.json()["error"]["details"]
    assert "signing_secret" in details and "token" in details
    assert not Connector.objects.exists()


def test_rotating_credentials_replaces_them_and_is_audited_without_them(alice, client_for):
    from cadre.governance.models import AuditEvent

    client = client_for(alice)
    connector_id = _create(client).json()["id"]
    response = client.post(
        f"/api/v1/connectors/{connector_id}/rotate-credentials/",
        {"credentials": {"signing_secret": "rotated-secret-987654"}},
        format="json",
    )
    assert response.status_code == 200
    assert Connector.objects.get(pk=connector_id).credentials["signing_secret"] == (
        "rotated-secret-987654"
    )
    event = AuditEvent.objects.get(action="connector.rotate_credentials")
    assert "rotated-secret" not in str(event.changes)


def test_employees_cannot_read_or_change_connectors(alice, bob, client_for):
    connector_id = _create(client_for(alice)).json()["id"]
    client = client_for(bob)
    assert client.get("/api/v1/connectors/").status_code == 403
    assert client.get(f"/api/v1/connectors/{connector_id}/").status_code == 403
    with nothing_changes(Connector):
        assert _create(client, name="mine").status_code == 403


def test_bindings_accept_only_own_organization_objects(alice, charlie, client_for):
    client = client_for(alice)
    connector_id = _create(client).json()["id"]
    sales = PositionFactory(organization=alice.organization)
    ok = client.post(
        "/api/v1/connector-bindings/",
        {"connector": connector_id, "positions": [sales.pk], "chat_ids": ["oc_1"]},
        format="json",
    )
    assert ok.status_code == 201, ok.content
    foreign = PositionFactory(organization=charlie.organization)
    refused = client.post(
        "/api/v1/connector-bindings/",
        {"connector": connector_id, "positions": [foreign.pk]},
        format="json",
    )
    assert refused.status_code == 400
    assert client.delete(f"/api/v1/connector-bindings/{ok.json()['id']}/").status_code == 204


def test_unmapped_queue_lists_platform_users_without_a_member(alice, client_for):
    client = client_for(alice)
    connector = Connector.objects.get(pk=_create(client).json()["id"])
    UnmappedIdentity.objects.create(
        organization=alice.organization, connector=connector, platform_user_id="ou_42"
    )
    rows = client.get("/api/v1/unmapped-identities/").json()["results"]
    assert [row["platform_user_id"] for row in rows] == ["ou_42"]


def test_unmapped_queue_filter_leaves_out_resolved_users(alice, client_for):
    from django.utils import timezone

    client = client_for(alice)
    connector = Connector.objects.get(pk=_create(client).json()["id"])
    for user, resolved in (("ou_waiting", None), ("ou_mapped", timezone.now())):
        UnmappedIdentity.objects.create(
            organization=alice.organization,
            connector=connector,
            platform_user_id=user,
            resolved_at=resolved,
        )

    def users(query: str) -> list[str]:
        rows = client.get(f"/api/v1/unmapped-identities/{query}").json()["results"]
        return sorted(row["platform_user_id"] for row in rows)

    assert users("?waiting=true") == ["ou_waiting"]
    assert users("?waiting=false") == ["ou_mapped"]
    assert users("") == ["ou_mapped", "ou_waiting"]
