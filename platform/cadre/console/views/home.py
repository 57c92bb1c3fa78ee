"""The overview page and the organization switcher."""

from __future__ import annotations

from django.contrib import messages
from django.db.models import Count, Q
from django.http import Http404
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from cadre.console.scoping import restricted_for
from cadre.console.views.base import require_permission
from cadre.governance.models import AuditEvent
from cadre.identifiers import parse_pk
from cadre.tenancy.middleware import SESSION_KEY, session_memberships
from cadre.tenancy.models import ApiKey, Department, Member, Position
from cadre.tenancy.services.notices import notices_shown

RECENT_EVENTS = 8


@require_permission()
def home(request):
    actor = request.actor
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
    if actor.may("audit.view"):
        context["recent_events"] = list(
            restricted_for(actor, AuditEvent, "view").order_by("-sequence")[:RECENT_EVENTS]
        )
    context["notices"] = notices_shown(actor=actor)
    return render(request, "console/home.html", context)


@require_POST
@require_permission()
def switch_organization(request):
    """Act in another organization — only one the user has an active membership in."""
    organization_id = parse_pk(request.POST.get("organization", ""))
    if organization_id is None:
        raise Http404("No such organization.")
    member = (
        session_memberships(request.session, request.user)
        .filter(organization_id=organization_id)
        .first()
    )
    if member is None:
        raise Http404("No such organization.")
    request.session[SESSION_KEY] = member.organization_id
    messages.success(request, f"You are now working in {member.organization.name}.")
    # Not back to the page we came from: its objects belong to the previous organization
    # and would be 404 in this one.
    return redirect("console:home")
