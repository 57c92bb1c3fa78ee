"""Filters for text people wrote (descriptions): `code` in backticks is shown as code."""

from __future__ import annotations

import re

from django import template
from django.utils.html import conditional_escape, format_html
from django.utils.safestring import mark_safe

register = template.Library()

_BACKTICKS = re.compile(r"`([^`\n]+)`")


@register.filter(needs_autoescape=True)
def backticks_as_code(value, autoescape=True) -> str:
    """ "Remove it with `cadre manage demo_reset`." with the command as <code> (a command or an
    identifier is not translated); the rest escaped as usual."""
    text = str(value or "")
    escape = conditional_escape if autoescape else (lambda part: part)
    parts = []
    last = 0
    for match in _BACKTICKS.finditer(text):
        parts.append(escape(text[last : match.start()]))
        parts.append(format_html("<code>{}</code>", match[1]))
        last = match.end()
    parts.append(escape(text[last:]))
    return mark_safe("".join(str(part) for part in parts))  # noqa: S308 - every part escaped
