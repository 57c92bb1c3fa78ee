"""Connectors: the IM directory sync card (start a sync, its progress) and the conflicts queue."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import path
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_POST

from cadre.console.scoping import get_restricted_or_404
from cadre.console.views.base import require_permission
from cadre.errors import CadreError
from cadre.identifiers import parse_pk
from cadre.tenancy.models import Member
from connectors.directory.contacts import supports_directory
from connectors.directory.sync import directory_conflict_resolve, directory_sync_start
from connectors.models import Connector, DirectoryConflict, DirectorySync

PERMISSION = "connector.manage"
RESOLUTIONS = {
    "local_edit": [
        ("take_directory", gettext_lazy("Take the directory's")),
        ("keep_local", gettext_lazy("Keep Cadre's")),
    ],
    "duplicate_email": [("create", gettext_lazy("Create without e-mail"))],
    "deactivate_refused": [],
}


def _connector(request, pk: int) -> Connector:
    return get_restricted_or_404(request, Connector, "manage", pk=pk)


def directory_context(connector: Connector) -> dict:
    """What the directory card shows: the latest full run and the open conflicts."""
    if not supports_directory(connector.platform):
        return {"directory_supported": False}
    latest = (
        DirectorySync.objects.filter(connector=connector, kind__in=["full", "reconcile"])
        .order_by("-created_at", "-id")
        .first()
    )
    conflicts = list(
        DirectoryConflict.objects.filter(connector=connector, status="open")
        .select_related("member")
        .order_by("-created_at")[:50]
    )
    for conflict in conflicts:
        conflict.actions = RESOLUTIONS.get(conflict.kind, [])
    percent = 0
    if latest is not None and latest.progress_total:
        percent = min(100, round(100 * latest.progress_done / latest.progress_total))
    return {
        "directory_supported": True,
        "sync": latest,
        "sync_running": latest is not None and latest.status in ("queued", "running"),
        "sync_percent": percent,
        "conflicts": conflicts,
    }


@require_permission(PERMISSION)
def directory_status(request, pk: int):
    connector = _connector(request, pk)
    context = {"connector": connector, **directory_context(connector)}
    return render(request, "console/connectors/_directory.html", context)


@require_POST
@require_permission(PERMISSION)
def directory_sync(request, pk: int):
    connector = _connector(request, pk)
    try:
        directory_sync_start(actor=request.actor, connector=connector)
    except CadreError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, _("Directory sync started."))
    if request.htmx:
        return directory_status(request, pk)
    return redirect("console:connector", pk=connector.pk)


@require_POST
@require_permission(PERMISSION)
def directory_conflict(request, pk: int, conflict_pk: int):
    connector = _connector(request, pk)
    conflict = get_object_or_404(DirectoryConflict, connector=connector, pk=conflict_pk)
    member = None
    if request.POST.get("member"):
        member_pk = parse_pk(request.POST["member"])
        if member_pk is None:
            messages.error(request, _("Choose a member of this organization."))
            return redirect("console:connector", pk=connector.pk)
        member = Member.objects.filter(organization=connector.organization, pk=member_pk).first()
    try:
        directory_conflict_resolve(
            actor=request.actor,
            conflict=conflict,
            resolution=request.POST.get("resolution", ""),
            member=member,
        )
    except CadreError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, _("Conflict resolved."))
    return redirect("console:connector", pk=connector.pk)


urlpatterns = [
    path("connectors/<int:pk>/directory/", directory_status, name="connector_directory"),
    path("connectors/<int:pk>/directory/sync/", directory_sync, name="connector_directory_sync"),
    path(
        "connectors/<int:pk>/directory/conflicts/<int:conflict_pk>/",
        directory_conflict,
        name="connector_directory_conflict",
    ),
]
