"""The Memory Viewer pages: timeline, vector map, heatmap and quality dashboard, drawn with
ECharts from the viewer API (the same selectors and permissions as the API)."""

from __future__ import annotations

from django.shortcuts import render
from django.urls import reverse
from django.utils.translation import gettext_lazy as _

from cadre.console.scope_names import scope_choices
from cadre.console.views.base import require_permission
from cadre.console.views.memory import gate
from cadre.memory.models import Kind

PAGES = {
    "timeline": (
        _("Memory timeline"),
        _(
            "Memories added over time by kind, and what happened to them (updated, corrected, "
            "superseded, merged, deleted, expired). Drag the slider below the chart to zoom from "
            "a year to a day; the bars under it are validity intervals; pick a date to see the "
            "set as it was then. Click a point to open the memory."
        ),
    ),
    "map": (
        _("Memory map"),
        _(
            "Every memory's embedding projected to two dimensions (PCA): memories that retrieval "
            "finds alike lie close together, so duplicates sit on top of each other. Clusters are "
            "named by their most distinctive words. Type a query to see where it falls and which "
            "memories it retrieves; drag a box or lasso to list memories."
        ),
    ),
    "heatmap": (
        _("Memory heatmap"),
        _(
            "How often memories were retrieved for, and sent to, model calls each day (from the "
            "exact context records), the hottest and coldest, and those no model call used for "
            "30 days: candidates for a retention review."
        ),
    ),
    "quality": (
        _("Memory quality"),
        _(
            "Duplicates, merges, association strength, recall hit rate, corrections, deletions, "
            "skill success and extraction volume over 30 days. Each figure's definition is one "
            "click away; a figure nothing records says so instead of showing a number."
        ),
    ),
}


def _page(request, page: str):
    refused = gate(request)
    if refused:
        return refused
    title, lead = PAGES[page]
    return render(
        request,
        "console/memory/viewer.html",
        {
            "page": page,
            "title": title,
            "lead": lead,
            "api_url": f"/api/v1/memory-viewer/{'map' if page == 'map' else page}/",
            "memory_url": reverse("console:memory_detail", args=[0]),
            "scope_choices": scope_choices(request.actor),
            "kinds": Kind.choices,
            "scope": request.GET.get("scope", ""),
            "kind": request.GET.get("kind", ""),
        },
    )


@require_permission("chat.use")
def memory_timeline(request):
    return _page(request, "timeline")


@require_permission("chat.use")
def memory_map(request):
    return _page(request, "map")


@require_permission("chat.use")
def memory_heatmap(request):
    return _page(request, "heatmap")


@require_permission("chat.use")
def memory_quality(request):
    return _page(request, "quality")
