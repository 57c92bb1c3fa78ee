"""The console's navigation: every area of the product, shown to those who may use it."""

from __future__ import annotations

from dataclasses import dataclass

from django.urls import reverse
from django.utils.translation import gettext_lazy as _


@dataclass(frozen=True)
class NavItem:
    label: str  # lazily translated: read in the reader's language
    url_name: str
    permission: str | tuple[str, ...] | None  # a tuple: any one of them
    section: str


NAVIGATION = [
    NavItem(_("Overview"), "console:home", None, _("Organization")),
    NavItem(_("Members"), "console:members", "member.view", _("Organization")),
    NavItem(_("Departments"), "console:departments", "department.view", _("Organization")),
    NavItem(_("Positions"), "console:positions", "position.view", _("Organization")),
    NavItem(_("Templates"), "console:templates", "template.view", _("Agents")),
    NavItem(
        _("Deployments"), "console:deployments", ("deployment.manage", "agent.view"), _("Agents")
    ),
    NavItem(_("Agents & sessions"), "console:agents", "agent.view", _("Agents")),
    NavItem(_("Evaluation"), "console:evaluation", "evaluation.view", _("Agents")),
    NavItem(_("Chat"), "console:chat", "chat.use", _("Agents")),
    NavItem(_("Memory"), "console:memory", "chat.use", _("Knowledge")),
    NavItem(_("Memory search"), "console:memory_search", "chat.use", _("Knowledge")),
    NavItem(_("Memory timeline"), "console:memory_timeline", "chat.use", _("Knowledge")),
    NavItem(_("Memory map"), "console:memory_map", "chat.use", _("Knowledge")),
    NavItem(_("Memory heatmap"), "console:memory_heatmap", "chat.use", _("Knowledge")),
    NavItem(_("Memory quality"), "console:memory_quality", "chat.use", _("Knowledge")),
    NavItem(_("Skills Hub"), "console:hub", "skill.view", _("Knowledge")),
    NavItem(_("My skill proposals"), "console:skill_proposals", "chat.use", _("Knowledge")),
    NavItem(_("Skill reviews"), "console:skill_reviews", "skill.review", _("Knowledge")),
    NavItem(
        _("Confirmations"),
        "console:confirmations",
        ("confirmation.decide", "audit.view"),
        _("Governance"),
    ),
    NavItem(_("Policies"), "console:policies", "policy.manage", _("Governance")),
    NavItem(_("Alerts"), "console:alerts", ("policy.manage", "audit.view"), _("Governance")),
    NavItem(_("Audit log"), "console:audit", "audit.view", _("Governance")),
    NavItem(_("Usage"), "console:usage", "budget.view", _("Governance")),
    NavItem(_("Models"), "console:models", "model.manage", _("Settings")),
    NavItem(_("Connectors"), "console:connectors", "connector.manage", _("Settings")),
    NavItem(_("MCP servers"), "console:mcp_servers", "connector.manage", _("Settings")),
    NavItem(_("API keys"), "console:api_keys", "apikey.view", _("Settings")),
    NavItem(_("Organization"), "console:organization", "organization.view", _("Settings")),
    NavItem(
        _("Single sign-on"), "console:identity_providers", "organization.manage", _("Settings")
    ),
]


def navigation_for(actor, current_path: str) -> list[dict]:
    sections: dict[str, list[dict]] = {}
    entries = []
    for item in NAVIGATION:
        needed = (item.permission,) if isinstance(item.permission, str) else item.permission
        if needed and not any(actor.may(permission) for permission in needed):
            continue
        url = reverse(item.url_name)
        matches = current_path == url if url == "/" else current_path.startswith(url)
        entry = {"label": str(item.label), "url": url, "active": matches}
        entries.append(entry)
        sections.setdefault(str(item.section), []).append(entry)
    # Only the most specific match is current: /memory/map/ is "Memory map", not "Memory".
    matching = [entry for entry in entries if entry["active"]]
    for entry in matching:
        entry["active"] = entry is max(matching, key=lambda e: len(e["url"]))
    return [{"title": title, "items": items} for title, items in sections.items()]
