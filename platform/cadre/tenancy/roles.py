"""Built-in roles, the permissions they carry, and API key scopes.

A permission is "<resource>.<verb>". Roles are fixed, documented sets (docs/rbac.md renders this
module); object-level grants (django-guardian) add a permission on one object, e.g. "manage
the members of the Sales department" for a department HR lead.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.utils.translation import gettext_lazy as _

PERMISSIONS: dict[str, str] = {
    "organization.view": _("See the organization's profile"),
    "organization.manage": _("Change the organization's name, settings and locale"),
    "department.view": _("See the department tree"),
    "department.manage": _("Create, rename, move and archive departments"),
    "position.view": _("See positions"),
    "position.manage": _("Create, edit and archive positions"),
    "member.view": _("See the member directory"),
    "member.manage": _("Add, invite, edit, deactivate and reactivate members; map IM identities"),
    "member.assign_roles": _("Change members' roles (owner role only by owners)"),
    "grant.manage": _("Grant and revoke object-level permissions"),
    "apikey.view": _("See the organization's API keys (never their secrets)"),
    "apikey.manage": _("Create and revoke API keys"),
    "audit.view": _("Read the audit log"),
    "audit.export": _("Export the audit log"),
    "model.manage": _("Add model providers and their credentials, test them, set the default"),
    "template.view": _("See role templates"),
    "template.manage": _("Edit, review and publish role templates"),
    # Not an employee's: cases are saved from colleagues' turns and replies quote memories.
    "evaluation.view": _("Read evaluation suites, their cases and replay results"),
    "evaluation.manage": _("Build evaluation suites and cases, and start replays"),
    "deployment.manage": _("Dispatch, roll out and roll back agents"),
    "agent.view": _(
        "See every agent, its usage and which sessions it has (transcripts are personal)"
    ),
    "memory.view": _("Read organization, department, position and agent memory"),
    "memory.manage": _("Correct and delete shared and agent memory"),
    "memory.personal": _("Read, correct and delete members' personal memory"),
    "skill.view": _("Browse the organization's skills"),
    "skill.publish": _("Publish skills to the Hub"),
    "skill.review": _("Review skill candidates and versions"),
    "connector.manage": _("Add and configure IM connectors"),
    "policy.manage": _("Edit the policy chain and alert rules"),
    "confirmation.decide": _("Decide high-risk confirmations routed to the role"),
    "budget.view": _("See model usage, costs and budgets"),
    "budget.manage": _("Set usage and cost budgets"),
    "chat.use": _("Chat with one's own agents"),
}

_ALL = frozenset(PERMISSIONS)
_EMPLOYEE = frozenset(
    {
        "organization.view",
        "department.view",
        "position.view",
        "member.view",
        "template.view",
        "skill.view",
        "chat.use",
    }
)


@dataclass(frozen=True)
class Role:
    name: str
    label: str
    description: str
    permissions: frozenset[str]


ROLES: dict[str, Role] = {
    role.name: role
    for role in [
        Role(
            "owner",
            _("Owner"),
            _("Full control, including other owners and the organization."),
            _ALL,
        ),
        Role(
            "it_admin",
            _("IT admin"),
            _("Runs the platform: people, API keys, connectors, policies, audit."),
            _ALL - {"organization.manage"},
        ),
        Role(
            "business_admin",
            _("Business admin"),
            _("Builds role templates and dispatches agents to positions."),
            _EMPLOYEE
            | {
                "position.manage",
                "template.manage",
                "evaluation.view",
                "evaluation.manage",
                "deployment.manage",
                "agent.view",
                "memory.view",
                "skill.publish",
                "budget.view",
            },
        ),
        Role(
            "skill_reviewer",
            _("Skill reviewer"),
            _("Reviews skill candidates and versions before they reach the Hub."),
            _EMPLOYEE | {"skill.review", "skill.publish"},
        ),
        Role(
            "auditor",
            _("Auditor"),
            _("Reads everything, including the audit log and its exports; changes nothing."),
            _EMPLOYEE
            | {
                "apikey.view",
                "audit.view",
                "audit.export",
                "agent.view",
                "evaluation.view",
                "memory.view",
                "budget.view",
            },
        ),
        Role(
            "employee",
            _("Employee"),
            _("Chats with their own agents; sees the directory."),
            _EMPLOYEE,
        ),
    ]
}

ROLE_CHOICES = [(role.name, role.label) for role in ROLES.values()]


def permissions_for_roles(role_names) -> frozenset[str]:
    granted: set[str] = set()
    for name in role_names:
        role = ROLES.get(name)
        if role is not None:
            granted |= role.permissions
    return frozenset(granted)


# API key scopes: what a key may do, always capped by its creator's current permissions.
SCOPES: dict[str, tuple[str, frozenset[str]]] = {
    "org:read": (
        _("Read the organization, departments, positions, members"),
        frozenset(
            {"organization.view", "department.view", "position.view", "member.view", "apikey.view"}
        ),
    ),
    "org:write": (
        _("Manage departments, positions, members and IM identities"),
        frozenset({"department.manage", "position.manage", "member.manage", "grant.manage"}),
    ),
    "audit:read": (_("Read and export the audit log"), frozenset({"audit.view", "audit.export"})),
    "memory:read": (_("Search and read memory"), frozenset({"memory.view"})),
    "memory:write": (_("Write, correct and delete memory"), frozenset({"memory.manage"})),
    "agents:run": (_("Start runs and read agents"), frozenset({"agent.view", "chat.use"})),
    # Evaluation rides with templates: the pipelines that publish a template replay it first.
    # A key's reach stays its creator's, so an employee's key reads no evaluation.
    "templates:write": (
        _("Manage templates and deployments, and evaluate them (suites, cases, replays)"),
        frozenset(
            {
                "template.view",
                "template.manage",
                "deployment.manage",
                "evaluation.view",
                "evaluation.manage",
            }
        ),
    ),
    "hub:read": (_("Search and download skills"), frozenset({"skill.view"})),
    "hub:publish": (_("Publish skills to the Hub"), frozenset({"skill.view", "skill.publish"})),
    "hub:review": (
        _("Review skill candidates and versions"),
        frozenset({"skill.view", "skill.review"}),
    ),
    "connectors:write": (_("Add and configure IM connectors"), frozenset({"connector.manage"})),
    "policy:write": (
        _("Edit the policy chain, masking rules and alert rules"),
        frozenset({"policy.manage"}),
    ),
    "org:admin": (
        _("Change the organization's settings and members' roles"),
        frozenset({"organization.view", "organization.manage", "member.assign_roles"}),
    ),
    "models:write": (
        _("Add model providers and their credentials, test them, set the default"),
        frozenset({"model.manage"}),
    ),
    "usage:read": (_("Read model usage, costs and budgets"), frozenset({"budget.view"})),
    "budgets:write": (
        _("Set usage and cost budgets"),
        frozenset({"budget.view", "budget.manage"}),
    ),
    "keys:write": (
        _("Create and revoke API keys, never with more scopes than this key"),
        frozenset({"apikey.view", "apikey.manage"}),
    ),
}

# Permissions no scope grants: a person decides these, in the console or on an IM card.
# `confirmation.decide`: a high-risk action is confirmed by a human, never by a script;
# `memory.personal`: a member's personal memory is read by people, not by integrations.
CONSOLE_ONLY_PERMISSIONS: dict[str, str] = {
    "confirmation.decide": _("high-risk actions are confirmed by a person, not by a script"),
    "memory.personal": _("members' personal memory is read by people, not by integrations"),
}


def permissions_for_scopes(scopes) -> frozenset[str]:
    granted: set[str] = set()
    for scope in scopes:
        granted |= SCOPES[scope][1]
    return frozenset(granted)


# Object-level grants: which permissions may be granted on which kind of object.
GRANTABLE: dict[str, tuple[str, ...]] = {
    "department": ("department.manage", "member.manage", "skill.review"),
    "position": ("position.manage",),
}


def grant_codename(permission: str) -> str:
    """The django-guardian codename for a permission granted on an object."""
    return permission.replace(".", "_")
