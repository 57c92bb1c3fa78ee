"""Usage and budgets: model calls and cost by department, member, template, model or purpose,
a daily chart, the CSV export, and the budgets (set, change, delete — audited by the services)."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from django import forms
from django.conf import settings
from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_POST

from cadre.agents.models import AgentTemplate
from cadre.console.forms import ActorFormMixin, add_service_error, department_field
from cadre.console.scoping import get_restricted_or_404, restricted_for
from cadre.console.views.base import posted, require_permission
from cadre.errors import CadreError
from cadre.governance import budgets, usage
from cadre.governance.models import Budget
from cadre.tenancy.models import Department, Member

WINDOWS = {
    "today": gettext_lazy("Today"),
    "month": gettext_lazy("This month"),
    "30d": gettext_lazy("Last 30 days"),
    "90d": gettext_lazy("Last 90 days"),
}
GROUPS = {
    "department": gettext_lazy("Department"),
    "member": gettext_lazy("Member"),
    "template": gettext_lazy("Template"),
    "model": gettext_lazy("Model"),
    "purpose": gettext_lazy("Purpose"),
}


class UsageFilterForm(forms.Form):
    window = forms.ChoiceField(
        label=gettext_lazy("Window"),
        choices=list(WINDOWS.items()),
        required=False,
        initial="month",
    )
    by = forms.ChoiceField(
        choices=list(GROUPS.items()),
        required=False,
        label=gettext_lazy("Group by"),
        initial="department",
    )


class BudgetForm(ActorFormMixin, forms.Form):
    scope = forms.ChoiceField(label=gettext_lazy("Scope"), choices=Budget.Scope.choices)
    department = forms.ModelChoiceField(
        label=gettext_lazy("Department"),
        queryset=Department.objects.none(),
        required=False,
        empty_label="—",
    )
    member = forms.ModelChoiceField(
        label=gettext_lazy("Member"),
        queryset=Member.objects.none(),
        required=False,
        empty_label="—",
    )
    template = forms.ModelChoiceField(
        label=gettext_lazy("Template"),
        queryset=AgentTemplate.objects.none(),
        required=False,
        empty_label="—",
    )
    period = forms.ChoiceField(
        label=gettext_lazy("Period"), choices=Budget.Period.choices, initial=Budget.Period.MONTHLY
    )
    metric = forms.ChoiceField(label=gettext_lazy("Metric"), choices=Budget.Metric.choices)
    limit = forms.DecimalField(
        label=gettext_lazy("Limit"),
        max_digits=20,
        decimal_places=6,
        min_value=Decimal("0.000001"),
    )
    enforcement = forms.ChoiceField(
        label=gettext_lazy("Enforcement"), choices=Budget.Enforcement.choices
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["limit"].help_text = _(
            "Tokens (a whole number), or an amount in %(currency)s, the currency of the "
            "providers' prices."
        ) % {"currency": settings.PRICE_CURRENCY}
        department_field(self.fields["department"], restricted_for(self.actor, Department))
        self.fields["member"].queryset = restricted_for(self.actor, Member).order_by("display_name")
        self.fields["template"].queryset = restricted_for(self.actor, AgentTemplate).order_by(
            "name"
        )


class BudgetEditForm(forms.Form):
    limit = forms.DecimalField(
        label=gettext_lazy("Limit"),
        max_digits=20,
        decimal_places=6,
        min_value=Decimal("0.000001"),
    )
    enforcement = forms.ChoiceField(
        label=gettext_lazy("Enforcement"), choices=Budget.Enforcement.choices
    )
    is_active = forms.BooleanField(required=False, label=gettext_lazy("Active"))


def _since(window: str):
    now = timezone.now()
    if window == "today":
        return budgets.period_start(Budget.Period.DAILY, now)
    if window == "month":
        return budgets.period_start(Budget.Period.MONTHLY, now)
    return now - timedelta(days=90 if window == "90d" else 30)


def _bars(rows: list[dict], value: str) -> list[dict]:
    """Rows with `share`: the bar's length in percent of the largest value."""
    top = max((Decimal(row[value]) for row in rows), default=Decimal(0))
    return [
        {**row, "share": float(Decimal(row[value]) * 100 / top) if top else 0.0} for row in rows
    ]


CHART_HEIGHT = 120
CHART_BAR = 24  # the width of a day's slot in the SVG's user units
CHART_DAYS = 31  # slots drawn at least: one day's bar is a bar, not the whole width


def _every_day(days: list[dict], since) -> list[dict]:
    """One row per day from `since` to today: the days without calls as zeros."""
    found = {row["label"]: row for row in days}
    day, today, rows = since.date(), timezone.now().date(), []
    while day <= today:
        empty = {"key": day.isoformat(), "label": day.isoformat(), "calls": 0, "cost": 0}
        rows.append(found.get(day.isoformat()) or {**empty, "total_tokens": 0})
        day += timedelta(days=1)
    return rows


CHART_TICK_DAYS = 7  # a date under every week's first bar


def _day_chart(days: list[dict]) -> dict:
    """The daily tokens as SVG bars (server-rendered: no script, nothing to load), with what
    labels the axes: the busiest day's tokens at the top, and dates a week apart (and the last
    day) under their bars, placed in percent of the chart's width."""
    bars = []
    for index, day in enumerate(_bars(days, "total_tokens")):
        height = max(1.0, day["share"] * CHART_HEIGHT / 100) if day["total_tokens"] else 0.0
        bars.append(
            {
                **day,
                "x": index * CHART_BAR + 2,
                "y": round(CHART_HEIGHT - height, 2),
                "height": round(height, 2),
            }
        )
    width = max(len(bars), CHART_DAYS) * CHART_BAR
    last = len(bars) - 1
    ticks = [
        {
            "label": bar["label"],
            # The bar's middle; the label is centred on it (the last one ends at it).
            "left": round((bar["x"] + (CHART_BAR - 4) / 2) * 100 / width, 2),
            "last": index == last,
        }
        for index, bar in enumerate(bars)
        if index % CHART_TICK_DAYS == 0 or index == last
    ]
    if len(ticks) > 1 and last - (len(ticks) - 2) * CHART_TICK_DAYS < 3:
        del ticks[-2]  # the last day's date would run into the week's just before it
    return {
        "bars": bars,
        "width": width,
        "height": CHART_HEIGHT,
        "max_tokens": max((bar["total_tokens"] for bar in bars), default=0),
        "ticks": ticks,
    }


def _budget_rows(actor) -> list[dict]:
    found = list(usage.budgets_for(actor))
    names = budgets.template_names(actor.organization.pk, [b.template_id for b in found])
    rows = []
    for budget in found:
        subject = budgets.subject_label(budget, names.get(budget.template_id))
        percent = float(Decimal(budget.used) * 100 / budget.limit) if budget.limit else 0.0
        rows.append(
            {
                "budget": budget,
                "subject": subject,
                "percent": round(percent, 1),
                "bar": min(percent, 100.0),
                "limit": int(budget.limit)
                if budget.metric == Budget.Metric.TOKENS
                else budget.limit.normalize(),
            }
        )
    return rows


@require_permission("budget.view")
def usage_page(request):
    actor = request.actor
    filters = UsageFilterForm(request.GET or None)
    window, by = "month", "department"
    if filters.is_valid():
        window = filters.cleaned_data["window"] or window
        by = filters.cleaned_data["by"] or by
    since = _since(window)
    rows = usage.usage_summary(actor, by=by, since=since)
    days = usage.usage_summary(actor, by="day", since=since)
    totals = {
        "calls": sum(row["calls"] for row in rows),
        "tokens": sum(row["total_tokens"] for row in rows),
        "cost": sum((Decimal(row["cost"]) for row in rows), Decimal(0)),
    }
    form = BudgetForm(actor=actor) if actor.has("budget.manage") else None
    return render(
        request,
        "console/usage.html",
        {
            "filters": filters,
            "window": window,
            "window_label": WINDOWS[window],
            "by": by,
            "by_label": GROUPS[by],
            "rows": _bars(rows, "total_tokens"),
            "chart": _day_chart(_every_day(days, since)) if days else {"bars": []},
            "totals": totals,
            "currency": settings.PRICE_CURRENCY,
            "budgets": _budget_rows(actor),
            "form": form,
            "can_manage": form is not None,
            "query": request.GET.urlencode(),
        },
    )


@require_permission("budget.view")
def usage_export(request):
    filters = UsageFilterForm(request.GET or None)
    window = (filters.cleaned_data["window"] if filters.is_valid() else "") or "month"
    records = usage.usage_records(request.actor, since=_since(window))
    response = HttpResponse(usage.usage_csv(records), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="usage-{window}.csv"'
    return response


@require_permission("budget.manage")
def budget_create(request):
    actor = request.actor
    form = BudgetForm(posted(request), actor=actor)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        scope = data["scope"]
        try:
            budgets.budget_create(
                actor=actor,
                scope=scope,
                department=data["department"] if scope == Budget.Scope.DEPARTMENT else None,
                member=data["member"] if scope == Budget.Scope.MEMBER else None,
                template_id=data["template"].pk
                if scope == Budget.Scope.TEMPLATE and data["template"]
                else None,
                period=data["period"],
                metric=data["metric"],
                limit=data["limit"],
                enforcement=data["enforcement"],
            )
        except CadreError as error:
            add_service_error(form, error)
        else:
            messages.success(request, _("Budget set: it counts this period's usage so far."))
            return redirect("console:usage")
    return render(request, "console/budget_form.html", {"form": form, "budget": None})


def _budget_or_404(request, pk: int) -> Budget:
    return get_restricted_or_404(request, Budget, "view", pk=pk)


@require_permission("budget.manage")
def budget_edit(request, pk: int):
    budget = _budget_or_404(request, pk)
    initial = {
        "limit": budget.limit.normalize(),
        "enforcement": budget.enforcement,
        "is_active": budget.is_active,
    }
    form = BudgetEditForm(posted(request), initial=initial)
    if request.method == "POST" and form.is_valid():
        try:
            budgets.budget_update(actor=request.actor, budget=budget, **form.cleaned_data)
        except CadreError as error:
            add_service_error(form, error)
        else:
            messages.success(request, _("Budget changed."))
            return redirect("console:usage")
    return render(
        request,
        "console/budget_form.html",
        {"form": form, "budget": budget, "subject": budgets.subject_label(budget)},
    )


@require_POST
@require_permission("budget.manage")
def budget_delete(request, pk: int):
    budget = _budget_or_404(request, pk)
    budgets.budget_delete(actor=request.actor, budget=budget)
    messages.success(request, _("Budget deleted."))
    return redirect("console:usage")
