"""Audit events told as sentences for the home page's activity ("Sales assistant asks to send a
message — waiting for your decision"), never as codes (`confirmation 1 im_send (pending)`).
The audit log itself keeps the codes, ids and keys: each sentence links to its event."""

from __future__ import annotations

import re

from django.utils.text import capfirst
from django.utils.translation import get_language, gettext_lazy
from django.utils.translation import gettext as _

from cadre.agents.models import Agent
from cadre.console.scope_names import agent_short_name
from cadre.console.scoping import in_organization_of
from cadre.console.templatetags.console import target_type_label
from cadre.governance.models import Confirmation

# What a tool asks to do, for "<agent> asks to …" (another tool: "use the <name> tool").
TOOL_PHRASES = {
    "im_send": gettext_lazy("send a message"),
    "memory_write": gettext_lazy("remember something"),
    "memory_search": gettext_lazy("search its memory"),
    "http_request": gettext_lazy("make a web request"),
    "task_create": gettext_lazy("create a task"),
    "delegate": gettext_lazy("ask another agent for help"),
    "notify_subscribers": gettext_lazy("notify the agents that follow it"),
    "await_event": gettext_lazy("wait for an event"),
}

# Targets whose audit label is their name; any other target (a memory, a run, a step) is
# labelled with ids and keys, and is named by its kind only.
_NAMED_TARGETS = {
    "member",
    "department",
    "position",
    "organization",
    "agenttemplate",
    "templateversion",
    "deployment",
    "agent",
    "connector",
    "modelproviderconfig",
    "apikey",
    "skillpackage",
    "skillversion",
    "budget",
    "alertrule",
    "alert",
    "identityprovider",
    "mcpserver",
    "evalsuite",
    "maskingrule",
    "scimtoken",
}

# "{actor}" and "{target}" are filled in; the most frequent actions of a first week.
SENTENCES = {
    "organization.create": gettext_lazy("{actor} created the organization"),
    "organization.update": gettext_lazy("{actor} changed the organization's settings"),
    "member.create": gettext_lazy("{actor} added {target}"),
    "member.invite": gettext_lazy("{actor} invited {target}"),
    "member.invitation_accept": gettext_lazy("{target} accepted the invitation and joined"),
    "member.invitation_revoke": gettext_lazy("{actor} withdrew the invitation of {target}"),
    "member.update": gettext_lazy("{actor} updated {target}"),
    "member.deactivate": gettext_lazy("{actor} deactivated {target}"),
    "member.reactivate": gettext_lazy("{actor} reactivated {target}"),
    "department.create": gettext_lazy("{actor} created the department {target}"),
    "position.create": gettext_lazy("{actor} created the position {target}"),
    "template.create": gettext_lazy("{actor} created the role template {target}"),
    "template.submit": gettext_lazy("{actor} submitted {target} for review"),
    "template.publish": gettext_lazy("{actor} published {target}"),
    "deployment.create": gettext_lazy("{actor} dispatched {target}"),
    "deployment.stop": gettext_lazy("{actor} stopped the agents of {target}"),
    "provider.create": gettext_lazy("{actor} added the model provider {target}"),
    "provider.test": gettext_lazy("{actor} tested the model provider {target}"),
    "provider.set_default": gettext_lazy("{actor} made {target} the default model provider"),
    "connector.create": gettext_lazy("{actor} added the IM connector {target}"),
    "connector.test_credentials": gettext_lazy("{actor} tested the credentials of {target}"),
    "apikey.create": gettext_lazy("{actor} created the API key {target}"),
    "apikey.revoke": gettext_lazy("{actor} revoked the API key {target}"),
    "memory.add": gettext_lazy("{actor} saved a memory"),
    "memory.update": gettext_lazy("{actor} corrected a memory"),
    "memory.delete": gettext_lazy("{actor} deleted a memory"),
    "hub.version.publish": gettext_lazy("{actor} published the skill {target}"),
    "policy.chain_update": gettext_lazy("{actor} changed the policy chain"),
    "run.cancel": gettext_lazy("{actor} cancelled an agent's task"),
    "run.requeue": gettext_lazy("{actor} retried an agent's task"),
    "demo.seed": gettext_lazy("Sample data was added to try Cadre with"),
    "demo.reset": gettext_lazy("{actor} removed the sample data"),
    "sso.signin": gettext_lazy("{actor} signed in with single sign-on"),
}

_VERBS = {
    "create": gettext_lazy("created"),
    "add": gettext_lazy("added"),
    "update": gettext_lazy("updated"),
    "delete": gettext_lazy("deleted"),
    "remove": gettext_lazy("removed"),
    "revoke": gettext_lazy("revoked"),
    "publish": gettext_lazy("published"),
    "start": gettext_lazy("started"),
    "stop": gettext_lazy("stopped"),
    "test": gettext_lazy("tested"),
    "approve": gettext_lazy("approved"),
    "reject": gettext_lazy("rejected"),
    "restore": gettext_lazy("restored"),
    "rollback": gettext_lazy("rolled back"),
    "sync": gettext_lazy("synchronised"),
    "submit": gettext_lazy("submitted"),
    "draft": gettext_lazy("drafted"),
    "invite": gettext_lazy("invited"),
    "vote": gettext_lazy("voted on"),
    "accept": gettext_lazy("accepted"),
    "dismiss": gettext_lazy("dismissed"),
    "confirm": gettext_lazy("confirmed"),
    "rotate_credentials": gettext_lazy("rotated the credentials of"),
    "acknowledge": gettext_lazy("acknowledged"),
    "resolve": gettext_lazy("resolved"),
    "bind": gettext_lazy("connected"),
    "unbind": gettext_lazy("disconnected"),
}

_OWNER_SUFFIX = re.compile(r"\s*\(\d+\)$")  # an agent's label: "<name> (<member id>)"


def tool_phrase(tool: str) -> str:
    phrase = TOOL_PHRASES.get(tool)
    return str(phrase) if phrase else _("use the %(tool)s tool") % {"tool": tool}


def confirmation_sentence(confirmation: Confirmation, agent_name: str, viewer_id) -> str:
    """ "Sales assistant asks to send a message — waiting for your decision"."""
    asks = _("%(agent)s asks to %(action)s") % {
        "agent": agent_name or _("An agent"),
        "action": tool_phrase(confirmation.tool),
    }
    status = confirmation.status
    if status == Confirmation.Status.PENDING:
        if viewer_id is not None and viewer_id in (confirmation.decider_ids or []):
            return _("%(asks)s — waiting for your decision") % {"asks": asks}
        return _("%(asks)s — waiting for a decision") % {"asks": asks}
    outcome = {
        Confirmation.Status.APPROVED: _("approved"),
        Confirmation.Status.REJECTED: _("rejected"),
        Confirmation.Status.EXPIRED: _("expired, nothing was done"),
        Confirmation.Status.CANCELLED: _("cancelled"),
    }.get(status, status)
    return f"{asks} — {outcome}"


def agent_names(organization_id: int, agent_ids) -> dict[int, str]:
    agents = Agent.objects.filter(
        organization_id=organization_id, pk__in={pk for pk in agent_ids if pk}
    ).select_related("member")
    return {agent.pk: agent_short_name(agent) for agent in agents}


def _actor_name(event, viewer_id) -> str:
    if event.actor_type == "member" and viewer_id is not None and event.actor_id == str(viewer_id):
        return _("You")
    if event.actor_type == "system":
        return _("Cadre")
    return event.actor_label or capfirst(event.get_actor_type_display())


def _target_name(event) -> str:
    if event.target_type not in _NAMED_TARGETS or not event.target_label:
        return ""
    label = event.target_label
    return _OWNER_SUFFIX.sub("", label) if event.target_type == "agent" else label


def _generic(event, actor: str, target: str) -> str:
    noun, _dot, verb = event.action.rpartition(".")
    kind = target_type_label(event.target_type) or noun.replace(".", " ").replace("_", " ")
    done = _VERBS.get(verb)
    thing = (
        _("%(kind)s “%(target)s”") % {"kind": kind.lower(), "target": target}
        if target
        else _("a %(kind)s") % {"kind": kind.lower()}
    )
    if done is None:
        # An action without a verb of its own ("tool.im_send", "alert.open"): say what and on
        # what, in words.
        return _("%(actor)s: %(what)s, %(thing)s") % {
            "actor": actor,
            # English reads the verb as a word; another language shows the action's code.
            "what": verb.replace("_", " ") if get_language() in (None, "en") else event.action,
            "thing": thing,
        }
    # "You created department “Sales”": the verb is a past participle, the thing its object.
    return _("%(actor)s %(done)s %(thing)s") % {"actor": actor, "done": done, "thing": thing}


def event_sentences(actor, events) -> list[dict]:
    """Each event with its sentence (from the actor's point of view: "You", "your decision")."""
    events = list(events)
    viewer = actor.member
    viewer_id = viewer.pk if viewer is not None else None
    confirmation_ids = {
        int(event.target_id)
        for event in events
        if event.target_type == "confirmation" and event.target_id.isdigit()
    }
    confirmations = {
        confirmation.pk: confirmation
        for confirmation in in_organization_of(actor, Confirmation).filter(pk__in=confirmation_ids)
    }
    agents = agent_names(
        actor.organization.pk, [confirmation.agent_id for confirmation in confirmations.values()]
    )
    rows = []
    for event in events:
        who = _actor_name(event, viewer_id)
        confirmation = (
            confirmations.get(int(event.target_id))
            if event.target_type == "confirmation" and event.target_id.isdigit()
            else None
        )
        waiting = False
        if confirmation is not None:
            agent = agents.get(confirmation.agent_id, "")
            request = confirmation_sentence(confirmation, agent, viewer_id)
            if event.action == "confirmation.request":
                sentence = request
                waiting = confirmation.status == Confirmation.Status.PENDING and (
                    viewer_id in (confirmation.decider_ids or [])
                )
            else:
                verb = event.action.rpartition(".")[2]
                sentence = _("%(actor)s %(decided)s: %(request)s") % {
                    "actor": who,
                    "decided": {
                        "approve": _("approved"),
                        "reject": _("rejected"),
                        "vote": _("voted"),
                        "expire": _("let it expire"),
                        "cancel": _("cancelled"),
                    }.get(verb, verb.replace("_", " ")),
                    "request": _("%(agent)s asked to %(action)s")
                    % {"agent": agent or _("an agent"), "action": tool_phrase(confirmation.tool)},
                }
        else:
            target = _target_name(event)
            template = SENTENCES.get(event.action)
            sentence = (
                str(template).format(actor=who, target=target or _("someone"))
                if template is not None
                else _generic(event, who, target)
            )
        rows.append(
            {
                "event": event,
                "sentence": capfirst(sentence),
                "confirmation": confirmation,
                "waiting": waiting,
            }
        )
    return rows
