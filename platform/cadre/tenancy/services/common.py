"""Helpers shared by the tenancy services: snapshots for audit diffs, checks, unique saves."""

from __future__ import annotations

import hashlib

from django.db import IntegrityError, transaction
from django.utils.translation import gettext as _

from cadre.errors import Conflict, InvalidInput
from cadre.tenancy.actors import Actor
from cadre.tenancy.roles import ROLES


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def snapshot(obj, fields) -> dict:
    data = {}
    for name in fields:
        value = getattr(obj, name)
        if hasattr(value, "pk"):
            value = value.pk
        data[name] = value
    return data


def check_roles(roles) -> list[str]:
    unknown = [role for role in roles if role not in ROLES]
    if unknown:
        raise InvalidInput(
            _("Unknown role(s): %(unknown)s.") % {"unknown": ", ".join(unknown)},
            details={"roles": [_("Choose from: %(roles)s") % {"roles": ", ".join(ROLES)}]},
        )
    return sorted(set(roles))


def same_org(actor: Actor, *objects) -> None:
    for obj in objects:
        if obj is not None and obj.organization_id != actor.organization.pk:
            raise InvalidInput(_("That object belongs to another organization."))


def save_unique(obj, message: str, field: str, **save_kwargs) -> None:
    try:
        with transaction.atomic():
            obj.save(**save_kwargs)
    except IntegrityError:
        raise Conflict(message, code="duplicate", details={field: [message]}) from None
