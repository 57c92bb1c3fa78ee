"""SCIM provisioning tokens: `scim_<prefix>_<secret>`, shown once, stored as a hash, revocable."""

from __future__ import annotations

import hmac
import secrets

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from cadre.errors import Conflict
from cadre.governance import audit
from cadre.tenancy.actors import Actor
from cadre.tenancy.models import Organization, ScimToken
from cadre.tenancy.services.common import hash_token

SCIM_TOKEN_PREFIX = "scim"
_HEX = frozenset("0123456789abcdef")


@transaction.atomic
def scim_token_create(*, actor: Actor, name: str = "") -> tuple[ScimToken, str]:
    """Create a token for the actor's organization; the secret is returned here only."""
    actor.require("apikey.manage")
    prefix = secrets.token_hex(4)
    secret = f"{SCIM_TOKEN_PREFIX}_{prefix}_{secrets.token_urlsafe(32)}"
    token = ScimToken.objects.create(
        organization=actor.organization,
        name=name.strip()[:150] or "SCIM provisioning",
        prefix=prefix,
        token_hash=hash_token(secret),
        created_by=actor.member if actor.kind == "member" else None,
    )
    audit.record(actor=actor, action="scim_token.create", target=token, after={"name": token.name})
    return token, secret


@transaction.atomic
def scim_token_revoke(*, actor: Actor, token: ScimToken) -> ScimToken:
    actor.require("apikey.manage")
    if token.organization_id != actor.organization.pk:
        raise Conflict(_("That token belongs to another organization."), code="other_org")
    if token.revoked_at is not None:
        raise Conflict(_("The token is already revoked."), code="already_revoked")
    token.revoked_at = timezone.now()
    token.save(update_fields=["revoked_at"])
    audit.record(
        actor=actor,
        action="scim_token.revoke",
        target=token,
        before={"state": "active"},
        after={"state": "revoked"},
    )
    return token


def scim_token_resolve(secret: str) -> ScimToken | None:
    """The active token of an active organization that `secret` is, or None."""
    parts = secret.split("_", 2)
    if (
        len(parts) != 3
        or parts[0] != SCIM_TOKEN_PREFIX
        or len(parts[1]) != 8
        or not set(parts[1]) <= _HEX
        or len(secret) > 200
    ):
        return None
    token = ScimToken.objects.select_related("organization").filter(prefix=parts[1]).first()
    if token is None or not hmac.compare_digest(token.token_hash, hash_token(secret)):
        return None
    if token.revoked_at is not None or token.organization.status != Organization.Status.ACTIVE:
        return None
    now = timezone.now()
    if token.last_used_at is None or (now - token.last_used_at).total_seconds() >= 60:
        ScimToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token
