"""Which language a person reads Cadre in (docs/i18n.md).

In the console and the API: the member's preference, else the browser's (the `django_language`
cookie the sign-in page's switcher sets, then Accept-Language), else the organization's default.
Where no request is at hand (IM cards and replies, notifications, e-mails): the member's
preference, else the locale their IM platform reported, else the organization's default.
"""

from __future__ import annotations

from django.conf import settings

# The request-side reading (a locale, the browser's) lives in the kernel, for the API's edge.
from cadre.languages import LANGUAGE_CODES, browser_language, supported

__all__ = [
    "LANGUAGE_CODES",
    "browser_language",
    "chosen_language",
    "member_language",
    "organization_language",
    "remember_platform_locale",
    "request_language",
    "supported",
]


def organization_language(organization) -> str:
    return supported(getattr(organization, "locale", None)) or settings.LANGUAGE_CODE


def member_language(member) -> str:
    """The language to write to this member in when they are not in front of a browser."""
    if member is None:
        return settings.LANGUAGE_CODE
    return (
        supported(member.language)
        or supported(member.platform_language)
        or organization_language(member.organization)
    )


def request_language(request, member=None, organization=None) -> str:
    return chosen_language(browser_language(request), member, organization)


def chosen_language(browser: str | None, member=None, organization=None) -> str:
    """The reader's language: the member's preference, else the browser's (`browser`, from
    browser_language / scope_language / asked_language), else the organization's default."""
    if member is not None:
        preferred = supported(member.language)
        if preferred:
            return preferred
        organization = organization or member.organization
    return (
        browser
        or (organization_language(organization) if organization is not None else None)
        or settings.LANGUAGE_CODE
    )


def remember_platform_locale(member, locale: str | None) -> None:
    """Store the locale an IM platform reported for the member (used when they set none)."""
    language = supported(locale)
    if language and language != member.platform_language:
        type(member).objects.filter(pk=member.pk).update(platform_language=language)
        member.platform_language = language
