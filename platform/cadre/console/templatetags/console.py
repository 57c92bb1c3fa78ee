"""Template helpers for the console: initials, JSON display, badge classes, icons."""

from __future__ import annotations

import json
from decimal import Decimal
from functools import lru_cache
from pathlib import Path

from django import template
from django.conf import settings
from django.contrib.staticfiles import finders
from django.utils.safestring import mark_safe
from django.utils.translation import gettext_lazy as _

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
    """`mapping[key]`, or "" when the key is missing: a link built from the result must never
    point at the key itself (an audit event's id taken for a run's)."""
    return mapping.get(key, "") if hasattr(mapping, "get") else ""


# Symbols of the currencies model prices are commonly set in; others show their code.
CURRENCY_SYMBOLS = {"USD": "$", "EUR": "€", "GBP": "£", "CNY": "¥", "JPY": "¥", "INR": "₹"}
SMALLEST_SHOWN = Decimal("0.0001")


def format_money(value, currency: str) -> str:
    """An amount with its currency and the digits that matter: two decimals from 1 up, up to
    two significant digits below (at most four decimals), "< $0.0001" below that."""
    try:
        amount = Decimal(str(value or 0))
    except ArithmeticError:
        return str(value)
    symbol = CURRENCY_SYMBOLS.get(currency)

    def shown(text: str) -> str:
        return f"{symbol}{text}" if symbol else f"{text} {currency}"

    sign, amount = ("-" if amount < 0 else ""), abs(amount)
    if amount == 0:
        return shown("0.00")
    if amount < SMALLEST_SHOWN:
        return f"< {shown(str(SMALLEST_SHOWN))}"
    places = 2 if amount >= 1 else min(4, max(2, 1 - amount.adjusted()))
    text = f"{amount:,.{places}f}"
    while places > 2 and text.endswith("0"):  # 0.050 → 0.05, 0.0100 → 0.01
        text, places = text[:-1], places - 1
    return sign + shown(text)


@register.filter
def money(value) -> str:
    """A cost in the currency of the model prices (CADRE_PRICE_CURRENCY): "$0.0012", "¥0.35"."""
    return format_money(value, settings.PRICE_CURRENCY)


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
    "agenttemplate": _("Role template"),
    "templateversion": _("Template version"),
    "apikey": _("API key"),
    "imidentity": _("IM identity"),
    "modelproviderconfig": _("Model provider"),
    "disttag": _("Hub dist-tag"),
    "skillpackage": _("Hub skill"),
    "skillversion": _("Hub skill version"),
    "wait_key": _("Run wait"),
    "organization": _("Organization"),
    "member": _("Member"),
    "department": _("Department"),
    "position": _("Position"),
    "invitation": _("Invitation"),
    "user": _("Login"),
    "scimtoken": _("SCIM token"),
    "identityprovider": _("Identity provider"),
    "grant": _("Grant"),
}

# Who acted, for the audit pages (AuditEvent.ActorType's values).
_ACTOR_TYPE_WORDS = {
    "member": _("Member"),
    "api_key": _("API key"),
    "agent": _("Agent"),
    "system": _("System"),
    "scim_token": _("SCIM token"),
}


@register.filter
def actor_type_label(value: str) -> str:
    """An audit event's actor type ("member", "api_key") as a person reads it."""
    return str(_ACTOR_TYPE_WORDS.get(value) or value.replace("_", " ").capitalize())


@lru_cache(maxsize=1)
def _model_words() -> dict:
    """Model name → verbose name, kept lazy: read in the language active when shown."""
    from django.apps import apps

    return {model._meta.model_name: model._meta.verbose_name for model in apps.get_models()}


@register.filter
def target_type_label(value: str) -> str:
    """An audit event's target type (a model name, `agenttemplate`) as a person reads it."""
    if not value:
        return ""
    words = str(
        _TARGET_TYPE_WORDS.get(value) or _model_words().get(value) or value.replace("_", " ")
    )
    return words[:1].upper() + words[1:]
