"""Brute force: sign-in locks per account and per address (django-axes), their audit trail
and an admin's unlock; API throttling of failed authentication and per-key rates."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.contrib.sessions.models import Session
from django.test import Client, override_settings
from django.urls import reverse
from rest_framework.test import APIClient

from cadre.governance.models import AuditEvent
from tests.conftest import PASSWORD
from tests.refusals import nothing_changes

LOGIN = "console:login"
LIMIT = settings.AXES_FAILURE_LIMIT


def _sign_in(client: Client, email: str, password: str, address: str = "10.0.0.1"):
    return client.post(
        reverse(LOGIN), {"username": email, "password": password}, REMOTE_ADDR=address
    )


def _fail(times: int, email: str, address: str = "10.0.0.1") -> None:
    for _ in range(times):
        response = _sign_in(Client(), email, "wrong-password", address)
        assert response.status_code in {200, 429}


def test_ten_wrong_passwords_lock_the_account_even_for_the_right_one(alice):
    _fail(LIMIT - 1, "alice@acme.test")
    assert not AuditEvent.objects.filter(action="member.signin_lock").exists()
    _fail(1, "alice@acme.test")

    client = Client()
    response = _sign_in(client, "alice@acme.test", PASSWORD)

    assert response.status_code == 429
    assert 1 <= int(response["Retry-After"]) <= 15 * 60
    page = response.content.decode()
    assert "Too many failed sign-in attempts" in page
    assert "locked for about 15 minutes" in page
    assert Session.objects.count() == 0  # no session was created, signed in or not
    assert client.get(reverse("console:home")).status_code == 302  # still signed out

    event = AuditEvent.objects.get(action="member.signin_lock")
    assert event.organization_id == alice.organization_id
    assert event.target_id == str(alice.pk)
    assert event.changes["after"]["locked"] == ["account", "address"]
    assert event.changes["after"]["failures"] == LIMIT


def test_a_lock_is_audited_once_however_many_attempts_follow(alice):
    _fail(LIMIT + 5, "alice@acme.test")
    assert AuditEvent.objects.filter(action="member.signin_lock").count() == 1


def test_email_case_does_not_give_fresh_attempts(alice):
    _fail(LIMIT, "ALICE@acme.test", address="10.0.0.7")
    with nothing_changes(Session):
        assert _sign_in(Client(), "alice@acme.test", PASSWORD, "10.0.0.8").status_code == 429


def test_the_lock_is_per_account_and_per_address(alice, bob):
    _fail(LIMIT, "alice@acme.test", address="10.0.0.1")

    # The same account from another address: the account is locked.
    assert _sign_in(Client(), "alice@acme.test", PASSWORD, "10.0.0.2").status_code == 429
    # Another account from the locked address: the address is locked.
    assert _sign_in(Client(), "bob@acme.test", PASSWORD, "10.0.0.1").status_code == 429
    assert Session.objects.count() == 0
    # Another account from another address is unaffected.
    fresh = Client()
    assert _sign_in(fresh, "bob@acme.test", PASSWORD, "10.0.0.3").status_code == 302
    assert fresh.get(reverse("console:home")).status_code == 200


def test_an_address_spraying_many_accounts_is_locked(alice, bob, make_member):
    for index in range(LIMIT):
        _sign_in(Client(), f"nobody{index}@acme.test", "guess", "10.9.9.9")
    assert _sign_in(Client(), "bob@acme.test", PASSWORD, "10.9.9.9").status_code == 429
    assert _sign_in(Client(), "bob@acme.test", PASSWORD, "10.9.9.10").status_code == 302


def test_admin_unlocks_in_the_console_and_the_member_signs_in(alice, bob, browser):
    _fail(LIMIT, "bob@acme.test")
    admin = browser(alice)
    page = admin.get(reverse("console:member", args=[bob.pk])).content.decode()
    assert "Signing in is locked until" in page and "Unlock sign-in" in page

    response = admin.post(reverse("console:member_signin_unlock", args=[bob.pk]))
    assert response.status_code == 302
    assert "Signing in is locked" not in admin.get(response["Location"]).content.decode()

    client = Client()
    assert _sign_in(client, "bob@acme.test", PASSWORD).status_code == 302
    assert client.get(reverse("console:home")).status_code == 200
    event = AuditEvent.objects.get(action="member.signin_unlock")
    assert event.actor_type == "member" and event.actor_id == str(alice.pk)


def test_employee_cannot_unlock(alice, bob, browser):
    _fail(LIMIT, "alice@acme.test")
    response = browser(bob).post(reverse("console:member_signin_unlock", args=[alice.pk]))
    assert response.status_code in {403, 404}
    assert not AuditEvent.objects.filter(action="member.signin_unlock").exists()
    with nothing_changes(Session):
        assert _sign_in(Client(), "alice@acme.test", PASSWORD, "10.1.1.1").status_code == 429


def test_admin_unlocks_through_the_api(alice, bob, key_client):
    _fail(LIMIT, "bob@acme.test")
    api = key_client(alice, ["org:read", "org:write"])
    state = api.get(f"/api/v1/members/{bob.pk}/sign-in-lock/").json()
    assert state["locked"] is True and state["failures"] == LIMIT and state["locked_until"]

    response = api.post(f"/api/v1/members/{bob.pk}/sign-in-lock/unlock/")
    assert response.status_code == 200, response.content
    assert response.json() == {"locked": False, "failures": 0, "locked_until": None}
    assert AuditEvent.objects.filter(action="member.signin_unlock", target_id=str(bob.pk)).exists()
    assert _sign_in(Client(), "bob@acme.test", PASSWORD).status_code == 302


def test_outsider_cannot_see_or_unlock_another_orgs_member(bob, charlie, key_client):
    api = key_client(charlie, ["org:read", "org:write"])
    assert api.get(f"/api/v1/members/{bob.pk}/sign-in-lock/").status_code == 404
    with nothing_changes():
        assert api.post(f"/api/v1/members/{bob.pk}/sign-in-lock/unlock/").status_code == 404


# --- API -----------------------------------------------------------------------------------


def _bearer(secret: str, address: str) -> APIClient:
    client = APIClient(REMOTE_ADDR=address)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client


def test_wrong_api_keys_get_429_with_retry_after(alice, key_client):
    valid = key_client(alice, ["org:read"]).secret
    prefix = valid.split("_")[1]
    statuses = []
    for index in range(300):
        response = _bearer(f"cadre_{prefix}_wrong{index:04d}", "10.2.0.1").get("/api/v1/members/")
        statuses.append(response.status_code)
    assert set(statuses) == {401, 429}
    limit = int(settings.CADRE_API_THROTTLE_RATES["auth_failure"].split("/")[0])
    assert statuses.index(429) == limit
    last = _bearer("cadre_abcdefgh_wrong", "10.2.0.1").get("/api/v1/members/")
    assert last.status_code == 429
    assert int(last["Retry-After"]) >= 1
    body = last.json()["error"]
    assert body["code"] == "throttled" and body["details"]["retry_after"] >= 1

    # The blocked address may not try keys at all, a valid one neither ...
    assert _bearer(valid, "10.2.0.1").get("/api/v1/members/").status_code == 429
    # ... while the same valid key from elsewhere, within its rate, is unaffected.
    for _ in range(20):
        assert _bearer(valid, "10.2.0.2").get("/api/v1/members/").status_code == 200


def test_unauthenticated_requests_are_throttled_too(db):
    statuses = [
        APIClient(REMOTE_ADDR="10.3.0.1").get("/api/v1/members/").status_code for _ in range(40)
    ]
    assert statuses[0] == 401 and statuses[-1] == 429
    assert APIClient(REMOTE_ADDR="10.3.0.2").get("/api/v1/members/").status_code == 401


@override_settings(
    CADRE_API_THROTTLE_RATES={**settings.CADRE_API_THROTTLE_RATES, "api_key": "5/minute"}
)
def test_each_key_has_its_own_rate(alice, key_client):
    first = key_client(alice, ["org:read"])
    second = key_client(alice, ["org:read"])
    assert [first.get("/api/v1/members/").status_code for _ in range(5)] == [200] * 5
    refused = first.get("/api/v1/members/")
    assert refused.status_code == 429 and int(refused["Retry-After"]) >= 1
    assert refused.json()["error"]["code"] == "throttled"
    assert second.get("/api/v1/members/").status_code == 200


@pytest.mark.parametrize("rate", ["600/minute", "20/5m", "1000/day", "3/s"])
def test_rate_syntax(rate):
    from cadre.api.throttles import parse_rate

    count, seconds = parse_rate(rate)
    assert count > 0 and seconds > 0


@pytest.mark.parametrize("rate", ["", "fast", "0/minute", "10/week", "ten/minute"])
def test_bad_rates_are_refused(rate):
    from cadre.api.throttles import parse_rate

    with pytest.raises(ValueError, match="not a rate"):
        parse_rate(rate)
