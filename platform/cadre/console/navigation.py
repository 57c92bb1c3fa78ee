"""The console's navigation: every area of the product, shown to those who may use it."""

from __future__ import annotations

from dataclasses import dataclass

from django.urls import reverse


@dataclass(frozen=True)
class NavItem:
    label: str
    url_name: str
    permission: str | None
    section: str
    kwargs: dict | None = None


NAVIGATION = [
    NavItem("Overview", "console:home", None, "Organization"),
    NavItem("Members", "console:members", "member.view", "Organization"),
    NavItem("Departments", "console:departments", "department.view", "Organization"),
    NavItem("Positions", "console:positions", "position.view", "Organization"),
    NavItem("Templates", "console:area", "template.view", "Agents", {"area": "templates"}),
    NavItem("Deployments", "console:area", "deployment.manage", "Agents", {"area": "deployments"}),
    NavItem("Agents & sessions", "console:area", "agent.view", "Agents", {"area": "agents"}),
    NavItem("Chat", "console:area", "chat.use", "Agents", {"area": "chat"}),
    NavItem("Memory", "console:area", "memory.view", "Knowledge", {"area": "memory"}),
    NavItem("Skills Hub", "console:area", "skill.view", "Knowledge", {"area": "hub"}),
    NavItem("Skill reviews", "console:area", "skill.review", "Knowledge", {"area": "reviews"}),
    NavItem("Confirmations", "console:area", "confirmation.decide", "Governance",
            {"area": "confirmations"}),
    NavItem("Policies", "console:area", "policy.manage", "Governance", {"area": "policies"}),
    NavItem("Alerts", "console:area", "policy.manage", "Governance", {"area": "alerts"}),
    NavItem("Audit log", "console:audit", "audit.view", "Governance"),
    NavItem("Connectors", "console:area", "connector.manage", "Settings", {"area": "connectors"}),
    NavItem("API keys", "console:api_keys", "apikey.view", "Settings"),
    NavItem("Organization", "console:organization", "organization.view", "Settings"),
]


def navigation_for(actor, current_path: str) -> list[dict]:
    sections: dict[str, list[dict]] = {}
    for item in NAVIGATION:
        if item.permission and not actor.may(item.permission):
            continue
        url = reverse(item.url_name, kwargs=item.kwargs)
        active = current_path == url if url == "/" else current_path.startswith(url)
        sections.setdefault(item.section, []).append(
            {"label": item.label, "url": url, "active": active}
        )
    return [{"title": title, "items": items} for title, items in sections.items()]
