"""API keys pages: the secret is shown exactly once; revocation; scopes are validated."""

from __future__ import annotations

import re

from django.urls import reverse

from cadre.governance.models import AuditEvent
from cadre.tenancy.models import ApiKey

SECRET = re.compile(r"cadre_[0-9a-f]{8}_[A-Za-z0-9_\-]{20,}")


def test_secret_is_shown_once_and_never_again(alice, browser):
    client = browser(alice)
    response = client.post(
        reverse("console:api_key_create"), {"name": "HR sync", "scopes": ["org:read", "org:write"]}
    )
    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"
    match = SECRET.search(response.content.decode())
    assert match, "the new key is on the result page"
    secret = match.group(0)
    key = ApiKey.objects.get(name="HR sync")
    assert secret.split("_")[1] == key.prefix
    assert secret not in key.key_hash

    listing = client.get(reverse("console:api_keys")).content.decode()
    assert "HR sync" in listing
    assert key.prefix in listing
    assert secret not in listing
    assert not SECRET.search(listing)
    assert AuditEvent.objects.filter(action="apikey.create", target_id=str(key.pk)).exists()


def test_the_shown_key_works_against_the_api(alice, browser):
    response = browser(alice).post(
        reverse("console:api_key_create"), {"name": "Reader", "scopes": ["org:read"]}
    )
    secret = SECRET.search(response.content.decode()).group(0)
    from django.test import Client

    api = Client(HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert api.get("/api/v1/members/").status_code == 200


def test_create_without_scopes_is_a_field_error(alice, browser):
    response = browser(alice).post(reverse("console:api_key_create"), {"name": "Nothing"})
    assert response.status_code == 200
    assert "Choose at least one scope." in response.content.decode()
    assert not ApiKey.objects.exists()


def test_expiry_in_the_past_is_refused(alice, browser):
    response = browser(alice).post(
        reverse("console:api_key_create"),
        {
            "name": "Old",
            "scopes": ["org:read"],
            "expires_on": "2001-01-01",
        },
    )
    assert response.status_code == 200
    assert "Choose today or a later date." in response.content.decode()
    assert not ApiKey.objects.exists()


def test_expiry_is_stored_at_the_end_of_the_day(alice, browser):
    browser(alice).post(
        reverse("console:api_key_create"),
        {
            "name": "Temp",
            "scopes": ["org:read"],
            "expires_on": "2099-06-30",
        },
    )
    key = ApiKey.objects.get(name="Temp")
    assert key.expires_at.date().isoformat() == "2099-06-30"
    assert key.expires_at.hour == 23


def test_scope_beyond_creators_permissions_is_refused(make_member, browser):
    # An IT admin has every permission except organization.manage, so every scope is allowed;
    # an auditor may view keys but not manage them, so cannot create any.
    auditor = make_member(roles=["auditor"])
    response = browser(auditor).post(
        reverse("console:api_key_create"), {"name": "Mine", "scopes": ["audit:read"]}
    )
    assert response.status_code == 403
    assert not ApiKey.objects.exists()


def test_revoke_asks_then_revokes(alice, browser):
    client = browser(alice)
    client.post(reverse("console:api_key_create"), {"name": "CI", "scopes": ["hub:read"]})
    key = ApiKey.objects.get(name="CI")
    confirm = client.get(reverse("console:api_key_revoke", args=[key.pk]))
    assert confirm.status_code == 200
    assert "Revoke the key" in confirm.content.decode()
    key.refresh_from_db()
    assert key.revoked_at is None
    assert client.post(reverse("console:api_key_revoke", args=[key.pk])).status_code == 302
    key.refresh_from_db()
    assert key.state == "revoked"
    assert AuditEvent.objects.filter(action="apikey.revoke").exists()
    # Revoking twice shows the service's message rather than failing.
    again = client.post(reverse("console:api_key_revoke", args=[key.pk]))
    assert again.status_code == 409
    assert "already revoked" in again.content.decode()


def test_empty_state_when_there_are_no_keys(alice, browser):
    page = browser(alice).get(reverse("console:api_keys")).content.decode()
    assert "No API keys yet" in page


def test_outsider_cannot_revoke(alice, charlie, browser):
    browser(alice).post(reverse("console:api_key_create"), {"name": "A", "scopes": ["hub:read"]})
    key = ApiKey.objects.get(name="A")
    assert (
        browser(charlie).post(reverse("console:api_key_revoke", args=[key.pk])).status_code == 404
    )
    key.refresh_from_db()
    assert key.revoked_at is None
