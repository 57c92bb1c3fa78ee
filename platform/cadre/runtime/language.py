"""The installer's language: what `make up` / `cadre up` and `cadre doctor` print in, and the
default language of the demo organization they create.

CADRE_LANGUAGE when set ("en", "zh-hans"; "zh", "zh-CN", "zh_Hans" … are read as zh-hans),
else the environment's locale the way POSIX programs choose their messages' language (the
first of LC_ALL, LC_MESSAGES, LANG that is set): one starting with "zh" is Simplified Chinese,
anything else (C, POSIX, en_US.UTF-8, …) English.
"""

from __future__ import annotations

import os

from django.core.exceptions import ImproperlyConfigured

ENGLISH = "en"
CHINESE = "zh-hans"
SUPPORTED = (ENGLISH, CHINESE)
LOCALE_VARIABLES = ("LC_ALL", "LC_MESSAGES", "LANG")


def normalize(value: str) -> str | None:
    """A language code Cadre has ("en", "zh-hans") for a locale or language tag; None when
    Cadre has no such language."""
    code = value.strip().split(".")[0].split("@")[0].replace("_", "-").lower()
    if code.startswith("zh"):
        return CHINESE
    if code in ("en", "c", "posix") or code.startswith("en-"):
        return ENGLISH
    return None


def installer_language(environ: dict[str, str] | None = None) -> str:
    """ "zh-hans" or "en" (see the module docstring). An unsupported CADRE_LANGUAGE is a
    configuration error that names the variable."""
    environ = os.environ if environ is None else environ
    chosen = (environ.get("CADRE_LANGUAGE") or "").strip()
    if chosen:
        language = normalize(chosen)
        if language is None:
            raise ImproperlyConfigured(
                f"CADRE_LANGUAGE: {chosen!r} is not a language Cadre speaks; use one of "
                f"{', '.join(SUPPORTED)}"
            )
        return language
    for name in LOCALE_VARIABLES:
        value = (environ.get(name) or "").strip()
        if value:
            return CHINESE if value.lower().startswith("zh") else ENGLISH
    return ENGLISH
