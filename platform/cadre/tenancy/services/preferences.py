"""A member's own preferences: the language they read Cadre in (docs/i18n.md)."""

from __future__ import annotations

from django.db import transaction
from django.utils.translation import gettext as _

from cadre.errors import InvalidInput
from cadre.governance import audit
from cadre.tenancy.actors import Actor
from cadre.tenancy.languages import LANGUAGE_CODES
from cadre.tenancy.models import Member


@transaction.atomic
def member_language_set(*, actor: Actor, member: Member, language: str) -> Member:
    """Set the language a member reads Cadre in ("" = the browser's, else the organization's).

    The member sets their own; setting someone else's needs member.manage over them."""
    if actor.member is None or actor.member.pk != member.pk:
        actor.require("member.manage", member)
    if language not in ("", *LANGUAGE_CODES):
        raise InvalidInput(
            _("Choose one of the languages Cadre speaks: %(languages)s.")
            % {"languages": ", ".join(LANGUAGE_CODES)},
            code="unsupported_language",
            details={"language": list(LANGUAGE_CODES)},
        )
    if language == member.language:
        return member
    before = {"language": member.language}
    member.language = language
    member.save(update_fields=["language"])
    audit.record(
        actor=actor,
        action="member.language",
        target=member,
        before=before,
        after={"language": language},
    )
    return member
