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
    NavItem("Chat", "console:chat", "chat.use", "Agents"),
    NavItem("Memory", "console:memory", "chat.use", "Knowledge"),
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
    NavItem("Connectors", "console:connectors", "connector.manage", "Settings"),
    NavItem("API keys", "console:api_keys", "apikey.view", "Settings"),
    NavItem("Organization", "console:organization", "organization.view", "Settings"),
    NavItem("Single sign-on", "console:identity_providers", "organization.manage", "Settings"),
]


def navigation_for(actor, current_path: str) -> list[dict]:
    sections: dict[str, list[dict]] = {}
    for item in NAVIGATION:
        needed = (item.permission,) if isinstance(item.permission, str) else item.permission
        if needed and not any(actor.may(permission) for permission in needed):
            continue
        url = reverse(item.url_name)
        active = current_path == url if url == "/" else current_path.startswith(url)
        sections.setdefault(item.section, []).append(
            {"label": item.label, "url": url, "active": active}
        )
    return [{"title": title, "items": items} for title, items in sections.items()]
