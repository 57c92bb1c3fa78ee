"""Template helpers for the console: initials, JSON display, badge classes, icons."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from decimal import Decimal
from functools import lru_cache
from pathlib import Path

from django import template
from django.conf import settings
from django.contrib.staticfiles import finders
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import mark_safe
from django.utils.timesince import timesince
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
    # Every other record the audit log can name (a model's name, or a key the code writes).
    "ssoidentity": _("SSO identity"),
    "ssosession": _("SSO session"),
    "notice": _("Notice"),
    "auditevent": _("Audit event"),
    "pseudonymmapping": _("Pseudonym mapping"),
    "maskingrule": _("Masking rule"),
    "auditexport": _("Audit export"),
    "policychain": _("Policy chain"),
    "policydecision": _("Policy decision"),
    "confirmation": _("Confirmation"),
    "confirmationvote": _("Confirmation vote"),
    "alertrule": _("Alert rule"),
    "alert": _("Alert"),
    "budget": _("Budget"),
    "usagerecord": _("Usage record"),
    "mcpserver": _("MCP server"),
    "mcp_tool": _("MCP tool"),
    "deployment": _("Deployment"),
    "rollout": _("Rollout"),
    "agent": _("Agent"),
    "session": _("Session"),
    "run": _("Run"),
    "sessionsummary": _("Session summary"),
    "step": _("Step"),
    "tooleffect": _("Tool effect"),
    "wait": _("Wait"),
    "runevent": _("Run event"),
    "agentmessage": _("Agent message"),
    "agenttask": _("Agent task"),
    "eventtrigger": _("Event trigger"),
    "triggerevent": _("Trigger event"),
    "agentsubscription": _("Agent subscription"),
    "evalsuite": _("Eval suite"),
    "evalcase": _("Eval case"),
    "evalrun": _("Eval run"),
    "evalresult": _("Eval result"),
    "memory": _("Memory"),
    "memoryversion": _("Memory version"),
    "embeddingmodel": _("Embedding model"),
    "embedding_model": _("Embedding model"),
    "organizationembeddingmodel": _("Organization embedding model"),
    "memorytask": _("Memory task"),
    "memorymap": _("Memory map"),
    "reviewstage": _("Review stage"),
    "skillcandidate": _("Skill candidate"),
    "candidaterevision": _("Candidate revision"),
    "skillevidence": _("Skill evidence"),
    "reviewdecision": _("Review decision"),
    "skillproposal": _("Skill proposal"),
    "distillationrecord": _("Distillation record"),
    "hubnamespace": _("Hub namespace"),
    "skillinstall": _("Skill install"),
    "skillinstallevent": _("Skill install event"),
    "skillusage": _("Skill usage"),
    "uploadticket": _("Upload ticket"),
    "connector": _("Connector"),
    "connectorbinding": _("Connector binding"),
    "inboundevent": _("Inbound event"),
    "delivery": _("Delivery"),
    "unmappedidentity": _("Unmapped identity"),
    "connectornotice": _("Connector notice"),
    "directorysync": _("Directory sync"),
    "directorydepartmentlink": _("Directory department link"),
    "directoryuserlink": _("Directory user link"),
    "directoryconflict": _("Directory conflict"),
    "demodata": _("Demo data"),
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


# Reasons and actor names Cadre itself writes, stored in English (audit events, skill install
# events), read back in the active language. Anything else was typed by a person: shown as is.
_SYSTEM_WORDS = {
    "automatic: highest published version": _("automatic: highest published version"),
    "published without review (reviewer or org policy)": _(
        "published without review (reviewer or org policy)"
    ),
    "first provider": _("first provider"),
    "template references the skill": _("template references the skill"),
    "template changed": _("template changed"),
    "update applied": _("update applied"),
    "rolled back": _("rolled back"),
    "skill distribution": _("skill distribution"),
    "approved skills": _("approved skills"),
    "cancelled in the chat": _("cancelled in the chat"),
    "member deactivated": _("member deactivated"),
    "provisioned inactive (SCIM)": _("provisioned inactive (SCIM)"),
    "role changed from claims": _("role changed from claims"),
    "the address owns a new organization": _("the address owns a new organization"),
    "password sign-in of an owner while SSO is required": _(
        "password sign-in of an owner while SSO is required"
    ),
    "near duplicate": _("near duplicate"),
    "tool summary refreshed": _("tool summary refreshed"),
    "feedback correction": _("feedback correction"),
    "purge after delete": _("purge after delete"),
    "purge the demo data's memories": _("purge the demo data's memories"),
}
# The same for the reasons written with a value in them (hub/distribution.py).
_SYSTEM_PATTERNS = [
    (re.compile(r"auto: patch (?P<version>\S+) published"), _("auto: patch %(version)s published")),
    (
        re.compile(r"(?P<policy>auto|manual|pinned): (?P<version>\S+) waits to be applied"),
        _("%(policy)s: %(version)s waits to be applied"),
    ),
]


def system_words(value: str) -> str | None:
    """`value` in the active language when Cadre wrote it (a fixed reason or actor name);
    None when a person typed it."""
    if not value:
        return None
    known = _SYSTEM_WORDS.get(value)
    if known is not None:
        return str(known)
    for pattern, words in _SYSTEM_PATTERNS:
        found = pattern.fullmatch(value)
        if found:
            return str(words) % found.groupdict()
    return None


@register.filter
def stored_text(value, length=None) -> str:
    """A stored reason or actor name as a person reads it: Cadre's own words translated, a
    person's words as they typed them (marked translate="no": data); `length` shortens it
    (`|stored_text:60`)."""
    value = str(value or "")
    said = system_words(value)
    if said is None:
        said, typed = value, True
    else:
        typed = False
    if length and len(said) > int(length):
        said = said[: int(length) - 1] + "…"
    if typed and said:
        return format_html('<span translate="no">{}</span>', said)
    return said


@register.filter
def ago(value) -> str:
    """How long ago, in the reader's language: "just now" under a minute, else "3 hours ago"."""
    if not value:
        return ""
    if timezone.now() - value < timedelta(minutes=1):
        return str(_("just now"))
    return str(_("%(when)s ago") % {"when": timesince(value)})


@register.filter
def actor_label(value) -> str:
    """A stored actor label in the reader's language: an agent acting is stored as
    "agent <name>" (cadre.agents.runtime.records.grants); anyone else by their name."""
    text = str(value or "")
    if text.startswith("agent "):
        return str(_("agent %(name)s") % {"name": text.removeprefix("agent ")})
    return text
