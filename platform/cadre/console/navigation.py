"""The console's navigation: every area of the product, shown to those who may use it."""

from __future__ import annotations

from dataclasses import dataclass

from django.urls import reverse


@dataclass(frozen=True)
class NavItem:
    label: str
    url_name: str
    permission: str | tuple[str, ...] | None  # a tuple: any one of them
    section: str


NAVIGATION = [
    NavItem("Overview", "console:home", None, "Organization"),
    NavItem("Members", "console:members", "member.view", "Organization"),
    NavItem("Departments", "console:departments", "department.view", "Organization"),
    NavItem("Positions", "console:positions", "position.view", "Organization"),
    NavItem("Templates", "console:templates", "template.view", "Agents"),
    NavItem("Deployments", "console:deployments", ("deployment.manage", "agent.view"), "Agents"),
    NavItem("Agents & sessions", "console:agents", "agent.view", "Agents"),
    NavItem("Evaluation", "console:evaluation", "evaluation.view", "Agents"),
    NavItem("Chat", "console:chat", "chat.use", "Agents"),
    NavItem("Memory", "console:memory", "chat.use", "Knowledge"),
    NavItem("Memory search", "console:memory_search", "chat.use", "Knowledge"),
    NavItem("Memory timeline", "console:memory_timeline", "chat.use", "Knowledge"),
    NavItem("Memory map", "console:memory_map", "chat.use", "Knowledge"),
    NavItem("Memory heatmap", "console:memory_heatmap", "chat.use", "Knowledge"),
    NavItem("Memory quality", "console:memory_quality", "chat.use", "Knowledge"),
    NavItem("Skills Hub", "console:hub", "skill.view", "Knowledge"),
    NavItem("My skill proposals", "console:skill_proposals", "chat.use", "Knowledge"),
    NavItem("Skill reviews", "console:skill_reviews", "skill.review", "Knowledge"),
    NavItem(
        "Confirmations",
        "console:confirmations",
        ("confirmation.decide", "audit.view"),
        "Governance",
    ),
    NavItem("Policies", "console:policies", "policy.manage", "Governance"),
    NavItem("Alerts", "console:alerts", ("policy.manage", "audit.view"), "Governance"),
    NavItem("Audit log", "console:audit", "audit.view", "Governance"),
    NavItem("Usage", "console:usage", "budget.view", "Governance"),
    NavItem("Models", "console:models", "model.manage", "Settings"),
    NavItem("Connectors", "console:connectors", "connector.manage", "Settings"),
    NavItem("MCP servers", "console:mcp_servers", "connector.manage", "Settings"),
    NavItem("API keys", "console:api_keys", "apikey.view", "Settings"),
    NavItem("Organization", "console:organization", "organization.view", "Settings"),
    NavItem("Single sign-on", "console:identity_providers", "organization.manage", "Settings"),
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
        entry = {"label": item.label, "url": url, "active": matches}
        entries.append(entry)
        sections.setdefault(item.section, []).append(entry)
    # Only the most specific match is current: /memory/map/ is "Memory map", not "Memory".
    matching = [entry for entry in entries if entry["active"]]
    for entry in matching:
        entry["active"] = entry is max(matching, key=lambda e: len(e["url"]))
    return [{"title": title, "items": items} for title, items in sections.items()]
