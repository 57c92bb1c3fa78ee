"""SCIM tokens in the console's organization page: created (shown once), listed, revoked."""

from __future__ import annotations

import pytest

from cadre.governance.models import AuditEvent
from cadre.tenancy import services
from cadre.tenancy.actors import member_actor
from cadre.tenancy.models import ScimToken

pytestmark = pytest.mark.django_db


def test_owner_creates_a_token_shown_once_and_stored_hashed(client_for, alice):
    client = client_for(alice)
    answer = client.post("/organization/scim-tokens/new/", {"name": "Okta"})
    assert answer.status_code == 200 and answer["Cache-Control"] == "no-store"
    token = ScimToken.objects.get(organization=alice.organization)
    secret = answer.context["secret"]
    assert secret.encode() in answer.content and secret != token.token_hash
    assert services.scim_token_resolve(secret) == token
    assert AuditEvent.objects.filter(action="scim_token.create").count() == 1
    page = client.get("/organization/")
    assert token.prefix.encode() in page.content and secret.encode() not in page.content
    assert client.post(f"/organization/scim-tokens/{token.pk}/revoke/").status_code == 302
    assert services.scim_token_resolve(secret) is None


def test_employee_cannot_create_and_outsider_cannot_revoke(client_for, alice, bob, charlie):
    assert client_for(bob).post("/organization/scim-tokens/new/").status_code == 403
    assert not ScimToken.objects.exists()
    token, secret = services.scim_token_create(actor=member_actor(alice))
    answer = client_for(charlie).post(f"/organization/scim-tokens/{token.pk}/revoke/")
    assert answer.status_code == 404
    assert services.scim_token_resolve(secret) == token
