"""API keys: `cadre_<prefix>_<secret>` tokens, created once, stored as a hash."""

from __future__ import annotations

import secrets
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from cadre.errors import Conflict, InvalidInput, NotPermitted
from cadre.governance import audit
from cadre.tenancy.actors import Actor
from cadre.tenancy.models import ApiKey
from cadre.tenancy.roles import SCOPES, permissions_for_roles, permissions_for_scopes
from cadre.tenancy.services.common import hash_token

API_KEY_PREFIX = "cadre"


_HEX = frozenset("0123456789abcdef")


def api_key_parse(token: str) -> tuple[str, str] | None:
    """`cadre_<prefix>_<secret>` → (prefix, token) or None when malformed."""
    parts = token.split("_", 2)
    if (
        len(parts) != 3
        or parts[0] != API_KEY_PREFIX
        or len(parts[1]) != 8
        or not set(parts[1]) <= _HEX
        or not parts[2]
        or len(token) > 200
        or not token.isascii()
        or not token.isprintable()
    ):
        return None
    return parts[1], token


def api_key_hash(token: str) -> str:
    return hash_token(token)


@transaction.atomic
def api_key_create(
    *,
    actor: Actor,
    name: str,
    scopes: list[str],
    expires_at=None,
) -> tuple[ApiKey, str]:
    """Create a key; the secret is returned here once and only its hash is kept."""
    actor.require("apikey.manage")
    if actor.member is None or actor.kind not in ("member", "api_key"):
        raise NotPermitted(_("API keys are created by a member or by one of their keys."))
    unknown = [scope for scope in scopes if scope not in SCOPES]
    if unknown or not scopes:
        raise InvalidInput(
            _("Choose at least one known scope.")
            if not unknown
            else _("Unknown scope(s): %(scopes)s.") % {"scopes": ", ".join(unknown)},
            details={"scopes": [_("Choose from: %(scopes)s") % {"scopes": ", ".join(SCOPES)}]},
        )
    beyond = permissions_for_scopes(scopes) - permissions_for_roles(actor.member.roles)
    if beyond:
        raise NotPermitted(
            _("A key cannot have permissions you do not have: %(permissions)s")
            % {"permissions": ", ".join(sorted(beyond))},
            details={"scopes": [_("Exceeds your own permissions.")]},
        )
    if actor.kind == "api_key":
        # A key mints keys of its creator, never with more scopes or a later expiry than it.
        wider = sorted(set(scopes) - set(actor.api_key.scopes))
        if wider:
            raise NotPermitted(
                _("A key cannot create a key with scopes it does not have: %(scopes)s")
                % {"scopes": ", ".join(wider)},
                details={"scopes": [_("Exceeds this key's scopes.")]},
            )
        limit = actor.api_key.expires_at
        if limit is not None and (expires_at is None or expires_at > limit):
            raise InvalidInput(
                _("A key made by a key expires no later than it."),
                details={"expires_at": [_("At most %(limit)s.") % {"limit": limit.isoformat()}]},
            )
    if expires_at is not None and expires_at <= timezone.now():
        raise InvalidInput(
            _("The expiry must be in the future."),
            details={"expires_at": [_("Must be in the future.")]},
        )
    prefix = secrets.token_hex(4)
    token = f"{API_KEY_PREFIX}_{prefix}_{secrets.token_urlsafe(32)}"
    key = ApiKey.objects.create(
        organization=actor.organization,
        name=name.strip() or "API key",
        prefix=prefix,
        key_hash=hash_token(token),
        scopes=sorted(set(scopes)),
        created_by=actor.member,
        expires_at=expires_at,
    )
    audit.record(
        actor=actor,
        action="apikey.create",
        target=key,
        after={"name": key.name, "prefix": prefix, "scopes": key.scopes, "expires_at": expires_at},
    )
    return key, token


@transaction.atomic
def api_key_revoke(*, actor: Actor, key: ApiKey) -> ApiKey:
    actor.require("apikey.manage")
    if actor.kind == "api_key" and not set(key.scopes) <= set(actor.api_key.scopes):
        raise NotPermitted(_("A key cannot revoke a key with scopes it does not have."))
    if key.revoked_at is not None:
        raise Conflict(_("The key is already revoked."), code="already_revoked")
    key.revoked_at = timezone.now()
    key.revoked_by = actor.member
    key.save(update_fields=["revoked_at", "revoked_by"])
    audit.record(
        actor=actor,
        action="apikey.revoke",
        target=key,
        before={"state": "active"},
        after={"state": "revoked"},
    )
    return key


def api_key_touch(key: ApiKey, ip: str | None) -> None:
    """Record use, at most once a minute per key (not audited: it is not a change of state)."""
    now = timezone.now()
    interval = timedelta(seconds=settings.CADRE_API_KEY_LAST_USED_INTERVAL)
    if key.last_used_at is None or now - key.last_used_at >= interval:
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=now, last_used_ip=ip)
        key.last_used_at, key.last_used_ip = now, ip
