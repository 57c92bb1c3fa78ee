"""The console's navigation: every area of the product, shown to those who may use it.

Areas that are not built yet are listed too (with `AREAS` describing what they will do), so an
administrator sees the whole product from day one — but never invented data.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.urls import NoReverseMatch, reverse


@dataclass(frozen=True)
class NavItem:
    label: str
    url_name: str
    permission: str | tuple[str, ...] | None  # a tuple: any one of them
    section: str
    # The not-yet-built area page shown while `url_name` has no route.
    area: str | None = None

    def resolve(self) -> tuple[str, bool]:
        """(url, built): the item's own page once it exists, else its area page."""
        try:
            return reverse(self.url_name), True
        except NoReverseMatch:
            if self.area is None:
                raise
            return reverse("console:area", kwargs={"area": self.area}), False


NAVIGATION = [
    NavItem("Overview", "console:home", None, "Organization"),
    NavItem("Members", "console:members", "member.view", "Organization"),
    NavItem("Departments", "console:departments", "department.view", "Organization"),
    NavItem("Positions", "console:positions", "position.view", "Organization"),
    NavItem("Templates", "console:templates", "template.view", "Agents", area="templates"),
    NavItem(
        "Deployments",
        "console:deployments",
        ("deployment.manage", "agent.view"),
        "Agents",
        area="deployments",
    ),
    NavItem("Agents & sessions", "console:agents", "agent.view", "Agents", area="agents"),
    NavItem("Chat", "console:chat", "chat.use", "Agents", area="chat"),
    NavItem("Memory", "console:memory", "chat.use", "Knowledge"),
    NavItem("Skills Hub", "console:hub", "skill.view", "Knowledge", area="hub"),
    NavItem("Skill reviews", "console:skill_reviews", "skill.review", "Knowledge", area="reviews"),
    NavItem(
        "Confirmations",
        "console:confirmations",
        ("confirmation.decide", "audit.view"),
        "Governance",
        area="confirmations",
    ),
    NavItem("Policies", "console:policies", "policy.manage", "Governance", area="policies"),
    NavItem(
        "Alerts", "console:alerts", ("policy.manage", "audit.view"), "Governance", area="alerts"
    ),
    NavItem("Audit log", "console:audit", "audit.view", "Governance"),
    NavItem("Connectors", "console:connectors", "connector.manage", "Settings", area="connectors"),
    NavItem("API keys", "console:api_keys", "apikey.view", "Settings"),
    NavItem("Organization", "console:organization", "organization.view", "Settings"),
]


@dataclass(frozen=True)
class Area:
    """A part of the product whose console pages are not built yet."""

    slug: str
    title: str
    permission: str
    summary: str
    capabilities: tuple[str, ...] = field(default_factory=tuple)
    arrives_with: str = ""


AREAS: dict[str, Area] = {
    area.slug: area
    for area in [
        Area(
            "templates",
            "Role templates",
            "template.view",
            "Reusable definitions of an agent for a position: its instructions, tools, skills "
            "and memory scope, versioned and reviewed before they reach employees.",
            (
                "Write a template's SOP, AGENT.md and default skills, and attach it to positions",
                "Keep every version; compare two versions and see who changed what",
                "Send a new version for review, then publish it",
            ),
            "the agents module (role templates and versions)",
        ),
        Area(
            "deployments",
            "Deployments",
            "deployment.manage",
            "Dispatch agents in bulk: one agent per member of a position, rolled out and rolled "
            "back as a unit.",
            (
                "Dispatch a template version to a position, a department or named members",
                "Roll out gradually and watch the error rate before going further",
                "Roll back to the previous version in one step",
            ),
            "the agents module (deployments)",
        ),
        Area(
            "agents",
            "Agents & sessions",
            "agent.view",
            "Every running agent, whom it serves, and the sessions and runs it has had — step "
            "by step, with the tools it called and the trace id of each run.",
            (
                "Find an agent by member, position or template version",
                "Open a session and read each run's steps, tool calls and confirmations",
                "Follow a run's trace id into your tracing system",
            ),
            "the agent runtime",
        ),
        Area(
            "chat",
            "Chat",
            "chat.use",
            "Talk to your own agents from the browser — the same conversations you have in "
            "Feishu, WeCom, DingTalk or Slack.",
            (
                "Pick one of your agents and continue a conversation",
                "Confirm high-risk actions inline, as on an IM card",
            ),
            "the agent runtime and live updates",
        ),
        Area(
            "hub",
            "Skills Hub",
            "skill.view",
            "The organization's registry of reviewed skills: packages, versions and dist-tags, "
            "installable by templates, deployments and other Cadre installs.",
            (
                "Browse and search skills with their versions and success rates",
                "See which templates and deployments use each version",
                "Publish from the CLI or CI with an API key (hub:publish scope)",
            ),
            "the Hub",
        ),
        Area(
            "reviews",
            "Skill reviews",
            "skill.review",
            "Skill candidates proposed from people's corrections to agents, with a quality "
            "score, waiting for approval before they are published.",
            (
                "Review a candidate's diff, score and source conversations",
                "Approve, request changes or reject, stage by stage",
            ),
            "the skills module",
        ),
        Area(
            "confirmations",
            "Confirmations",
            "confirmation.decide",
            "High-risk actions that agents paused on, routed to the people who may decide them.",
            (
                "Approve or reject a paused action with the full context of the run",
                "See expired and decided confirmations and who decided",
            ),
            "the policy chain and confirmations",
        ),
        Area(
            "policies",
            "Policies",
            "policy.manage",
            "The chain every agent input and tool call passes through: masking rules, risk "
            "classification and what needs a human confirmation.",
            (
                "Edit masking rules and test them on sample text",
                "Classify tools by risk and choose who confirms high-risk calls",
            ),
            "the governance module (policy chain and masking)",
        ),
        Area(
            "alerts",
            "Alerts",
            "policy.manage",
            "Rules that notify people when something needs attention: policy violations, "
            "failing runs, unusual volumes.",
            (
                "Define alert rules and where they are sent",
                "See what fired, when, and who acknowledged it",
            ),
            "the governance module (alerting)",
        ),
        Area(
            "connectors",
            "Connectors",
            "connector.manage",
            "The IM platforms your employees reach their agents from: Feishu/Lark, WeCom, "
            "DingTalk and Slack, plus a generic webhook.",
            (
                "Add a connector with its credentials (stored encrypted)",
                "Check its health and see recent inbound events",
                "Map platform accounts to members (members' pages already do this by hand)",
            ),
            "the IM connectors",
        ),
    ]
}


def navigation_for(actor, current_path: str) -> list[dict]:
    sections: dict[str, list[dict]] = {}
    for item in NAVIGATION:
        needed = (item.permission,) if isinstance(item.permission, str) else item.permission
        if needed and not any(actor.may(permission) for permission in needed):
            continue
        url, built = item.resolve()
        active = current_path == url if url == "/" else current_path.startswith(url)
        sections.setdefault(item.section, []).append(
            {"label": item.label, "url": url, "active": active, "built": built}
        )
    return [{"title": title, "items": items} for title, items in sections.items()]


def areas_for(actor) -> list[Area]:
    """The not-yet-built areas this actor will be able to use."""
    built = {item.area for item in NAVIGATION if item.area and item.resolve()[1]}
    return [
        area for area in AREAS.values() if area.slug not in built and actor.may(area.permission)
    ]
