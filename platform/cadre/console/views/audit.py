"""The audit log: filterable, paginated, one page per event with its diff and chain hash."""

from __future__ import annotations

from datetime import datetime, time, timedelta

from django.db.models import Q
from django.shortcuts import render

from cadre.agents.call_chain import call_chain_runs
from cadre.console.forms import AuditFilterForm, organization_zone
from cadre.console.scoping import get_restricted_or_404, restricted_for
from cadre.console.views.base import paginate, query_without_page, require_permission
from cadre.governance.models import AuditEvent

PAGE_SIZE = 50


@require_permission("audit.view")
def audit_list(request):
    actor = request.actor
    events = restricted_for(actor, AuditEvent, "view").order_by("-sequence")
    target_types = (
        restricted_for(actor, AuditEvent, "view")
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
    page = paginate(request, events, per_page=PAGE_SIZE)
    page.object_list = list(page.object_list)
    return render(
        request,
        "console/audit/list.html",
        {
            "filters": filters,
            "page": page,
            "call_chains": _call_chains(actor, page.object_list),
            "query": query_without_page(request),
            "filtered": any(request.GET.get(name) for name in filters.fields),
        },
    )


def _call_chains(actor, events) -> dict[int, int]:
    """{event id: run id} for the events whose run the actor may open the call chain of: the
    run an event is about, or else the first run of the event's trace."""
    runs, traces = call_chain_runs(
        actor,
        run_ids=[event.target_id for event in events if event.target_type == "run"],
        trace_ids=[event.trace_id for event in events],
    )
    links = {}
    for event in events:
        about_run = event.target_type == "run" and event.target_id.isdigit()
        if about_run and int(event.target_id) in runs:
            links[event.pk] = int(event.target_id)
        elif event.trace_id in traces:
            links[event.pk] = traces[event.trace_id]
    return links


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
    event = get_restricted_or_404(request, AuditEvent, "view", pk=pk)
    rows = _change_rows(event.changes or {})
    return render(
        request,
        "console/audit/detail.html",
        {
            "event": event,
            "rows": rows,
            "call_chain_run": _call_chains(request.actor, [event]).get(event.pk),
            # Changes recorded in another shape (a service passing `changes=`) are shown raw.
            "raw_changes": event.changes if event.changes and not rows else None,
        },
    )
