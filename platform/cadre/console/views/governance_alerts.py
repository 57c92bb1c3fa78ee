"""Alerts: what fired (filter by severity and state), acknowledge and resolve (audited by the
services), and the alert rules with their notification channels."""

from __future__ import annotations

import json

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_POST

from cadre.console.forms import add_service_error
from cadre.console.scoping import (
    get_restricted_or_404,
    in_organization,
    restricted,
    restricted_for,
)
from cadre.console.views.base import (
    paginate,
    posted,
    query_without_page,
    require_permission,
)
from cadre.console.views.governance_forms import AlertFilterForm, AlertNoteForm, AlertRuleForm
from cadre.errors import CadreError
from cadre.governance import alerts
from cadre.governance.models import Alert, AlertRule
from cadre.outbound import OutboundRefused
from cadre.tenancy.models import Member

# What each rule kind counts and its parameters (shown next to the rule form).
KIND_HELP = {
    "high_risk_requests": gettext_lazy(
        "High-risk confirmations requested per member — threshold (5)."
    ),
    "denied_spike": gettext_lazy(
        "Policy denials in the organization — threshold (20), by_plugin (false)."
    ),
    "bulk_exports": gettext_lazy("Audit exports per member — threshold (3), max_rows."),
    "off_hours": gettext_lazy(
        "Member actions outside working hours — threshold (10), start_hour (8), "
        "end_hour (20), weekdays ([0,1,2,3,4])."
    ),
    "signature_failures": gettext_lazy(
        "Failed signature checks per target — action (connector.signature_failed), threshold (5)."
    ),
    "skill_success_drop": gettext_lazy(
        "A skill's success rate falls — min_uses (20), min_rate (0.7)."
    ),
    "skill_version_drop": gettext_lazy(
        "A Hub skill version succeeds less than the version before it — "
        "drop (0.2), min_uses (20), days (30)."
    ),
    "audit_action_rate": gettext_lazy(
        "Any audit action (or prefix ending in “.”) per actor — action, threshold (100)."
    ),
}
# Kinds added to the alerting module later are offered too, without a description.


def _alert_or_404(request, pk: int) -> Alert:
    return get_object_or_404(
        restricted(request, Alert, "view").select_related("rule", "acknowledged_by", "resolved_by"),
        pk=pk,
    )


@require_permission("audit.view")
def alert_list(request):
    actor = request.actor
    filters = AlertFilterForm(request.GET or None)
    found = (
        restricted_for(actor, Alert, "view")
        .select_related("rule", "acknowledged_by", "resolved_by")
        .order_by("-last_seen_at", "-pk")
    )
    if filters.is_valid():
        if filters.cleaned_data["severity"]:
            found = found.filter(severity=filters.cleaned_data["severity"])
        if filters.cleaned_data["status"]:
            found = found.filter(status=filters.cleaned_data["status"])
    counts = {
        status: restricted_for(actor, Alert, "view").filter(status=status).count()
        for status in (Alert.Status.OPEN, Alert.Status.ACKNOWLEDGED)
    }
    return render(
        request,
        "console/governance/alerts.html",
        {
            "filters": filters,
            "page": paginate(request, found),
            "query": query_without_page(request),
            "filtered": any(request.GET.get(name) for name in filters.fields),
            "counts": counts,
            "can_manage": actor.has("policy.manage"),
        },
    )


@require_permission("audit.view")
def alert_detail(request, pk: int):
    alert = _alert_or_404(request, pk)
    return render(
        request,
        "console/governance/alert_detail.html",
        {
            "alert": alert,
            "details": json.dumps(alert.details, indent=2, ensure_ascii=False),
            "form": AlertNoteForm(),
            "can_manage": request.actor.has("policy.manage"),
        },
    )


def _transition(request, pk: int, service, done: str):
    alert = _alert_or_404(request, pk)
    form = AlertNoteForm(request.POST)
    if form.is_valid():
        try:
            service(actor=request.actor, alert=alert, note=form.cleaned_data["note"])
        except CadreError as error:
            messages.error(request, error.message)
        else:
            messages.success(request, done)
    else:
        messages.error(request, _("The note is too long (2,000 characters at most)."))
    return redirect("console:alert", pk=alert.pk)


@require_POST
@require_permission("policy.manage")
def alert_acknowledge(request, pk: int):
    return _transition(
        request, pk, alerts.alert_acknowledge, _("Acknowledged: repeats are grouped under it.")
    )


@require_POST
@require_permission("policy.manage")
def alert_resolve(request, pk: int):
    return _transition(
        request, pk, alerts.alert_resolve, _("Resolved: the next firing opens a new alert.")
    )


# --- rules ----------------------------------------------------------------------------------


def _rule_or_404(request, pk: int) -> AlertRule:
    return get_restricted_or_404(request, AlertRule, "manage", pk=pk)


@require_permission("policy.manage")
def alert_rule_list(request):
    rules = list(restricted(request, AlertRule, "manage").order_by("name"))
    member_ids = {
        int(pk)
        for rule in rules
        for channel in rule.channels
        if channel.get("kind") == "im"
        for pk in channel.get("members", [])
    }
    names = dict(
        in_organization(request, Member).filter(pk__in=member_ids).values_list("pk", "display_name")
    )
    rows = [
        {
            "rule": rule,
            "channels": [_channel_label(channel, names) for channel in rule.channels],
        }
        for rule in rules
    ]
    return render(request, "console/governance/alert_rules.html", {"rows": rows})


def _channel_label(channel: dict, names: dict) -> str:
    kind = channel.get("kind")
    if kind == "email":
        return _("e-mail: %(to)s") % {"to": ", ".join(channel.get("to", []))}
    if kind == "webhook":
        if channel.get("secret"):
            return _("webhook: %(url)s (signed)") % {"url": channel.get("url", "")}
        return _("webhook: %(url)s") % {"url": channel.get("url", "")}
    if kind == "im":
        people = ", ".join(names.get(int(pk), f"#{pk}") for pk in channel.get("members", []))
        return _("IM: %(people)s") % {"people": people}
    return str(kind)


def _save_rule(request, form: AlertRuleForm, rule: AlertRule | None):
    data = form.cleaned_data
    fields = {
        "name": data["name"],
        "kind": data["kind"],
        "params": data["params"],
        "severity": data["severity"],
        "channels": form.channels(rule),
    }
    try:
        if rule is None:
            saved = alerts.alert_rule_create(actor=request.actor, **fields)
            if not data["is_active"]:
                saved = alerts.alert_rule_update(actor=request.actor, rule=saved, is_active=False)
        else:
            saved = alerts.alert_rule_update(
                actor=request.actor, rule=rule, is_active=data["is_active"], **fields
            )
    except OutboundRefused as refused:
        form.add_error("webhook_url", refused.message)
    except CadreError as error:
        add_service_error(form, error)
    else:
        return saved
    return None


def _rule_form_page(request, form, rule, status=200):
    return render(
        request,
        "console/governance/alert_rule_form.html",
        {"form": form, "rule": rule, "kind_help": KIND_HELP},
        status=status,
    )


@require_permission("policy.manage")
def alert_rule_create(request):
    form = AlertRuleForm(posted(request), actor=request.actor)
    if request.method == "POST":
        if form.is_valid():
            rule = _save_rule(request, form, None)
            if rule is not None:
                messages.success(
                    request, _("The rule “%(name)s” was created.") % {"name": rule.name}
                )
                return redirect("console:alert_rules")
        return _rule_form_page(request, form, None, status=400)
    return _rule_form_page(request, form, None)


@require_permission("policy.manage")
def alert_rule_edit(request, pk: int):
    rule = _rule_or_404(request, pk)
    form = AlertRuleForm(
        posted(request), actor=request.actor, initial=AlertRuleForm.initial_for(rule)
    )
    if request.method == "POST":
        if form.is_valid():
            saved = _save_rule(request, form, rule)
            if saved is not None:
                messages.success(
                    request, _("The rule “%(name)s” was saved.") % {"name": saved.name}
                )
                return redirect("console:alert_rules")
        return _rule_form_page(request, form, rule, status=400)
    return _rule_form_page(request, form, rule)


@require_permission("policy.manage")
def alert_rule_delete(request, pk: int):
    rule = _rule_or_404(request, pk)
    error = None
    if request.method == "POST":
        try:
            alerts.alert_rule_delete(actor=request.actor, rule=rule)
        except CadreError as failure:
            error = failure.message
        else:
            messages.success(request, _("The rule “%(name)s” was deleted.") % {"name": rule.name})
            return redirect("console:alert_rules")
    return render(
        request,
        "console/confirm.html",
        {
            "title": _("Delete the rule “%(name)s”?") % {"name": rule.name},
            "body": _("It stops being evaluated at once. Alerts it raised stay in the list."),
            "confirm_label": _("Delete rule"),
            "danger": True,
            "cancel_url": f"/alerts/rules/{rule.pk}/edit/",
            "crumbs": [(_("Alerts"), "console:alerts"), (_("Rules"), "console:alert_rules")],
            "error": error,
        },
    )
