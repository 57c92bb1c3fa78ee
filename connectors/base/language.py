"""The language an IM message is written in: its reader's (docs/i18n.md).

Cards, system replies and notices leave Cadre outside any request, so each is rendered inside
`speaking_to(...)`: the recipient member's language (their preference, else the locale their IM
platform reported, else the organization's default); for a sender Cadre does not know yet, the
organization's default.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings
from django.utils import translation
from django.utils.translation import gettext as _

from cadre.tenancy.languages import member_language, organization_language, supported


def reader_language(member=None, *, organization=None, locale: str = "") -> str:
    """The language to write to `member` in; for no member, the one the platform stated for
    the sender (`locale`), else the organization's."""
    if member is not None:
        return member_language(member)
    if supported(locale):
        return supported(locale)
    if organization is not None:
        return organization_language(organization)
    return settings.LANGUAGE_CODE


@contextmanager
def speaking_to(member=None, *, organization=None, locale: str = "") -> Iterator[str]:
    """Render what is inside in the reader's language (yields the language code)."""
    language = reader_language(member, organization=organization, locale=locale)
    with translation.override(language):
        yield language


def decided_line(word: str, decided_by: str, decided_at, time_format: str) -> str:
    """The decided state of a card ("Approved by Bob at 2026-12-06 09:30 UTC"), in the active
    language; without a person (expiry, cancel) only when."""
    when = f"{decided_at:{time_format}}".strip()
    if decided_by:
        return _("%(word)s by %(name)s at %(time)s") % {
            "word": word,
            "name": decided_by,
            "time": when,
        }
    return _("%(word)s at %(time)s") % {"word": word, "time": when}


def expires_line(expires_at) -> str:
    """When a card's buttons stop working, in the active language."""
    return _("Expires %(time)s") % {"time": f"{expires_at:%Y-%m-%d %H:%M %Z}".strip()}
