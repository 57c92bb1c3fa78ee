"""Memory scopes as a person reads them on the pages an employee sees: "You", "Your agent Sales
assistant", "Sales team" — never `user:2` or `agent:1`, which stay in the admin and audit views
(and in the API's `scope_key`)."""

from __future__ import annotations

from django.utils.translation import gettext as _

from cadre.agents.models import Agent
from cadre.memory import selectors
from cadre.memory.models import Scope, scope_parts
from cadre.tenancy.models import Department, Member, Position

# A department already called "… team" or "… department" is not made a "… team team".
_GROUP_WORDS = {"team", "department", "dept", "group", "division", "office", "unit"}
# The same for a Chinese name: "销售部" is not made a "销售部团队".
_CHINESE_GROUP_ENDINGS = ("部", "组", "团队", "中心", "处", "科", "室", "队")


def agent_short_name(agent) -> str:
    """An agent's name without its owner's (agents are named "<role> · <member>" when
    dispatched): "Sales assistant", for the person it serves."""
    owner = agent.member.display_name if agent.member_id else ""
    suffix = f" · {owner}"
    if owner and agent.name.endswith(suffix):
        return agent.name[: -len(suffix)]
    return agent.name


def shows_scope_keys(actor) -> bool:
    """Those who read shared memory for the organization (memory.view: admins, auditors) also
    see each scope's key; everyone else reads names only."""
    return actor.has("memory.view")


def scope_names(actor, keys) -> dict[str, str]:
    """A readable name for each scope key, from the actor's point of view (a few queries)."""
    keys = list(dict.fromkeys(keys))
    ids: dict[str, set[int]] = {}
    for key in keys:
        try:
            scope, scope_id = scope_parts(key)
        except ValueError:
            continue
        if scope_id is not None:
            ids.setdefault(scope, set()).add(scope_id)
    organization = actor.organization
    viewer = selectors.acting_member(actor)
    members = dict(
        Member.objects.filter(
            organization=organization, pk__in=ids.get(Scope.USER, ())
        ).values_list("pk", "display_name")
    )
    departments = dict(
        Department.objects.filter(
            organization=organization, pk__in=ids.get(Scope.DEPARTMENT, ())
        ).values_list("pk", "name")
    )
    positions = dict(
        Position.objects.filter(
            organization=organization, pk__in=ids.get(Scope.POSITION, ())
        ).values_list("pk", "name")
    )
    agents = {
        agent.pk: agent
        for agent in Agent.objects.filter(
            organization=organization, pk__in=ids.get(Scope.AGENT, ())
        ).select_related("member")
    }
    names = {}
    for key in keys:
        try:
            scope, scope_id = scope_parts(key)
        except ValueError:
            names[key] = _("Another scope")
            continue
        if scope == Scope.ORGANIZATION:
            names[key] = _("Everyone at %(organization)s") % {"organization": organization.name}
        elif scope == Scope.USER:
            if viewer is not None and scope_id == viewer.pk:
                names[key] = _("You")
            else:
                names[key] = members.get(scope_id) or _("A former member")
        elif scope == Scope.AGENT:
            agent = agents.get(scope_id)
            if agent is None:
                names[key] = _("A removed agent")
            elif viewer is not None and agent.member_id == viewer.pk:
                names[key] = _("Your agent %(name)s") % {"name": agent_short_name(agent)}
            else:
                names[key] = _("%(member)s's agent %(name)s") % {
                    "member": agent.member.display_name,
                    "name": agent_short_name(agent),
                }
        elif scope == Scope.DEPARTMENT:
            name = departments.get(scope_id)
            if name is None:
                names[key] = _("A removed team")
            elif (name.split() or [""])[-1].lower() in _GROUP_WORDS or name.endswith(
                _CHINESE_GROUP_ENDINGS
            ):
                names[key] = name
            else:
                names[key] = _("%(name)s team") % {"name": name}
        else:
            name = positions.get(scope_id)
            names[key] = (
                _("Everyone in the %(name)s role") % {"name": name} if name else _("A removed role")
            )
    return names


def scope_choices(actor) -> list[tuple[str, str]]:
    """The scope filter's options (`memory.selectors.scope_choices`), named for people."""
    keys = [key for key, _label in selectors.scope_choices(actor)]
    names = scope_names(actor, keys)
    return [(key, names[key]) for key in keys]
