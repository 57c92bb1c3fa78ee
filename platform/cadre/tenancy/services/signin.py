"""Sign-in throttling: the lock django-axes puts on an account or an address after repeated
failed passwords, its audit trail, and an administrator's unlock (docs/tenancy.md)."""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from axes.handlers.proxy import AxesProxyHandler
from axes.helpers import get_client_ip_address, make_cache_key_list
from django.conf import settings
from django.core.cache import caches
from django.db import transaction

from cadre.governance import audit
from cadre.tenancy.actors import Actor, system_actor
from cadre.tenancy.models import Member

logger = logging.getLogger(__name__)

_MARKER = "signin-lock:{kind}:{value}"  # value: the Unix time the lock ends
_ADDRESSES = "signin-addresses:{username}"  # addresses that failed against an account
_ADDRESSES_KEPT = 20


def signin_username(request, credentials: dict | None = None) -> str | None:
    """The account a sign-in attempt names, as axes counts it (emails are case-insensitive)."""
    value = (credentials or {}).get("username")
    if value is None and request is not None:
        value = getattr(request, "POST", {}).get(settings.AXES_USERNAME_FORM_FIELD)
    value = (value or "").strip().lower()
    return value or None


def _cache():
    return caches[settings.AXES_CACHE]


def _lock_seconds() -> int:
    return int(settings.AXES_COOLOFF_TIME * 3600)


def _failures(value: str | None) -> int:
    if not value:
        return 0
    return int(_cache().get(make_cache_key_list([{"value": value}])[0], 0))


def _remaining(kind: str, value: str | None) -> int | None:
    if not value:
        return None
    until = _cache().get(_MARKER.format(kind=kind, value=value))
    if until is None:
        return None
    return max(1, math.ceil(until - time.time()))


@dataclass(frozen=True)
class SignInLock:
    locked: bool
    failures: int
    locked_until: datetime | None


def signin_lock_wait(request, username: str | None) -> int:
    """Seconds until this account and address may try again (the sign-in page's Retry-After)."""
    waits = [
        _remaining("account", username),
        _remaining("address", get_client_ip_address(request)),
    ]
    known = [wait for wait in waits if wait is not None]
    return max(known) if known else _lock_seconds()


def signin_lock_state(member: Member) -> SignInLock:
    """Whether the member's account is locked, for their page and the API."""
    username = member.user.email.lower() if member.user_id else None
    wait = _remaining("account", username)
    until = datetime.fromtimestamp(time.time() + wait, tz=UTC) if wait else None
    return SignInLock(locked=wait is not None, failures=_failures(username), locked_until=until)


def _accounts(username: str):
    return Member.objects.filter(user__email__iexact=username).select_related("organization")


def on_login_failed(sender, credentials: dict, request=None, **kwargs) -> None:
    """user_login_failed: remember which addresses failed against the account (for unlock)."""
    username = signin_username(request, credentials)
    address = getattr(request, "axes_ip_address", None)
    if request is None or not username or not address:
        return
    key = _ADDRESSES.format(username=username)
    addresses = [value for value in _cache().get(key, []) if value != address]
    _cache().set(key, [*addresses, address][-_ADDRESSES_KEPT:], _lock_seconds())


def on_locked_out(sender, request, username=None, ip_address=None, **kwargs) -> None:
    """axes' user_locked_out (sent for every refused attempt): mark each newly locked account
    or address with its end time and audit the lock once, in every organization the account
    belongs to. An address-only lock on a name no account has is logged, not audited."""
    username = signin_username(request, {"username": username})
    until = time.time() + _lock_seconds()
    newly = []
    for kind, value in (("account", username), ("address", ip_address)):
        if value and _failures(value) >= settings.AXES_FAILURE_LIMIT:
            marker = _MARKER.format(kind=kind, value=value)
            if _cache().add(marker, until, _lock_seconds()):
                newly.append(kind)
    if not newly:
        return
    logger.warning("sign-in locked (%s) for %s from %s", ", ".join(newly), username, ip_address)
    locked_until = datetime.fromtimestamp(until, tz=UTC).isoformat()
    with transaction.atomic():
        for member in _accounts(username or ""):
            audit.record(
                actor=system_actor(member.organization, label="sign-in throttle"),
                action="member.signin_lock",
                target=member,
                after={
                    "locked": newly,
                    "failures": max(_failures(username), _failures(ip_address)),
                    "address": ip_address,
                    "locked_until": locked_until,
                },
                organization=member.organization,
            )


@transaction.atomic
def signin_unlock(*, actor: Actor, member: Member) -> SignInLock:
    """Lift the sign-in lock of the member's account and of the addresses that failed against
    it, audited. Unlocking an account that is not locked changes nothing and records nothing."""
    actor.require("member.manage", member)
    before = signin_lock_state(member)
    if member.user_id is None:
        return before
    username = member.user.email.lower()
    addresses = _cache().get(_ADDRESSES.format(username=username), [])
    locked_addresses = [
        address for address in addresses if _remaining("address", address) is not None
    ]
    if not before.locked and not locked_addresses:
        return before
    AxesProxyHandler.reset_attempts(username=username)
    _cache().delete(_MARKER.format(kind="account", value=username))
    for address in addresses:
        AxesProxyHandler.reset_attempts(ip_address=address)
        _cache().delete(_MARKER.format(kind="address", value=address))
    _cache().delete(_ADDRESSES.format(username=username))
    audit.record(
        actor=actor,
        action="member.signin_unlock",
        target=member,
        before={
            "locked": before.locked,
            "locked_until": before.locked_until.isoformat() if before.locked_until else None,
            "locked_addresses": locked_addresses,
        },
        after={"locked": False, "locked_until": None, "locked_addresses": []},
    )
    return signin_lock_state(member)
