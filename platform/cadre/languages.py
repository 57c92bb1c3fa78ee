"""The languages Cadre speaks and how a locale or a browser names one (docs/i18n.md).

The kernel's part: reading a language code, a locale or Accept-Language. Whose language a
reader's is (member, organization) is cadre.tenancy.languages."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import AppRegistryNotReady, ImproperlyConfigured
from django.http.cookie import parse_cookie
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
    return asked_language(
        request.COOKIES.get(settings.LANGUAGE_COOKIE_NAME),
        request.META.get("HTTP_ACCEPT_LANGUAGE", ""),
    )


def scope_language(scope: dict) -> str | None:
    """The same from an ASGI scope's headers, where there is no Django request (the body limit
    at the server's edge, the chat's websocket, the MCP endpoint)."""
    cookie, accept = "", ""
    for name, value in scope.get("headers") or []:
        if name == b"cookie":
            cookie = value.decode("latin-1")
        elif name == b"accept-language":
            accept = value.decode("latin-1")
    return asked_language(parse_cookie(cookie).get(settings.LANGUAGE_COOKIE_NAME), accept)


def asked_language(cookie: str | None, accept_language: str) -> str | None:
    """The language of the switcher's cookie if Cadre speaks it, else the first of
    Accept-Language's that it speaks (up to "*"), else None."""
    language = supported(cookie)
    if language:
        return language
    if len(accept_language or "") > 1000:  # Django's own limit on what it parses
        return None
    for code, _ in trans_real.parse_accept_lang_header(accept_language or ""):
        if code == "*":
            break
        language = supported(code)
        if language:
            return language
    return None
