"""Deployments in the console: dispatch a published version to positions, departments and
members on channels; per-agent rollout status; roll out a new version at once or department by
department, advance, roll back; sync new targets; stop. Writes are `cadre.agents.services`."""

from __future__ import annotations

from functools import wraps

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import path, reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext
from django.views.decorators.http import require_POST

from cadre.agents import selectors, services
from cadre.agents.models import Agent, Deployment, Rollout
from cadre.console.forms import add_service_error
from cadre.console.scoping import restricted
from cadre.console.views.agents_forms import DeploymentForm, ReasonForm, RolloutForm
from cadre.console.views.agents_sessions import channel_labels
from cadre.console.views.base import denied, paginate, posted, require_permission
from cadre.errors import CadreError


def viewer(view):
    """Deployments are read by those who manage them and by those who see every agent."""

    @require_permission(None)
    @wraps(view)
    def wrapped(request, *args, **kwargs):
        actor = request.actor
        if not (actor.may("deployment.manage") or actor.may("agent.view")):
            return denied(
                request,
                _(
                    "This page needs the “Dispatch, roll out and roll back agents” permission "
                    "(deployment.manage) or “See every agent and its sessions” (agent.view)."
                ),
            )
        return view(request, *args, **kwargs)

    return wrapped


def _deployment_or_404(request, pk: int) -> Deployment:
    return get_object_or_404(
        restricted(request, Deployment, "view").select_related("template", "version"),
        pk=pk,
    )


@viewer
def deployment_list(request):
    status = request.GET.get("status", "")
    deployments = selectors.deployment_find(request.actor, status=status)
    return render(
        request,
        "console/agents/deployments/list.html",
        {
            "page": paginate(request, deployments),
            "query": f"status={status}" if status else "",
            "status": status,
            "statuses": Deployment.Status.choices,
            "can_manage": request.actor.has("deployment.manage"),
            "channel_labels": channel_labels(),
        },
    )


@require_permission("deployment.manage")
def deployment_create(request):
    form = DeploymentForm(
        posted(request),
        actor=request.actor,
        initial={"version": request.GET.get("version") or None, "channels": ["console"]},
    )
    if request.method == "POST" and form.is_valid():
        data = dict(form.cleaned_data)
        version = data.pop("version")
        try:
            deployment = services.deployment_create(
                actor=request.actor,
                template=version.template,
                version=version,
                positions=list(data["positions"]),
                departments=list(data["departments"]),
                members=list(data["members"]),
                channels=data["channels"],
                name=data["name"],
            )
        except CadreError as error:
            add_service_error(form, error)
        else:
            count = deployment.agents.count()
            messages.success(
                request,
                _("“%(name)s” was dispatched: %(count)s agent(s) created.")
                % {"name": deployment.name, "count": count},
            )
            return redirect("console:deployment", pk=deployment.pk)
    return render(request, "console/agents/deployments/create.html", {"form": form})


def _detail_context(request, deployment: Deployment, rollout_form=None) -> dict:
    can_manage = request.actor.can("deployment.manage", deployment)
    rollouts = list(
        deployment.rollouts.select_related("from_version", "to_version", "created_by").order_by(
            "-created_at", "-pk"
        )
    )
    agents = paginate(
        request,
        deployment.agents.select_related("member", "member__department", "version").order_by(
            "member__department__name", "member__display_name", "pk"
        ),
        per_page=50,
    )
    counts = selectors.deployment_agent_counts(deployment)
    open_rollout = next((r for r in rollouts if r.status == Rollout.Status.IN_PROGRESS), None)
    if open_rollout is not None:
        moved = counts["by_version"].get(open_rollout.to_version.number, 0)
        open_rollout.progress = (moved, counts["total"])
        open_rollout.remaining = len(open_rollout.department_order) - open_rollout.next_index
    return {
        "deployment": deployment,
        "counts": counts,
        "agents": agents,
        "rollouts": rollouts,
        "open_rollout": open_rollout,
        # Only the latest rollout that was not rolled back can be rolled back.
        "rollback_candidate": rollouts[0]
        if rollouts and rollouts[0].status != Rollout.Status.ROLLED_BACK
        else None,
        "targets": {
            "positions": list(deployment.positions.all()),
            "departments": list(deployment.departments.all()),
            "members": list(deployment.members.all()),
        },
        "can_manage": can_manage,
        "status_labels": dict(Agent.Status.choices),
        "channel_labels": channel_labels(),
        "rollout_form": rollout_form
        or (RolloutForm(deployment=deployment) if can_manage and open_rollout is None else None),
    }


@viewer
def deployment_detail(request, pk: int):
    deployment = _deployment_or_404(request, pk)
    return render(
        request, "console/agents/deployments/detail.html", _detail_context(request, deployment)
    )


@require_permission("deployment.manage")
@require_POST
def deployment_rollout(request, pk: int):
    deployment = _deployment_or_404(request, pk)
    form = RolloutForm(request.POST, deployment=deployment)
    if form.is_valid():
        try:
            rollout = services.rollout_start(
                actor=request.actor,
                deployment=deployment,
                version=form.cleaned_data["version"],
                strategy=form.cleaned_data["strategy"],
            )
        except CadreError as error:
            add_service_error(form, error)
        else:
            if rollout.status == Rollout.Status.COMPLETED:
                messages.success(
                    request,
                    _("Every agent now runs v%(number)s.") % {"number": rollout.to_version.number},
                )
            else:
                messages.success(
                    request,
                    _("The first department runs v%(number)s; advance when ready.")
                    % {"number": rollout.to_version.number},
                )
            return redirect("console:deployment", pk=pk)
    deployment.refresh_from_db()
    return render(
        request,
        "console/agents/deployments/detail.html",
        _detail_context(request, deployment, rollout_form=form),
        status=400,
    )


def _rollout_or_404(request, pk: int, rollout_pk: int) -> Rollout:
    return get_object_or_404(
        restricted(request, Rollout, "view").select_related(
            "deployment", "from_version", "to_version"
        ),
        pk=rollout_pk,
        deployment_id=pk,
    )


@require_permission("deployment.manage")
@require_POST
def rollout_advance(request, pk: int, rollout_pk: int):
    rollout = _rollout_or_404(request, pk, rollout_pk)
    try:
        rollout = services.rollout_advance(actor=request.actor, rollout=rollout)
    except CadreError as error:
        messages.error(request, error.message)
    else:
        done = rollout.status == Rollout.Status.COMPLETED
        messages.success(
            request,
            _("The rollout is complete.") if done else _("The next department was rolled out."),
        )
    return redirect("console:deployment", pk=pk)


@require_permission("deployment.manage")
@require_POST
def rollout_rollback(request, pk: int, rollout_pk: int):
    rollout = _rollout_or_404(request, pk, rollout_pk)
    form = ReasonForm(request.POST)
    reason = form.cleaned_data["reason"] if form.is_valid() else ""
    try:
        rollout = services.rollout_rollback(actor=request.actor, rollout=rollout, reason=reason)
    except CadreError as error:
        messages.error(request, error.message)
    else:
        messages.success(
            request,
            _("Rolled back: the agents run v%(number)s again.")
            % {"number": rollout.from_version.number},
        )
    return redirect("console:deployment", pk=pk)


@require_permission("deployment.manage")
@require_POST
def deployment_sync(request, pk: int):
    deployment = _deployment_or_404(request, pk)
    try:
        created = services.deployment_sync(actor=request.actor, deployment=deployment)
    except CadreError as error:
        messages.error(request, error.message)
    else:
        messages.success(
            request,
            ngettext(
                "%(count)s new agent for members who became targets.",
                "%(count)s new agents for members who became targets.",
                len(created),
            )
            % {"count": len(created)},
        )
    return redirect("console:deployment", pk=pk)


@require_permission("deployment.manage")
def deployment_stop(request, pk: int):
    deployment = _deployment_or_404(request, pk)
    error = None
    if request.method == "POST":
        try:
            services.deployment_stop(
                actor=request.actor,
                deployment=deployment,
                reason=request.POST.get("reason", "")[:1000],
            )
        except CadreError as failure:
            error = failure.message
        else:
            messages.success(request, _("“%(name)s” was stopped.") % {"name": deployment.name})
            return redirect("console:deployment", pk=pk)
    return render(
        request,
        "console/confirm.html",
        {
            "title": _("Stop “%(name)s”?") % {"name": deployment.name},
            "body": _(
                "Its agents stop answering and their unfinished runs are cancelled. "
                "Sessions and history are kept."
            ),
            "confirm_label": _("Stop deployment"),
            "danger": True,
            "cancel_url": reverse("console:deployment", args=[deployment.pk]),
            "crumbs": [(gettext_lazy("Deployments"), "console:deployments")],
            "error": error,
        },
    )


urlpatterns = [
    path("deployments/", deployment_list, name="deployments"),
    path("deployments/new/", deployment_create, name="deployment_create"),
    path("deployments/<int:pk>/", deployment_detail, name="deployment"),
    path("deployments/<int:pk>/rollout/", deployment_rollout, name="deployment_rollout"),
    path("deployments/<int:pk>/sync/", deployment_sync, name="deployment_sync"),
    path("deployments/<int:pk>/stop/", deployment_stop, name="deployment_stop"),
    path(
        "deployments/<int:pk>/rollouts/<int:rollout_pk>/advance/",
        rollout_advance,
        name="rollout_advance",
    ),
    path(
        "deployments/<int:pk>/rollouts/<int:rollout_pk>/rollback/",
        rollout_rollback,
        name="rollout_rollback",
    ),
]
