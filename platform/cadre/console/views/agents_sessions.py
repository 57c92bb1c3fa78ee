"""Agents & sessions in the console: find agents by member, position or template version; an
agent's sessions; a session's transcript — each run with its steps (model calls, tool calls,
hooks, waits), tool effects, confirmations, context records, usage, cost and trace id; a run's
call chain (what it did in order, and the runs it delegated to, under one trace id).

Transcripts are personal data: a session and a call chain are read by the session's member,
the agent's owner and holders of `memory.personal` (`selectors.transcripts_readable`); anyone
else is answered 404, and `agent.view` alone lists an agent's sessions by count, not title."""

from __future__ import annotations

from django.shortcuts import get_object_or_404, render
from django.urls import path
from django.utils.translation import pgettext_lazy

from cadre.agents import selectors
from cadre.agents.call_chain import run_call_chain
from cadre.agents.evaluation.models import EvalSuite
from cadre.agents.models import Agent, Run, Session, Step, channel_choices
from cadre.console.scope_names import scope_names
from cadre.console.scoping import restricted, restricted_for
from cadre.console.views.agents_forms import AgentFilterForm
from cadre.console.views.base import paginate, query_without_page, require_permission
from cadre.governance.models import Confirmation, via_label
from cadre.governance.risk import level_phrase
from cadre.viewer.why import annotate_records

# Risk levels as people read them: templates write `{% translate level context "risk level" %}`.
RISK_LEVELS = (
    pgettext_lazy("risk level", "low"),
    pgettext_lazy("risk level", "medium"),
    pgettext_lazy("risk level", "high"),
    pgettext_lazy("risk level", "critical"),
)
# What started a run (`Run.trigger`), as people read it.
TRIGGER_LABELS = {
    "message": pgettext_lazy("run trigger", "message"),
    "event": pgettext_lazy("run trigger", "event"),
    "delegation": pgettext_lazy("run trigger", "delegation"),
    "subscription": pgettext_lazy("run trigger", "subscription"),
}


# A policy's decision (`allow`, `deny`, `require_confirmation`), as people read it.
ACTION_LABELS = {
    "allow": pgettext_lazy("policy action", "allow"),
    "deny": pgettext_lazy("policy action", "deny"),
    "require_confirmation": pgettext_lazy("policy action", "require confirmation"),
    "mask": pgettext_lazy("policy action", "mask"),
}


def channel_labels() -> dict:
    """A session's or deployment's channel (`console`, `feishu`, ...) as people read it."""
    return dict(channel_choices())


def status_labels() -> dict:
    """The statuses a call chain badges (runs, steps, confirmations), as people read them."""
    return {
        **dict(Confirmation.Status.choices),
        **dict(Step.Status.choices),
        **dict(Run.Status.choices),
    }


@require_permission("agent.view")
def agent_list(request):
    filters = AgentFilterForm(request.GET or None, actor=request.actor)
    agents = selectors.agent_find(request.actor)
    if filters.is_valid():
        data = filters.cleaned_data
        agents = selectors.agent_find(
            request.actor,
            member_id=data["member"].pk if data["member"] else None,
            position_id=data["position"].pk if data["position"] else None,
            version_id=data["version"].pk if data["version"] else None,
            status=data["status"],
            text=data["q"].strip(),
        )
    context = {
        "filters": filters,
        "page": paginate(request, agents),
        "query": query_without_page(request),
        "filtered": any(request.GET.get(name) for name in filters.fields),
    }
    template = (
        "console/agents/agents/_results.html" if request.htmx else "console/agents/agents/list.html"
    )
    return render(request, template, context)


@require_permission("agent.view")
def agent_detail(request, pk: int):
    agent = get_object_or_404(
        restricted(request, Agent, "view").select_related(
            "member", "member__department", "version", "version__template", "deployment"
        ),
        pk=pk,
    )
    sessions, private_sessions = selectors.agent_sessions_readable(request.actor, agent)
    return render(
        request,
        "console/agents/agents/detail.html",
        {
            "agent": agent,
            "page": paginate(request, sessions),
            "query": "",
            "private_sessions": private_sessions,
            "channel_labels": channel_labels(),
        },
    )


def _written_memories(step) -> list[dict]:
    output = step.output if isinstance(step.output, dict) else {}
    return [item for item in output.get("written_memories") or [] if isinstance(item, dict)]


@require_permission()
def session_detail(request, pk: int):
    """A session's transcript: its member's own conversation, also theirs to read here."""
    session = get_object_or_404(
        selectors.transcripts_readable(request.actor, Session.objects.all()).select_related(
            "agent", "agent__member", "agent__version"
        ),
        pk=pk,
    )
    transcript = selectors.session_transcript(session)
    errors_visible = selectors.run_errors_visible(request.actor)
    for item in transcript:  # a failed run's internal error only to those who manage models
        run = item["run"]
        item["error_message"] = (
            selectors.run_error_public(run.status, run.output)["message"] if run.error else ""
        )
    annotate_records(  # each model call's "why retrieved" (score components, passed over)
        request.actor,
        [record for item in transcript for record in item["context_records"]],
    )
    # "Remembered: … (preference, You)": the scopes a turn wrote to, named for people.
    written_scopes = scope_names(
        request.actor,
        [
            str(written.get("scope", ""))
            for item in transcript
            for entry in item["steps"]
            for written in _written_memories(entry["step"])
        ],
    )
    totals = {
        "tokens_in": sum(item["run"].tokens_in for item in transcript),
        "tokens_out": sum(item["run"].tokens_out for item in transcript),
        "cost": sum((item["run"].cost for item in transcript), 0),
    }
    # "Add to evaluation" on a turn: for those who build suites, into one of the suites, and
    # only where the turn may become a case: the person's own, or with `memory.personal`.
    actor = request.actor
    own = request.member is not None and session.member_id == request.member.pk
    can_build_suites = actor.has("evaluation.manage") and (own or actor.has("memory.personal"))
    eval_suites = (
        list(restricted_for(actor, EvalSuite, "view").order_by("name", "pk"))
        if can_build_suites
        else []
    )
    return render(
        request,
        "console/agents/agents/session.html",
        {
            "session": session,
            "agent": session.agent,
            "transcript": transcript,
            "totals": totals,
            "eval_suites": eval_suites,
            "can_build_suites": can_build_suites,
            "may_view_agents": actor.may("agent.view"),
            "errors_visible": errors_visible,
            "written_scopes": written_scopes,
            "channel_labels": channel_labels(),
            "trigger_labels": TRIGGER_LABELS,
        },
    )


@require_permission()
def run_call_chain_view(request, pk: int):
    """Readable by whoever may read the run's transcript: its member, the agent's owner, or
    `memory.personal` (another member's run is not found, whatever `agent.view` says)."""
    run = get_object_or_404(
        selectors.transcripts_readable(request.actor, Run.objects.all()).select_related(
            "agent", "member", "session"
        ),
        pk=pk,
    )
    chain = run_call_chain(request.actor, run)
    agents = selectors.agents_by_id(
        run.organization_id, {run.agent_id, *(child["run"]["agent"] for child in chain["children"])}
    )
    sections = [
        {**section, "agent": agents.get(section["run"]["agent"])}
        for section in (chain, *chain["children"])
    ]
    events = [
        event
        for section in sections
        for event in section.get("events") or []
        if event.get("kind") == "confirmation"
    ]
    confirmations = (
        Confirmation.objects.filter(
            organization_id=run.organization_id,
            pk__in=[event["confirmation"] for event in events],
        ).select_related("requester")
        if events
        else []
    )
    summaries = {confirmation.pk: confirmation.summary_lines for confirmation in confirmations}
    for event in events:  # a confirmation's summary, risk and channel in the reader's words
        event["summary_lines"] = summaries.get(event["confirmation"], [])
        event["risk_phrase"] = level_phrase(str(event.get("risk") or ""))
        event["via_label"] = via_label(str(event.get("decided_via") or ""))
    return render(
        request,
        "console/agents/agents/call_chain.html",
        {
            "run": run,
            "errors_visible": selectors.run_errors_visible(request.actor),
            "chain": chain,
            "sections": sections,
            # the crumbs lead through the agents pages; the transcript is readable (same gate)
            "may_view_agents": request.actor.may("agent.view"),
            "may_view_transcript": True,
            "trigger_labels": TRIGGER_LABELS,
            "status_labels": status_labels(),
            "action_labels": ACTION_LABELS,
        },
    )


urlpatterns = [
    path("agents/", agent_list, name="agents"),
    path("agents/<int:pk>/", agent_detail, name="agent"),
    path("sessions/<int:pk>/", session_detail, name="session"),
    path("runs/<int:pk>/call-chain/", run_call_chain_view, name="run_call_chain"),
]
