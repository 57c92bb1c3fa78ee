"""The placeholders of a template's AGENT.md, SOP and USER.md (`{{member.display_name}}`, ...),
filled for the member an agent serves: what the model reads and a person is shown."""

from __future__ import annotations

import re

from django.utils.translation import gettext_lazy

from cadre.tenancy.models import Member

PLACEHOLDER = re.compile(r"\{\{\s*([a-z_]+(?:\.[a-z_]+)?)\s*\}\}")

# Without a member (text read before any agent serves anyone), the words a placeholder stands
# for: never its braces.
NEUTRAL = {
    "member.display_name": gettext_lazy("the person you assist"),
    "member.title": gettext_lazy("their title"),
    "member.email": gettext_lazy("their e-mail address"),
    "member.department": gettext_lazy("their department"),
    "member.positions": gettext_lazy("their positions"),
    "organization.name": gettext_lazy("the organization"),
}


def placeholder_values(member: Member) -> dict[str, str]:
    return {
        "member.display_name": member.display_name,
        "member.title": member.title,
        "member.email": member.email,
        "member.department": member.department.name if member.department_id else "",
        "member.positions": ", ".join(p.name for p in member.positions.all()),
        "organization.name": member.organization.name,
    }


def render_placeholders(text: str, member: Member | None) -> str:
    """`text` with its known placeholders filled with `member`'s values (or, without a member,
    neutral words); any other `{{...}}` is left as written (it is not ours to fill)."""
    if not text or "{{" not in text or not PLACEHOLDER.search(text):
        return text
    values = placeholder_values(member) if member is not None else NEUTRAL
    return PLACEHOLDER.sub(lambda m: str(values.get(m.group(1), m.group(0))), text)
