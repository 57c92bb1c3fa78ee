"""Reads of model usage: per-call records, sums by department, member, template, model or day."""

from __future__ import annotations

import csv
import io
from datetime import datetime

from django.db.models import Count, Sum
from django.db.models.functions import TruncDate
from django.utils.translation import gettext, gettext_lazy

from cadre.governance.budgets import template_names
from cadre.governance.models import Budget, UsageRecord

GROUPS = {
    "department": ("department_id", "department__name"),
    "member": ("member_id", "member__display_name"),
    "template": ("template_id", None),
    "model": ("model", None),
    "purpose": ("purpose", None),
    "day": ("day", None),
}

# A row whose group is empty (a call outside any department, a model not named).
_NONE_WORDS = {
    "department": gettext_lazy("(no department)"),
    "member": gettext_lazy("(no member)"),
    "template": gettext_lazy("(no template)"),
    "model": gettext_lazy("(no model)"),
    "purpose": gettext_lazy("(no purpose)"),
    "day": gettext_lazy("(no day)"),
}


def usage_records(actor, *, since: datetime | None = None, until: datetime | None = None):
    """Settled calls the actor may see (budget.view), newest first."""
    records = UsageRecord.objects.restrict(actor, "view").filter(status=UsageRecord.Status.SETTLED)
    if since is not None:
        records = records.filter(created_at__gte=since)
    if until is not None:
        records = records.filter(created_at__lt=until)
    return records


def usage_summary(
    actor, *, by: str = "department", since: datetime | None = None, until=None
) -> list[dict]:
    """Calls, tokens and cost grouped by `by` (one of GROUPS), largest cost first; "day" in
    date order."""
    key, label = GROUPS[by]
    records = usage_records(actor, since=since, until=until)
    if by == "day":
        records = records.annotate(day=TruncDate("created_at"))
    fields = [key, label] if label else [key]
    rows = list(
        records.values(*fields)
        .annotate(
            calls=Count("id"),
            input_tokens=Sum("input_tokens"),
            cached_input_tokens=Sum("cached_input_tokens"),
            cache_write_tokens=Sum("cache_write_tokens"),
            output_tokens=Sum("output_tokens"),
            cost=Sum("cost"),
        )
        .order_by(key if by == "day" else "-cost", key)
    )
    names = (
        template_names(actor.organization.pk, [row[key] for row in rows])
        if by == "template"
        else {}
    )
    summary = []
    for row in rows:
        ident = row[key]
        if by == "template":
            name = names.get(
                ident,
                gettext("template %(id)s") % {"id": ident} if ident else str(_NONE_WORDS[by]),
            )
        elif by == "day":
            name = ident.isoformat()
        elif label:
            name = row[label] or str(_NONE_WORDS[by])
        else:
            name = ident or str(_NONE_WORDS[by])
        summary.append(
            {
                "key": str(ident) if ident is not None else "",
                "label": name,
                "calls": row["calls"],
                "input_tokens": row["input_tokens"] or 0,
                "cached_input_tokens": row["cached_input_tokens"] or 0,
                "cache_write_tokens": row["cache_write_tokens"] or 0,
                "output_tokens": row["output_tokens"] or 0,
                "total_tokens": (row["input_tokens"] or 0) + (row["output_tokens"] or 0),
                "cost": row["cost"] or 0,
            }
        )
    return summary


def budgets_for(actor):
    """The organization's budgets the actor may see, with their subjects."""
    return (
        Budget.objects.restrict(actor, "view")
        .select_related("department", "member")
        .order_by("scope", "period", "metric", "pk")
    )


CSV_COLUMNS = [
    "id",
    "created_at",
    "purpose",
    "department",
    "member",
    "template",
    "run",
    "provider",
    "model",
    "input_tokens",
    "cached_input_tokens",
    "cache_write_tokens",
    "output_tokens",
    "cost",
]


def usage_csv(records) -> str:
    """The records as CSV, one row per call (what the console's export downloads too)."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_COLUMNS)
    for record in records.select_related("department", "member").order_by("created_at", "pk"):
        writer.writerow(
            [
                record.pk,
                record.created_at.isoformat(),
                record.purpose,
                record.department.name if record.department else "",
                record.member.display_name if record.member else "",
                record.template_id or "",
                record.run_id or "",
                record.provider,
                record.model,
                record.input_tokens,
                record.cached_input_tokens,
                record.cache_write_tokens,
                record.output_tokens,
                record.cost,
            ]
        )
    return out.getvalue()
