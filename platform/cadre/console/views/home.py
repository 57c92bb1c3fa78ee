"""The home page and the organization switcher.

Home is the person's own first: their agents (each a link to chat), their recent
conversations and what waits for their decision. Those who run the organization also find
what to do first (a model, an IM connector, people, a dispatched template — each done or not),
whether agents answer with the offline model, the organization's figures and its recent
activity told in sentences."""

from __future__ import annotations

from django.contrib import messages
from django.db.models import Count, Q
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_POST

from cadre.agents import selectors as agent_selectors
from cadre.agents.models import Agent, Deployment, Session
from cadre.agents.providers import ProviderUnavailable, organization_default, resolve
from cadre.console.activity import agent_names, confirmation_sentence, event_sentences
from cadre.console.scope_names import agent_short_name
from cadre.console.scoping import in_organization_of, restricted_for
from cadre.console.views.base import require_permission
from cadre.governance.models import AuditEvent, Confirmation, ConfirmationVote
from cadre.identifiers import parse_pk
from cadre.tenancy.middleware import SESSION_KEY, session_memberships
from cadre.tenancy.models import ApiKey, Department, Member, Position
from cadre.tenancy.roles import ROLES
from cadre.tenancy.services.notices import notices_shown
from connectors.models import Connector

RECENT_EVENTS = 8
RECENT_CONVERSATIONS = 6
WAITING_SHOWN = 10
# What an employee holds: anyone with more runs (part of) the organization and sees its figures.
EMPLOYEE_PERMISSIONS = ROLES["employee"].permissions
# The setup steps a new owner takes first, and who may take each.
SETUP_PERMISSIONS = ("model.manage", "connector.manage", "member.manage", "deployment.manage")


def _runs_the_organization(actor) -> bool:
    """More than an employee's permissions, organization-wide or through a grant (a
    department's HR lead)."""
    return bool(set(actor.permissions) - EMPLOYEE_PERMISSIONS) or any(
        actor.may(permission) for permission in SETUP_PERMISSIONS
    )


def _my_agents(actor) -> list[dict]:
    return [
        {"agent": agent, "name": agent_short_name(agent)}
        for agent in agent_selectors.chat_agents(actor).select_related("member")
    ]


def _recent_conversations(actor) -> list[Session]:
    if actor.member is None or not actor.has("chat.use"):
        return []
    sessions = list(
        in_organization_of(actor, Session)
        .filter(member=actor.member, agent__member=actor.member)
        .select_related("agent", "agent__member")
        .order_by("-last_activity_at", "-pk")[:RECENT_CONVERSATIONS]
    )
    for session in sessions:
        session.agent_name = agent_short_name(session.agent)
    return sessions


def _waiting_for_me(actor) -> list[dict]:
    """The confirmations this person may decide now (pending, not expired, not voted on)."""
    member = actor.member
    if member is None:
        return []
    pending = list(
        in_organization_of(actor, Confirmation)
        .filter(
            status=Confirmation.Status.PENDING,
            expires_at__gt=timezone.now(),
            decider_ids__contains=[member.pk],
        )
        .exclude(pk__in=ConfirmationVote.objects.filter(member=member).values("confirmation_id"))
        .select_related("requester")
        .order_by("expires_at")[:WAITING_SHOWN]
    )
    names = agent_names(actor.organization.pk, [c.agent_id for c in pending])
    return [
        {
            "confirmation": confirmation,
            "sentence": confirmation_sentence(
                confirmation, names.get(confirmation.agent_id, ""), member.pk
            ),
        }
        for confirmation in pending
    ]


def _runs_offline(model_settings, organization_id: int) -> bool:
    try:
        config, settings = resolve(model_settings, organization_id)
    except ProviderUnavailable:
        return False  # broken, not offline: the run fails and says so
    return config is None and settings.get("provider", "offline") == "offline"


def _offline(actor, *, everyone: bool) -> dict | None:
    """How many active agents (the actor's own, or with `everyone` the organization's) answer
    with the built-in offline model; None when none does."""
    agents = in_organization_of(actor, Agent).filter(status=Agent.Status.ACTIVE)
    if not everyone:
        if actor.member is None:
            return None
        agents = agents.filter(member=actor.member)
    settings_by_version: dict[int, dict] = {}
    counts: dict[int, int] = {}
    for version_id, model_settings, count in (
        agents.values_list("version_id", "version__model_settings")
        .annotate(count=Count("pk"))
        .values_list("version_id", "version__model_settings", "count")
    ):
        settings_by_version[version_id] = model_settings or {}
        counts[version_id] = count
    offline = sum(
        counts[version_id]
        for version_id, model_settings in settings_by_version.items()
        if _runs_offline(model_settings, actor.organization.pk)
    )
    if not offline:
        return None
    return {"agents": offline, "total": sum(counts.values())}


def _checklist(actor) -> dict | None:
    """The first steps, each done or not with its link; None once all are done (or when the
    actor may take none of them)."""
    if not any(actor.may(permission) for permission in SETUP_PERMISSIONS):
        return None
    default = organization_default(actor.organization.pk)
    connectors = (
        in_organization_of(actor, Connector)
        .filter(status=Connector.Status.ACTIVE)
        .exclude(platform="webhook")
    )
    others = in_organization_of(actor, Member).exclude(status=Member.Status.DEACTIVATED)
    if actor.member is not None:
        others = others.exclude(pk=actor.member.pk)
    deployments = in_organization_of(actor, Deployment).exclude(status=Deployment.Status.STOPPED)
    people = others.count()
    dispatched = deployments.count()
    steps = [
        {
            "key": "model",
            "title": _("Connect a language model"),
            "done": default is not None,
            "note": _("Agents answer with %(name)s.") % {"name": default.name}
            if default is not None
            else _(
                "Until a model provider is the default, agents answer with the built-in "
                "offline model, which only strings together lines of their context."
            ),
            "url": reverse("console:models") if actor.may("model.manage") else "",
            "action": _("Add a model provider"),
        },
        {
            "key": "im",
            "title": _("Connect your IM"),
            "done": connectors.exists(),
            "note": _(
                "Employees then talk to their agents in Feishu/Lark, WeCom, DingTalk or Slack."
            ),
            "url": reverse("console:connector_create") if actor.may("connector.manage") else "",
            "action": _("Add an IM connector"),
        },
        {
            "key": "people",
            "title": _("Invite your people"),
            "done": people > 0,
            "note": ngettext(
                "%(count)s other member so far.", "%(count)s other members so far.", people
            )
            % {"count": people},
            "url": reverse("console:member_invite") if actor.may("member.manage") else "",
            "action": _("Invite someone"),
        },
        {
            "key": "dispatch",
            "title": _("Dispatch a role template"),
            "done": dispatched > 0,
            "note": _(
                "Dispatching a published template to positions, departments or people gives "
                "each of them an agent."
            ),
            "url": reverse("console:deployment_create") if actor.may("deployment.manage") else "",
            "action": _("Dispatch a template"),
        },
    ]
    done = sum(1 for step in steps if step["done"])
    if done == len(steps):
        return None
    return {"steps": steps, "done": done, "total": len(steps)}


def _figures(actor) -> dict:
    context: dict = {}
    if actor.may("member.view"):
        by_status = dict(
            restricted_for(actor, Member, "view")
            .values_list("status")
            .annotate(count=Count("pk"))
            .values_list("status", "count")
        )
        context["members"] = {
            "active": by_status.get(Member.Status.ACTIVE, 0),
            "invited": by_status.get(Member.Status.INVITED, 0),
            "deactivated": by_status.get(Member.Status.DEACTIVATED, 0),
            "total": sum(by_status.values()),
        }
    if actor.may("department.view"):
        context["departments"] = (
            restricted_for(actor, Department, "view").filter(is_archived=False).count()
        )
    if actor.may("position.view"):
        context["positions"] = (
            restricted_for(actor, Position, "view").filter(is_archived=False).count()
        )
    if actor.may("apikey.view"):
        now = timezone.now()
        context["api_keys"] = (
            restricted_for(actor, ApiKey, "view")
            .filter(revoked_at=None)
            .filter(Q(expires_at=None) | Q(expires_at__gt=now))
            .count()
        )
    return context


@require_permission()
def home(request):
    actor = request.actor
    organization_view = _runs_the_organization(actor)
    context: dict = {
        "organization_view": organization_view,
        "my_agents": _my_agents(actor),
        "conversations": _recent_conversations(actor),
        "waiting": _waiting_for_me(actor),
        "offline": _offline(actor, everyone=organization_view),
        "may_manage_models": actor.may("model.manage"),
        "chat_user": actor.member is not None and actor.has("chat.use"),
    }
    if organization_view:
        context["checklist"] = _checklist(actor)
        context.update(_figures(actor))
        if actor.may("audit.view"):
            context["recent_events"] = event_sentences(
                actor,
                restricted_for(actor, AuditEvent, "view").order_by("-sequence")[:RECENT_EVENTS],
            )
    context["notices"] = notices_shown(actor=actor)
    return render(request, "console/home.html", context)


@require_POST
@require_permission()
def switch_organization(request):
    """Act in another organization — only one the user has an active membership in."""
    organization_id = parse_pk(request.POST.get("organization", ""))
    if organization_id is None:
        raise Http404(_("No such organization."))
    member = (
        session_memberships(request.session, request.user)
        .filter(organization_id=organization_id)
        .first()
    )
    if member is None:
        raise Http404(_("No such organization."))
    request.session[SESSION_KEY] = member.organization_id
    messages.success(
        request,
        _("You are now working in %(organization)s.") % {"organization": member.organization.name},
    )
    # Not back to the page we came from: its objects belong to the previous organization
    # and would be 404 in this one.
    return redirect("console:home")
