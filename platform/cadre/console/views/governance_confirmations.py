"""Confirmations: the live queue of high-risk actions waiting for a decision, each one's full
context, approve / reject (through `confirmation_decide`, decided_via=console) and the history.

The queue is rendered here; `static/console/confirmations.js` listens on `ws/confirmations/`
and re-fetches the queue fragment when something changes, so the page also works without it.
"""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.translation import gettext, ngettext
from django.views.decorators.http import require_POST

from cadre.agents.call_chain import call_chain_runs
from cadre.agents.models import Agent
from cadre.console.scoping import restricted_for
from cadre.console.views.base import (
    denied,
    paginate,
    query_without_page,
    require_permission,
)
from cadre.console.views.governance_forms import ConfirmationHistoryForm, DecisionForm
from cadre.errors import CadreError, NotPermitted
from cadre.governance.confirmations import confirmation_decide
from cadre.governance.models import Confirmation, ConfirmationVote
from cadre.tenancy.models import Member

QUEUE_LIMIT = 200


def _visible(actor):
    """What the actor may see: deciders and auditors everything, others what they requested
    or may decide (Confirmation.grant_filter)."""
    return restricted_for(actor, Confirmation, "view")


def _gate(request):
    """None when the actor has something to do here, else the 403 page."""
    actor = request.actor
    if actor.has("confirmation.decide") or actor.has("audit.view"):
        return None
    if _visible(actor).exists():
        return None
    return denied(
        request,
        gettext(
            "No confirmations are routed to you: this page needs the “Decide high-risk "
            "confirmations routed to the role” permission (confirmation.decide), or a "
            "confirmation you requested or may decide."
        ),
    )


def _voted_ids(member, confirmations) -> set[int]:
    if member is None:
        return set()
    return set(
        ConfirmationVote.objects.filter(
            member=member, confirmation_id__in=[c.pk for c in confirmations]
        ).values_list("confirmation_id", flat=True)
    )


def _may_decide(member, confirmation, voted: set[int], now) -> bool:
    return (
        member is not None
        and confirmation.status == Confirmation.Status.PENDING
        and confirmation.expires_at > now
        and member.pk in confirmation.decider_ids
        and confirmation.pk not in voted
    )


def _queue_context(request) -> dict:
    actor = request.actor
    now = timezone.now()
    pending = list(
        _visible(actor)
        .filter(status=Confirmation.Status.PENDING)
        .select_related("requester")
        .order_by("expires_at")[:QUEUE_LIMIT]
    )
    voted = _voted_ids(actor.member, pending)
    rows = [
        {
            "confirmation": confirmation,
            "may_decide": _may_decide(actor.member, confirmation, voted, now),
            "voted": confirmation.pk in voted,
            "overdue": confirmation.expires_at <= now,
        }
        for confirmation in pending
    ]
    return {"rows": rows, "now": now, "mine": sum(1 for row in rows if row["may_decide"])}


@require_permission()
def confirmation_list(request):
    refused = _gate(request)
    if refused:
        return refused
    context = _queue_context(request)
    if request.htmx or request.GET.get("fragment") == "queue":
        return render(request, "console/governance/_confirmation_queue.html", context)
    recent = (
        _visible(request.actor)
        .exclude(status=Confirmation.Status.PENDING)
        .select_related("requester", "decided_by")
        .order_by("-decided_at", "-pk")[:10]
    )
    return render(
        request, "console/governance/confirmations.html", {**context, "recent": list(recent)}
    )


@require_permission()
def confirmation_history(request):
    refused = _gate(request)
    if refused:
        return refused
    actor = request.actor
    filters = ConfirmationHistoryForm(request.GET or None, actor=actor)
    confirmations = (
        _visible(actor).select_related("requester", "decided_by").order_by("-created_at", "-pk")
    )
    if filters.is_valid():
        data = filters.cleaned_data
        if data["status"]:
            confirmations = confirmations.filter(status=data["status"])
        if data["decider"]:
            confirmations = confirmations.filter(decided_by=data["decider"])
        if data["tool"]:
            confirmations = confirmations.filter(tool__icontains=data["tool"].strip())
    return render(
        request,
        "console/governance/confirmation_history.html",
        {
            "filters": filters,
            "page": paginate(request, confirmations),
            "query": query_without_page(request),
            "filtered": any(request.GET.get(name) for name in filters.fields),
        },
    )


def _detail_context(request, confirmation: Confirmation, form: DecisionForm | None = None):
    actor = request.actor
    now = timezone.now()
    voted = _voted_ids(actor.member, [confirmation])
    deciders = {
        member.pk: member
        for member in Member.objects.filter(
            organization=confirmation.organization_id, pk__in=confirmation.decider_ids
        )
    }
    agent = None
    if confirmation.agent_id:
        agent = Agent.objects.filter(
            organization=confirmation.organization_id, pk=confirmation.agent_id
        ).first()
    return {
        "confirmation": confirmation,
        "deciders": [deciders[pk] for pk in confirmation.decider_ids if pk in deciders],
        "votes": list(confirmation.votes.select_related("member")),
        "agent": agent,
        "may_open_run": bool(call_chain_runs(actor, run_ids=[confirmation.run_id])[0]),
        "may_decide": _may_decide(actor.member, confirmation, voted, now),
        "voted": confirmation.pk in voted,
        "overdue": confirmation.is_pending and confirmation.expires_at <= now,
        "form": form or DecisionForm(),
    }


def _confirmation_or_404(request, pk: int) -> Confirmation:
    return get_object_or_404(
        _visible(request.actor).select_related("requester", "decided_by"), pk=pk
    )


@require_permission()
def confirmation_detail(request, pk: int):
    confirmation = _confirmation_or_404(request, pk)
    return render(
        request,
        "console/governance/confirmation_detail.html",
        _detail_context(request, confirmation),
    )


@require_POST
@require_permission()
def confirmation_decide_view(request, pk: int):
    """Approve or reject as one of the confirmation's deciders (the service checks who may)."""
    confirmation = _confirmation_or_404(request, pk)
    # Who may decide, before what they sent: one of its deciders (or an owner); an auditor
    # or an IT admin who sees it is refused, not told what the form lacks.
    decider = request.member is not None and request.member.pk in confirmation.decider_ids
    if not (decider or request.actor.has("organization.manage")):
        return denied(request, gettext("You are not one of the people who may decide this."))
    form = DecisionForm(request.POST)
    if not form.is_valid():
        context = _detail_context(request, confirmation, form)
        return render(request, "console/governance/confirmation_detail.html", context, status=400)
    decision = form.cleaned_data["decision"]
    try:
        decided = confirmation_decide(
            confirmation=confirmation,
            actor=request.actor,
            decision=decision,
            via="console",
            reason=form.cleaned_data["reason"],
        )
    except CadreError as error:
        confirmation.refresh_from_db()
        form.add_error(None, error.message)
        context = _detail_context(request, confirmation, form)
        status = 403 if isinstance(error, NotPermitted) else error.status
        return render(
            request, "console/governance/confirmation_detail.html", context, status=status
        )
    if decided.status == Confirmation.Status.PENDING:
        needed = decided.required_approvals - decided.votes.filter(decision="approve").count()
        more = max(needed, 1)
        messages.success(
            request,
            ngettext(
                "Your approval was recorded; %(count)d more approval(s) are needed.",
                "Your approval was recorded; %(count)d more approval(s) are needed.",
                more,
            )
            % {"count": more},
        )
    elif decided.status == Confirmation.Status.APPROVED:
        messages.success(request, gettext("The action was approved: the agent carries on."))
    else:
        messages.success(
            request,
            gettext("The action was %(status)s; nothing runs.")
            % {"status": decided.get_status_display().lower()},
        )
    return redirect("console:confirmation", pk=decided.pk)
