"""Chat in the console: an employee talks to one of their own agents (a colleague's agent or
session does not exist for them). Pages render the conversation; with JavaScript the replies
stream over the `ws/chat/<session id>/` websocket (`cadre.agents.consumers`), without it the
forms below post and the page shows the reply once the run has finished."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import path, reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from cadre.agents import selectors
from cadre.agents.hooks.corrections import EVENT as MEMORY_FEEDBACK
from cadre.agents.models import MODEL_FAILURE, RunEvent
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.console.forms import add_service_error
from cadre.console.views.agents_forms import ChatMessageForm
from cadre.console.views.agents_sessions import channel_labels
from cadre.console.views.base import posted, require_permission
from cadre.errors import CadreError
from cadre.governance.confirmations import confirmation_decide
from cadre.skills import selectors as skill_selectors
from cadre.skills.models import SkillProposal


def _own_agent_or_404(request, pk: int):
    agent = selectors.chat_agents(request.actor).filter(pk=pk).first()
    if agent is None:
        raise Http404(_("No such agent."))
    return agent


def _own_session_or_404(request, pk: int):
    session = selectors.chat_session_get(request.actor, pk)
    if session is None:
        raise Http404(_("No such conversation."))
    return session


def _answered_by(name: str) -> str:
    """Which model answered, the built-in offline model in the reader's words."""
    return _("offline model") if name == selectors.OFFLINE_MODEL else name


def _chat_page(request, agent, session=None, form=None, status: int = 200):
    agents = list(selectors.chat_agents(request.actor))
    sessions = selectors.chat_sessions(agent)
    turns, pending, after = [], [], 0
    if session is not None:
        transcript = selectors.chat_transcript(request.actor, session)
        pending, after = transcript["pending"], transcript["after"]
        # The skill proposals drafted from this person's corrections, still waiting for them.
        proposals = {
            proposal.run_id: proposal
            for proposal in skill_selectors.proposals_for(request.actor).filter(
                run_id__in=[run.pk for run in transcript["runs"]],
                status=SkillProposal.Status.PENDING,
            )
        }
        # What a correction did to memory ("Updated memory: …"), told under its answer.
        feedback = {
            event.run_id: event.data.get("message", "")
            for event in RunEvent.objects.filter(
                run_id__in=[run.pk for run in transcript["runs"]], kind=MEMORY_FEEDBACK
            ).only("run_id", "data")
        }
        # Which model answered each reply (the live page learns it from the reply's frame).
        answered_by = selectors.runs_answered_by([run.pk for run in transcript["runs"]])
        turns = [
            {
                **turn,
                "proposal": proposals.get(turn["run"].pk),
                "memory_feedback": feedback.get(turn["run"].pk, ""),
                "answered_by": _answered_by(answered_by.get(turn["run"].pk, "")),
            }
            for turn in transcript["turns"]
        ]
    return render(
        request,
        "console/agents/chat/chat.html",
        {
            "agents": agents,
            "agent": agent,
            "sessions": sessions,
            "session": session,
            "turns": turns,
            "pending": pending,
            "after": after,
            "form": form or ChatMessageForm(),
            "runnable": agent.status == agent.Status.ACTIVE,
            # A run failed by its model endpoint points those who can fix it to Models.
            "models_url": reverse("console:models") if request.actor.has("model.manage") else "",
            "model_failure": MODEL_FAILURE,
            # How long a queued message waits before the page asks whether workers take runs.
            "queue_grace": int(selectors.CHAT_QUEUE_GRACE.total_seconds()),
            "channel_labels": channel_labels(),
        },
        status=status,
    )


@require_permission("chat.use")
def chat(request):
    agents = list(selectors.chat_agents(request.actor))
    active = [agent for agent in agents if agent.status == agent.Status.ACTIVE]
    if active and "pick" not in request.GET:
        return redirect("console:chat_agent", pk=active[0].pk)
    return render(request, "console/agents/chat/pick.html", {"agents": agents})


@require_permission("chat.use")
def chat_agent(request, pk: int):
    """An agent's conversations; posting starts a new one with the first message."""
    agent = _own_agent_or_404(request, pk)
    form = ChatMessageForm(posted(request))
    if request.method == "POST" and form.is_valid():
        try:
            run = runtime.run_start(
                actor=request.actor, agent=agent, text=form.cleaned_data["text"], channel="console"
            )
        except CadreError as error:
            add_service_error(form, error)
        else:
            return redirect("console:chat_session", pk=run.session_id)
    status = 400 if request.method == "POST" else 200
    return _chat_page(
        request, agent, form=form if request.method == "POST" else None, status=status
    )


@require_permission("chat.use")
def chat_session(request, pk: int):
    session = _own_session_or_404(request, pk)
    return _chat_page(request, session.agent, session)


@require_permission("chat.use")
@require_POST
def chat_send(request, pk: int):
    """Continue a conversation without the websocket (the page then reloads)."""
    session = _own_session_or_404(request, pk)
    form = ChatMessageForm(request.POST)
    if form.is_valid():
        try:
            runtime.run_start(
                actor=request.actor,
                agent=session.agent,
                text=form.cleaned_data["text"],
                session=session,
            )
        except CadreError as error:
            add_service_error(form, error)
        else:
            return redirect("console:chat_session", pk=session.pk)
    return _chat_page(request, session.agent, session, form=form, status=400)


@require_permission("chat.use")
@require_POST
def chat_decide(request, pk: int, confirmation_pk: int):
    """Approve or reject a confirmation one of this conversation's runs waits on."""
    session = _own_session_or_404(request, pk)
    confirmation = selectors.chat_confirmation_get(request.actor, session.pk, confirmation_pk)
    if confirmation is None:
        raise Http404(_("No such confirmation."))
    decision = request.POST.get("decision", "")
    try:
        confirmation_decide(
            confirmation=confirmation,
            actor=request.actor,
            decision=decision,
            via="console",
            reason=request.POST.get("reason", "")[:2000],
        )
    except CadreError as error:
        messages.error(request, error.message)
    else:
        messages.success(
            request,
            _("Approved: the agent continues.") if decision == "approve" else _("Rejected."),
        )
    return redirect("console:chat_session", pk=session.pk)


def _own_run_or_404(request, session, run_pk: int):
    run = selectors.chat_queued_run(request.actor, session.pk, run_pk)
    if run is None:
        raise Http404(_("No such message."))
    return run


@require_permission("chat.use")
@require_POST
def chat_cancel(request, pk: int, run_pk: int):
    """Cancel a message's run (one still queued or going) of this conversation."""
    session = _own_session_or_404(request, pk)
    run = _own_run_or_404(request, session, run_pk)
    try:
        runtime.run_cancel(actor=request.actor, run=run, reason="cancelled in the chat")
    except CadreError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, _("Cancelled: the agent will not answer that message."))
    return redirect("console:chat_session", pk=session.pk)


@require_permission("chat.use")
@require_POST
def chat_retry(request, pk: int, run_pk: int):
    """Hand a queued message's run to the workers again."""
    session = _own_session_or_404(request, pk)
    run = _own_run_or_404(request, session, run_pk)
    try:
        runtime.run_requeue(actor=request.actor, run=run)
    except CadreError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, _("Queued again."))
    return redirect("console:chat_session", pk=session.pk)


urlpatterns = [
    path("chat/", chat, name="chat"),
    path("chat/agents/<int:pk>/", chat_agent, name="chat_agent"),
    path("chat/sessions/<int:pk>/", chat_session, name="chat_session"),
    path("chat/sessions/<int:pk>/send/", chat_send, name="chat_send"),
    path(
        "chat/sessions/<int:pk>/confirmations/<int:confirmation_pk>/decide/",
        chat_decide,
        name="chat_decide",
    ),
    path("chat/sessions/<int:pk>/runs/<int:run_pk>/cancel/", chat_cancel, name="chat_cancel"),
    path("chat/sessions/<int:pk>/runs/<int:run_pk>/retry/", chat_retry, name="chat_retry"),
]
