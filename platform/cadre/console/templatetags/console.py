"""Template helpers for the console: initials, JSON display, badge classes, icons."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from django import template
from django.conf import settings
from django.contrib.staticfiles import finders
from django.utils.safestring import mark_safe

from cadre.tenancy.roles import ROLES

register = template.Library()


@register.filter
def initials(value) -> str:
    """'Alice Wong' → 'AW'; one letter for one word; '?' for nothing."""
    words = str(value or "").replace("@", " ").split()
    if not words:
        return "?"
    if len(words) == 1:
        return words[0][:1].upper()
    return (words[0][:1] + words[1][:1]).upper()


@register.filter
def pretty_json(value) -> str:
    """A value from an audit diff as readable JSON (strings without their quotes)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True, default=str)


@register.filter
def get_item(mapping, key):
    return mapping.get(key, key) if hasattr(mapping, "get") else key


@register.filter
def role_label(name: str) -> str:
    role = ROLES.get(name)
    return role.label if role else name


@register.filter
def widget_kind(bound_field) -> str:
    """'checks' for a checkbox list, 'checkbox' for one checkbox, else 'input'."""
    widget = bound_field.field.widget
    if getattr(widget, "input_type", "") == "checkbox":
        return "checks" if getattr(widget, "allow_multiple_selected", False) else "checkbox"
    return "input"


@register.filter
def elided_range(page):
    """Page numbers around the current one, with Paginator.ELLIPSIS for the gaps."""
    return page.paginator.get_elided_page_range(page.number, on_each_side=2, on_ends=1)


@lru_cache(maxsize=64)
def _icon_svg(name: str) -> str:
    # Inline, not <img>: the icon draws in currentColor, so it takes the colour of its text.
    path = finders.find(f"vendor/lucide-static/icons/{name}.svg")
    if path is None:
        if not (settings.FRONTEND_DIR / "node_modules" / "lucide-static").is_dir():
            return ""  # not installed: pages still work, `cadre doctor` names the fix
        raise template.TemplateSyntaxError(f"lucide-static has no icon {name!r}")
    svg = Path(path).read_text(encoding="utf-8")
    svg = svg[svg.index("<svg") :]
    return svg.replace("<svg", '<svg aria-hidden="true" focusable="false"', 1)


@register.simple_tag
def icon(name: str) -> str:
    """A Lucide icon as inline SVG: drawn the same on every machine, with or without an emoji
    or CJK font."""
    return mark_safe(_icon_svg(name))  # noqa: S308 - the package's own file, not user input


# Where the console's word for a thing is not the model's verbose name.
_TARGET_TYPE_WORDS = {
    "agenttemplate": "Role template",
    "templateversion": "Template version",
    "apikey": "API key",
    "imidentity": "IM identity",
    "modelproviderconfig": "Model provider",
    "disttag": "Hub dist-tag",
    "skillpackage": "Hub skill",
    "skillversion": "Hub skill version",
    "wait_key": "Run wait",
}


@lru_cache(maxsize=1)
def _model_words() -> dict[str, str]:
    from django.apps import apps

    return {model._meta.model_name: str(model._meta.verbose_name) for model in apps.get_models()}


@register.filter
def target_type_label(value: str) -> str:
    """An audit event's target type (a model name, `agenttemplate`) as a person reads it."""
    if not value:
        return ""
    words = _TARGET_TYPE_WORDS.get(value) or _model_words().get(value) or value.replace("_", " ")
    return words[:1].upper() + words[1:]
