"""Every API operation is reachable by an API key with some scope, or is console-only by design."""

from __future__ import annotations

import pytest

from cadre.tenancy.roles import CONSOLE_ONLY_PERMISSIONS, PERMISSIONS, SCOPES
from tests.api.test_cross_tenant import api_routes
from tests.api.test_openapi import _normalise, _openapi_path

# (method, OpenAPI path) -> the permission no scope grants (docs/api.md, "Console-only").
CONSOLE_ONLY_OPERATIONS: dict[tuple[str, str], str] = {
    ("post", "/api/v1/runs/{id}/resume/"): "confirmation.decide",
    ("post", "/api/v1/confirmations/{id}/approve/"): "confirmation.decide",
    ("post", "/api/v1/confirmations/{id}/reject/"): "confirmation.decide",
}


@pytest.fixture
def all_scopes(alice, key_client):
    return key_client(alice, sorted(SCOPES))


def _refused_for_scope(response) -> bool:
    if response.status_code != 403:
        return False
    body = response.json() if response["Content-Type"].startswith("application/json") else {}
    return body.get("error", {}).get("code") == "permission_denied"


def test_every_permission_is_granted_by_a_scope_or_console_only():
    granted = set().union(*(permissions for _, permissions in SCOPES.values()))
    assert set(PERMISSIONS) - granted == set(CONSOLE_ONLY_PERMISSIONS)
    assert not granted & set(CONSOLE_ONLY_PERMISSIONS)


def test_every_operation_is_reachable_with_a_key_or_listed_as_console_only(
    db, alice, all_scopes, client
):
    schema = client.get("/api/schema/", {"format": "json"}).json()
    documented = {
        (method, _normalise(path))
        for path, item in schema["paths"].items()
        for method, operation in item.items()
        if operation.get("security")
    }
    checked, unreachable = set(), {}
    for route in api_routes():
        path = _normalise(_openapi_path(route.route))
        for method in sorted(route.methods):
            checked.add((method, path))
            response = getattr(all_scopes, method)(route.url_for(alice), {}, format="json")
            if _refused_for_scope(response):
                unreachable[(method, path)] = response.json()["error"]["message"]
    assert documented <= checked, sorted(documented - checked)
    listed = {(method, _normalise(path)) for method, path in CONSOLE_ONLY_OPERATIONS}
    assert set(unreachable) == listed, {
        "not reachable and not listed": {k: v for k, v in unreachable.items() if k not in listed},
        "listed but reachable": sorted(listed - set(unreachable)),
    }


def test_a_key_mints_keys_only_within_its_own_scopes(alice, key_client):
    from cadre.tenancy.models import ApiKey

    minter = key_client(alice, ["keys:write", "org:read"])
    before = ApiKey.objects.count()
    wider = minter.post(
        "/api/v1/api-keys/", {"name": "wider", "scopes": ["org:read", "org:write"]}, format="json"
    )
    assert wider.status_code == 403, wider.content
    assert ApiKey.objects.count() == before
    narrower = minter.post(
        "/api/v1/api-keys/", {"name": "narrower", "scopes": ["org:read"]}, format="json"
    )
    assert narrower.status_code == 201, narrower.content
    made = ApiKey.objects.get(pk=narrower.json()["id"])
    assert made.scopes == ["org:read"]
    assert made.created_by == alice


def test_a_key_cannot_revoke_a_key_with_more_scopes(alice, key_client):
    from cadre.tenancy.models import ApiKey

    minter = key_client(alice, ["keys:write"])
    stronger = key_client(alice, ["keys:write", "org:write"])
    target = ApiKey.objects.get(prefix=stronger.secret.split("_")[1])
    response = minter.delete(f"/api/v1/api-keys/{target.pk}/")
    assert response.status_code == 403, response.content
    target.refresh_from_db()
    assert target.revoked_at is None
    assert stronger.get("/api/v1/api-keys/").status_code == 200


def test_a_key_made_by_a_key_expires_no_later_than_it(alice):
    from datetime import timedelta

    from django.utils import timezone
    from rest_framework.test import APIClient

    from cadre.tenancy import services
    from cadre.tenancy.actors import member_actor
    from cadre.tenancy.models import ApiKey

    limit = timezone.now() + timedelta(days=1)
    _, secret = services.api_key_create(
        actor=member_actor(alice), name="expiring", scopes=["keys:write"], expires_at=limit
    )
    minter = APIClient()
    minter.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    before = ApiKey.objects.count()
    forever = minter.post(
        "/api/v1/api-keys/", {"name": "forever", "scopes": ["keys:write"]}, format="json"
    )
    assert forever.status_code == 400, forever.content
    assert forever.json()["error"]["details"]["expires_at"]
    later = (limit + timedelta(hours=1)).isoformat()
    too_late = minter.post(
        "/api/v1/api-keys/",
        {"name": "later", "scopes": ["keys:write"], "expires_at": later},
        format="json",
    )
    assert too_late.status_code == 400, too_late.content
    assert ApiKey.objects.count() == before
    sooner = (limit - timedelta(hours=1)).isoformat()
    ok = minter.post(
        "/api/v1/api-keys/",
        {"name": "sooner", "scopes": ["keys:write"], "expires_at": sooner},
        format="json",
    )
    assert ok.status_code == 201, ok.content
