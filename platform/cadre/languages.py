"""The languages Cadre speaks and how a locale or a browser names one (docs/i18n.md).

The kernel's part: reading a language code, a locale or Accept-Language. Whose language a
reader's is (member, organization) is cadre.tenancy.languages."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import AppRegistryNotReady, ImproperlyConfigured
from django.utils import translation
from django.utils.translation import trans_real


def gettext_or_message(message: str) -> str:
    """gettext, and the message itself where Django is not set up (a script that uses the
    model client or the outbound guard without a project)."""
    try:
        return translation.gettext(message)
    except (AppRegistryNotReady, ImproperlyConfigured):
        return message


# The languages a person can read Cadre in (settings.LANGUAGES): English and Simplified Chinese.
LANGUAGES = [("en", "English"), ("zh-hans", "简体中文")]
LANGUAGE_CODES = tuple(code for code, _ in LANGUAGES)


def supported(value: str | None) -> str | None:
    """The supported language a code or locale names ("zh-CN", "zh_Hans", "en-US"), or None."""
    if not value or not isinstance(value, str) or len(value) > 35:
        return None
    value = value.strip().replace("_", "-").lower()
    if not value or not all(part.isalnum() for part in value.split("-")):
        return None
    try:
        return translation.get_supported_language_variant(value)
    except LookupError:
        pass
    # A bare or regional Chinese locale not in Django's table ("zh-SG" is, "zh-MY" is not):
    # Simplified Chinese is the only Chinese Cadre speaks.
    if value.split("-")[0] == "zh" and "zh-hans" in LANGUAGE_CODES:
        return "zh-hans"
    return None


def browser_language(request) -> str | None:
    """The language the browser asks for (the switcher's cookie, then Accept-Language)."""
    cookie = supported(request.COOKIES.get(settings.LANGUAGE_COOKIE_NAME))
    if cookie:
        return cookie
    header = request.META.get("HTTP_ACCEPT_LANGUAGE", "")
    if len(header) > 1000:  # Django's own limit on what it parses
        return None
    for code, _ in trans_real.parse_accept_lang_header(header):
        if code == "*":
            break
        language = supported(code)
        if language:
            return language
    return None
