"""The audit log: filterable, paginated, one page per event with its diff and chain hash."""

from __future__ import annotations

from datetime import datetime, time, timedelta

from django.db.models import Q
from django.shortcuts import get_object_or_404, render

from cadre.console.forms import AuditFilterForm, organization_zone
from cadre.console.views.base import paginate, query_without_page, require_permission
from cadre.governance.models import AuditEvent

PAGE_SIZE = 50


@require_permission("audit.view")
def audit_list(request):
    actor = request.actor
    events = AuditEvent.objects.restrict(actor, "view").order_by("-sequence")
    target_types = (
        AuditEvent.objects.restrict(actor, "view")
        .exclude(target_type="")
        .order_by("target_type")
        .values_list("target_type", flat=True)
        .distinct()
    )
    filters = AuditFilterForm(request.GET or None, target_types=list(target_types))
    if filters.is_valid():
        data = filters.cleaned_data
        zone = organization_zone(actor.organization)
        if data["action"]:
            events = events.filter(action__startswith=data["action"].strip())
        if data["actor"]:
            term = data["actor"].strip()
            events = events.filter(Q(actor_label__icontains=term) | Q(actor_id=term))
        if data["target_type"]:
            events = events.filter(target_type=data["target_type"])
        # Dates are days in the organization's time zone, both ends included.
        if data["since"]:
            events = events.filter(
                created_at__gte=datetime.combine(data["since"], time.min, tzinfo=zone)
            )
        if data["until"]:
            events = events.filter(
                created_at__lt=datetime.combine(
                    data["until"] + timedelta(days=1), time.min, tzinfo=zone
                )
            )
    return render(
        request,
        "console/audit/list.html",
        {
            "filters": filters,
            "page": paginate(request, events, per_page=PAGE_SIZE),
            "query": query_without_page(request),
            "filtered": any(request.GET.get(name) for name in filters.fields),
        },
    )


def _change_rows(changes: dict) -> list[dict]:
    before = changes.get("before") or {}
    after = changes.get("after") or {}
    if not isinstance(before, dict) or not isinstance(after, dict):
        return []
    return [
        {
            "field": key,
            "before": before.get(key),
            "after": after.get(key),
            "had_before": key in before,
            "has_after": key in after,
        }
        for key in sorted(set(before) | set(after))
    ]


@require_permission("audit.view")
def audit_detail(request, pk: int):
    event = get_object_or_404(AuditEvent.objects.restrict(request.actor, "view"), pk=pk)
    rows = _change_rows(event.changes or {})
    return render(
        request,
        "console/audit/detail.html",
        {
            "event": event,
            "rows": rows,
            # Changes recorded in another shape (a service passing `changes=`) are shown raw.
            "raw_changes": event.changes if event.changes and not rows else None,
        },
    )
