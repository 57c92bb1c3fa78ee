"""API keys: hashed at rest, shown once, revocable, expiring, tied to an active creator."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test import override_settings
from django.utils import timezone
from rest_framework.test import APIClient

from cadre.tenancy import services
from cadre.tenancy.actors import member_actor
from cadre.tenancy.models import ApiKey
from tests.refusals import nothing_changes


def bearer(secret: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client


def test_created_key_secret_is_shown_once_and_works(alice, client_for):
    client = client_for(alice)
    response = client.post(
        "/api/v1/api-keys/", {"name": "CI", "scopes": ["org:read"]}, format="json"
    )
    assert response.status_code == 201
    body = response.json()
    secret = body["secret"]
    assert secret.startswith(f"cadre_{body['prefix']}_")
    assert bearer(secret).get("/api/v1/members/").status_code == 200

    listed = client.get("/api/v1/api-keys/").json()["results"]
    assert listed and all("secret" not in row for row in listed)
    detail = client.get(f"/api/v1/api-keys/{body['id']}/").json()
    assert "secret" not in detail and "key_hash" not in detail
    assert secret not in str(listed) + str(detail)


def test_secret_is_hashed_at_rest(alice):
    key, secret = services.api_key_create(actor=member_actor(alice), name="k", scopes=["org:read"])
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM tenancy_apikey WHERE id = %s", [key.pk])
        row = cursor.fetchone()
    stored = " ".join(str(value) for value in row)
    token_part = secret.split("_", 2)[2]
    assert secret not in stored and token_part not in stored
    assert key.key_hash == services.api_key_hash(secret) and len(key.key_hash) == 64


def test_revoked_key_is_rejected_with_401(alice, client_for):
    key, secret = services.api_key_create(actor=member_actor(alice), name="k", scopes=["org:read"])
    assert bearer(secret).get("/api/v1/members/").status_code == 200
    response = client_for(alice).delete(f"/api/v1/api-keys/{key.pk}/")
    assert response.status_code == 200
    assert response.json()["state"] == "revoked"
    response = bearer(secret).get("/api/v1/members/")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "authentication_failed"
    assert "revoked" in response.json()["error"]["message"]
    assert ApiKey.objects.filter(pk=key.pk).exists()


def test_revoking_twice_is_a_conflict(alice, client_for):
    key, _ = services.api_key_create(actor=member_actor(alice), name="k", scopes=["org:read"])
    client = client_for(alice)
    client.delete(f"/api/v1/api-keys/{key.pk}/")
    with nothing_changes(key):
        assert client.delete(f"/api/v1/api-keys/{key.pk}/").status_code == 409


def test_expired_key_is_rejected_with_401(alice):
    key, secret = services.api_key_create(
        actor=member_actor(alice),
        name="k",
        scopes=["org:read"],
        expires_at=timezone.now() + timedelta(hours=1),
    )
    assert bearer(secret).get("/api/v1/members/").status_code == 200
    ApiKey.objects.filter(pk=key.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    response = bearer(secret).get("/api/v1/members/")
    assert response.status_code == 401
    assert "expired" in response.json()["error"]["message"]


def test_key_expiry_must_be_in_the_future(alice, client_for):
    response = client_for(alice).post(
        "/api/v1/api-keys/",
        {
            "name": "k",
            "scopes": ["org:read"],
            "expires_at": (timezone.now() - timedelta(days=1)).isoformat(),
        },
        format="json",
    )
    assert response.status_code == 400
    assert "expires_at" in response.json()["error"]["details"]


def test_last_used_at_is_recorded_on_use(alice):
    key, secret = services.api_key_create(actor=member_actor(alice), name="k", scopes=["org:read"])
    assert key.last_used_at is None
    bearer(secret).get("/api/v1/members/", REMOTE_ADDR="198.51.100.4")
    key.refresh_from_db()
    assert key.last_used_at is not None
    assert key.last_used_ip == "198.51.100.4"


@override_settings(CADRE_API_KEY_LAST_USED_INTERVAL=3600)
def test_last_used_at_is_written_at_most_once_per_interval(alice):
    key, secret = services.api_key_create(actor=member_actor(alice), name="k", scopes=["org:read"])
    bearer(secret).get("/api/v1/members/")
    key.refresh_from_db()
    first = key.last_used_at
    bearer(secret).get("/api/v1/members/")
    key.refresh_from_db()
    assert key.last_used_at == first


def test_deactivated_creators_key_is_revoked_at_once_and_stays_revoked(alice, make_member):
    admin = make_member(roles=["it_admin"])
    key, secret = services.api_key_create(actor=member_actor(admin), name="k", scopes=["org:read"])
    assert bearer(secret).get("/api/v1/members/").status_code == 200
    services.member_deactivate(actor=member_actor(alice), member=admin)
    response = bearer(secret).get("/api/v1/members/")
    assert response.status_code == 401
    assert "revoked" in response.json()["error"]["message"]
    # Reactivation does not bring back a key that may have leaked while they were gone.
    services.member_reactivate(actor=member_actor(alice), member=admin)
    key.refresh_from_db()
    assert key.revoked_at is not None
    assert bearer(secret).get("/api/v1/members/").status_code == 401


def test_key_of_a_suspended_organization_is_rejected(org_a, alice):
    _, secret = services.api_key_create(actor=member_actor(alice), name="k", scopes=["org:read"])
    org_a.status = "suspended"
    org_a.save(update_fields=["status"])
    assert bearer(secret).get("/api/v1/members/").status_code == 401


@pytest.mark.parametrize(
    "header",
    [
        "Bearer nonsense",
        "Bearer ",
        "Bearer cadre_",
        "Bearer cadre_abc_def",
        "Bearer cadre_zzzzzzzz_secret",
        "Bearer cadre_\x00\x00\x00\x00\x00\x00\x00\x00_secret",
        "Bearer cadre_abcdef12_",
        "Bearer cadre_abcdef12_" + "x" * 5000,
        "Bearer cadre_abcdef12_wrongsecret",
        "Bearer cadre_abcdef12_bad\tsecret",
    ],
)
def test_malformed_or_unknown_keys_get_401(alice, header):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)
    response = client.get("/api/v1/members/")
    assert response.status_code == 401, header
    assert set(response.json()["error"]) == {"code", "message", "details"}
    assert response["WWW-Authenticate"] == "Bearer"


def test_a_valid_prefix_with_the_wrong_secret_is_401(alice):
    key, secret = services.api_key_create(actor=member_actor(alice), name="k", scopes=["org:read"])
    forged = f"cadre_{key.prefix}_{'A' * 43}"
    assert forged != secret
    assert bearer(forged).get("/api/v1/members/").status_code == 401


def test_no_credentials_is_401(db):
    response = APIClient().get("/api/v1/members/")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"


def test_keys_without_keys_write_cannot_create_keys(alice, key_client):
    client = key_client(alice, ["org:read", "org:write"])
    with nothing_changes(ApiKey):
        response = client.post(
            "/api/v1/api-keys/", {"name": "k2", "scopes": ["org:read"]}, format="json"
        )
    assert response.status_code == 403


def test_unknown_or_empty_scopes_are_400(alice, client_for):
    client = client_for(alice)
    for scopes in ([], ["root"], "org:read", None):
        response = client.post("/api/v1/api-keys/", {"name": "k", "scopes": scopes}, format="json")
        assert response.status_code == 400, scopes
        assert "scopes" in response.json()["error"]["details"]
