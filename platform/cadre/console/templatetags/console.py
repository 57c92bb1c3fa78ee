"""Template helpers for the console: initials, JSON display, badge classes."""

from __future__ import annotations

import json

from django import template

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
    from cadre.tenancy.roles import ROLES

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
