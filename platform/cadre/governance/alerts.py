"""Anomaly alerting: rules evaluated over recent activity, alerts grouped by fingerprint.

The beat task `alerts_evaluate` runs every minute. Each rule kind counts something in its
window (`window_minutes`, default 60) per group (a member, a plugin, a connector, a skill) and
fires when the count passes `threshold`. A firing whose fingerprint (rule + group) already has
an open or acknowledged alert only bumps that alert's count and last_seen (no new
notification); after it is resolved, the next firing opens a new alert.

Rule kinds and their params:

    high_risk_requests   confirmations requested per member          threshold (5)
    denied_spike         policy denials in the organization           threshold (20), by_plugin
    bulk_exports         audit exports per member, or rows exported   threshold (3), max_rows
    off_hours            member actions outside working hours         threshold (10), start_hour
                                                                      (8), end_hour (20),
                                                                      weekdays ([0..4])
    signature_failures   audit events `action` (connector.signature_failed) per target
                                                                      threshold (5)
    skill_success_drop   `skill.outcome` events {"skill", "success"}  min_uses (20),
                         whose success rate falls below min_rate      min_rate (0.7)
    audit_action_rate    any audit action prefix per actor            action, threshold
    skill_version_drop   a Hub skill version's success rate at least  drop (0.2), min_uses
                         `drop` below the previous version's           (20), days (30)
                         (evaluated by hub, see ALERT_EVALUATORS)

Notifications go to each channel of the rule (see notifications.ALERT_CHANNELS).
"""

from __future__ import annotations

import hashlib
import logging
from collections import Counter, defaultdict
from collections.abc import Callable
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from django.db import transaction
from django.db.models import Count, Q, Sum
from django.utils import timezone
from django.utils.translation import gettext as _

from cadre import outbound
from cadre.crypto import encrypt
from cadre.errors import Conflict, InvalidInput
from cadre.governance import audit
from cadre.governance.models import (
    Alert,
    AlertRule,
    AuditEvent,
    AuditExport,
    Confirmation,
    PolicyDecision,
)
from cadre.ports import Registry
from cadre.queues import enqueue
from cadre.tenancy.actors import system_actor

logger = logging.getLogger(__name__)

# Delivers one alert to one channel (enqueued by name: the tasks module imports this one).
ALERT_NOTIFY = "cadre.governance.tasks.alert_notify"

RULE_KINDS = (
    "high_risk_requests",
    "denied_spike",
    "bulk_exports",
    "off_hours",
    "signature_failures",
    "skill_success_drop",
    "audit_action_rate",
    "skill_version_drop",
)
CHANNEL_KINDS = ("email", "webhook", "im")

# Rule kind -> evaluate(rule, now) -> [(group key, count, title, details)] that fired. The
# kinds below are registered here; hub registers skill_version_drop (its skill versions'
# success rates). A rule whose kind nobody evaluates never fires.
Evaluator = Callable[[AlertRule, datetime], list[tuple[str, int, str, dict]]]
ALERT_EVALUATORS: Registry[Evaluator] = Registry("alert evaluators")


# --- rule kinds ------------------------------------------------------------------------------


def _since(rule: AlertRule, now):
    return now - timedelta(minutes=int(rule.params.get("window_minutes", 60)))


def _high_risk_requests(rule, now):
    threshold = int(rule.params.get("threshold", 5))
    rows = (
        Confirmation.objects.filter(organization=rule.organization)
        .filter(created_at__gte=_since(rule, now), risk_level__in=["high", "critical"])
        .values("requester_id")
        .annotate(n=Count("id"))
        .filter(n__gt=threshold)
    )
    return [
        (
            f"member:{row['requester_id']}",
            row["n"],
            f"{row['n']} high-risk requests in {rule.params.get('window_minutes', 60)} min",
            {"member": row["requester_id"], "count": row["n"], "threshold": threshold},
        )
        for row in rows
    ]


def _denied_spike(rule, now):
    threshold = int(rule.params.get("threshold", 20))
    queryset = PolicyDecision.objects.filter(
        organization=rule.organization, action="deny", created_at__gte=_since(rule, now)
    )
    if rule.params.get("by_plugin"):
        rows = queryset.values("plugin").annotate(n=Count("id")).filter(n__gt=threshold)
        return [
            (
                f"plugin:{row['plugin']}",
                row["n"],
                f"{row['n']} denied requests by {row['plugin']}",
                {"plugin": row["plugin"], "count": row["n"], "threshold": threshold},
            )
            for row in rows
        ]
    count = queryset.count()
    if count <= threshold:
        return []
    return [
        (
            "all",
            count,
            f"Spike of denied requests: {count}",
            {"count": count, "threshold": threshold},
        )
    ]


def _bulk_exports(rule, now):
    threshold = int(rule.params.get("threshold", 3))
    max_rows = rule.params.get("max_rows")
    rows = (
        AuditExport.objects.filter(organization=rule.organization)
        .filter(created_at__gte=_since(rule, now))
        .values("requested_by_id")
        .annotate(n=Count("id"), total=Sum("total_rows"))
    )
    fired = []
    for row in rows:
        too_many = row["n"] > threshold
        too_big = max_rows is not None and (row["total"] or 0) > int(max_rows)
        if too_many or too_big:
            fired.append(
                (
                    f"member:{row['requested_by_id']}",
                    row["n"],
                    f"Bulk audit exports: {row['n']} exports, {row['total'] or 0} rows",
                    {
                        "member": row["requested_by_id"],
                        "exports": row["n"],
                        "rows": row["total"] or 0,
                    },
                )
            )
    return fired


def _off_hours(rule, now):
    params = rule.params
    threshold = int(params.get("threshold", 10))
    start, end = int(params.get("start_hour", 8)), int(params.get("end_hour", 20))
    weekdays = set(params.get("weekdays", [0, 1, 2, 3, 4]))
    zone = ZoneInfo(rule.organization.time_zone or "UTC")
    counts: Counter = Counter()
    labels: dict[str, str] = {}
    events = AuditEvent.objects.filter(
        organization=rule.organization, actor_type="member", created_at__gte=_since(rule, now)
    ).values_list("actor_id", "actor_label", "created_at")
    for actor_id, label, created_at in events.iterator(2000):
        local = created_at.astimezone(zone)
        if local.weekday() not in weekdays or not (start <= local.hour < end):
            counts[actor_id] += 1
            labels[actor_id] = label
    return [
        (
            f"member:{actor}",
            n,
            f"{n} actions outside working hours by {labels[actor]}",
            {"member": actor, "count": n, "threshold": threshold},
        )
        for actor, n in counts.items()
        if n > threshold
    ]


def _signature_failures(rule, now):
    threshold = int(rule.params.get("threshold", 5))
    action = rule.params.get("action", "connector.signature_failed")
    rows = (
        AuditEvent.objects.filter(
            organization=rule.organization, action=action, created_at__gte=_since(rule, now)
        )
        .values("target_type", "target_id")
        .annotate(n=Count("id"))
        .filter(n__gt=threshold)
    )
    return [
        (
            f"{row['target_type']}:{row['target_id']}",
            row["n"],
            f"{row['n']} signature failures on {row['target_type']} {row['target_id']}",
            {"target": f"{row['target_type']}:{row['target_id']}", "count": row["n"]},
        )
        for row in rows
    ]


def _skill_success_drop(rule, now):
    min_uses = int(rule.params.get("min_uses", 20))
    min_rate = float(rule.params.get("min_rate", 0.7))
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    events = AuditEvent.objects.filter(
        organization=rule.organization, action="skill.outcome", created_at__gte=_since(rule, now)
    ).values_list("changes", flat=True)
    for changes in events.iterator(2000):
        skill = str((changes or {}).get("skill", ""))
        if skill:
            totals[skill][0] += 1
            totals[skill][1] += 1 if (changes or {}).get("success") else 0
    fired = []
    for skill, (uses, successes) in totals.items():
        rate = successes / uses
        if uses >= min_uses and rate < min_rate:
            fired.append(
                (
                    f"skill:{skill}",
                    uses,
                    f"Skill {skill} succeeds {rate:.0%} of {uses} uses",
                    {"skill": skill, "uses": uses, "success_rate": round(rate, 3)},
                )
            )
    return fired


def _audit_action_rate(rule, now):
    action = rule.params.get("action", "")
    threshold = int(rule.params.get("threshold", 100))
    if not action:
        return []
    condition = Q(action__startswith=action) if action.endswith(".") else Q(action=action)
    rows = (
        AuditEvent.objects.filter(organization=rule.organization, created_at__gte=_since(rule, now))
        .filter(condition)
        .values("actor_type", "actor_id")
        .annotate(n=Count("id"))
        .filter(n__gt=threshold)
    )
    return [
        (
            f"{row['actor_type']}:{row['actor_id']}",
            row["n"],
            f"{row['n']} x {action} by {row['actor_type']} {row['actor_id']}",
            {"actor": f"{row['actor_type']}:{row['actor_id']}", "count": row["n"]},
        )
        for row in rows
    ]


ALERT_EVALUATORS.register("high_risk_requests", _high_risk_requests)
ALERT_EVALUATORS.register("denied_spike", _denied_spike)
ALERT_EVALUATORS.register("bulk_exports", _bulk_exports)
ALERT_EVALUATORS.register("off_hours", _off_hours)
ALERT_EVALUATORS.register("signature_failures", _signature_failures)
ALERT_EVALUATORS.register("skill_success_drop", _skill_success_drop)
ALERT_EVALUATORS.register("audit_action_rate", _audit_action_rate)


# --- evaluation -----------------------------------------------------------------------------


def fingerprint(rule: AlertRule, group: str) -> str:
    return hashlib.sha256(f"{rule.pk}:{rule.kind}:{group}".encode()).hexdigest()


def alert_rule_evaluate(rule: AlertRule, now=None) -> list[Alert]:
    """Evaluate one rule; open new alerts or bump grouped ones. Returns the alerts touched."""
    now = now or timezone.now()
    touched = []
    evaluate = ALERT_EVALUATORS.get(rule.kind)
    if evaluate is None:
        # The app that evaluates this kind is not installed: the rule never fires.
        return []
    for group, count, title, details in evaluate(rule, now):
        digest = fingerprint(rule, group)
        with transaction.atomic():
            existing = (
                Alert.objects.select_for_update()
                .filter(organization=rule.organization, fingerprint=digest)
                .exclude(status=Alert.Status.RESOLVED)
                .first()
            )
            if existing is not None:
                Alert.objects.filter(pk=existing.pk).update(
                    count=existing.count + 1, last_seen_at=now, details={**details, "group": group}
                )
                existing.refresh_from_db()
                touched.append(existing)
                continue
            alert = Alert.objects.create(
                organization=rule.organization,
                rule=rule,
                fingerprint=digest,
                severity=rule.severity,
                title=title[:300],
                details={**details, "group": group},
                first_seen_at=now,
                last_seen_at=now,
            )
            audit.record(
                actor=system_actor(rule.organization, label="alerting"),
                action="alert.open",
                target=alert,
                organization=rule.organization,
                changes={
                    "rule": rule.name,
                    "kind": rule.kind,
                    "severity": rule.severity,
                    "group": group,
                    "count": count,
                },
            )
            for index in range(len(rule.channels)):
                transaction.on_commit(lambda pk=alert.pk, i=index: enqueue(ALERT_NOTIFY, pk, i))
            touched.append(alert)
    AlertRule.objects.filter(pk=rule.pk).update(last_evaluated_at=now)
    return touched


def alert_open(
    *,
    organization,
    fingerprint: str,
    severity: str,
    title: str,
    details: dict,
    label: str = "alerting",
) -> Alert | None:
    """Open an alert raised by a service rather than a rule (a budget reaching 80 %), in the
    caller's transaction; None when an alert with this fingerprint is already open."""
    if (
        Alert.objects.filter(organization=organization, fingerprint=fingerprint)
        .exclude(status=Alert.Status.RESOLVED)
        .exists()
    ):
        return None
    now = timezone.now()
    alert = Alert.objects.create(
        organization=organization,
        fingerprint=fingerprint,
        severity=severity,
        title=title[:300],
        details=details,
        first_seen_at=now,
        last_seen_at=now,
    )
    audit.record(
        actor=system_actor(organization, label=label),
        action="alert.open",
        target=alert,
        organization=organization,
        changes={"severity": severity, "title": alert.title, **details},
    )
    return alert


def alert_rules_evaluate(now=None) -> int:
    """Evaluate every active rule of every organization (the beat task)."""
    count = 0
    for rule in AlertRule.objects.filter(is_active=True).select_related("organization"):
        try:
            count += len(alert_rule_evaluate(rule, now))
        except Exception:  # one broken rule must not stop the others
            logger.exception("alert rule %s failed", rule.pk)
    return count


# --- rules, acknowledge, resolve -------------------------------------------------------------


def _validate(kind: str, severity: str, channels) -> None:
    if kind not in RULE_KINDS:
        raise InvalidInput(
            _("unknown rule kind %(kind)r") % {"kind": kind}, details={"kind": list(RULE_KINDS)}
        )
    if severity not in AlertRule.Severity.values:
        raise InvalidInput(_("unknown severity %(severity)r") % {"severity": severity})
    if not isinstance(channels, list) or any(
        not isinstance(c, dict) or c.get("kind") not in CHANNEL_KINDS for c in channels
    ):
        raise InvalidInput(
            _("channels must be a list of {kind: email|webhook|im, ...}"),
            details={"channels": [_("Unknown channel.")]},
        )
    for channel in channels:
        if channel["kind"] == "webhook":
            # http(s) only, never an internal address (SSRF): 400 webhook_url_refused.
            channel["url"] = outbound.check_url(
                channel.get("url"),
                allow_setting=outbound.ALERT_WEBHOOKS,
                code=outbound.WEBHOOK_URL_REFUSED,
                field="channels",
            )


@transaction.atomic
def alert_rule_create(
    *,
    actor,
    name: str,
    kind: str,
    params: dict | None = None,
    severity: str = "warning",
    channels: list | None = None,
) -> AlertRule:
    actor.require("policy.manage")
    channels = channels or []
    _validate(kind, severity, channels)

    # Webhook secrets are stored encrypted (CADRE_ENCRYPTION_KEY), like connector secrets.
    channels = [
        {**c, "secret": encrypt(str(c["secret"]))} if c.get("secret") else dict(c) for c in channels
    ]
    if AlertRule.objects.filter(organization=actor.organization, name=name).exists():
        raise Conflict(_("An alert rule named %(name)r exists.") % {"name": name}, code="duplicate")
    rule = AlertRule.objects.create(
        organization=actor.organization,
        name=name,
        kind=kind,
        params=params or {},
        severity=severity,
        channels=channels,
    )
    audit.record(
        actor=actor,
        action="alert_rule.create",
        target=rule,
        after={
            "name": name,
            "kind": kind,
            "params": rule.params,
            "severity": severity,
            "channels": [c["kind"] for c in channels],
        },
    )
    return rule


def _rule_snapshot(rule: AlertRule) -> dict:
    return {
        "name": rule.name,
        "kind": rule.kind,
        "params": rule.params,
        "severity": rule.severity,
        "channels": [c.get("kind") for c in rule.channels],
        "is_active": rule.is_active,
    }


@transaction.atomic
def alert_rule_update(*, actor, rule: AlertRule, **changes) -> AlertRule:
    """Change a rule's name, kind, params, severity, channels or is_active. A webhook channel
    given without a secret keeps the stored secret of the channel at the same URL."""
    actor.require("policy.manage")
    rule = AlertRule.objects.select_for_update().get(pk=rule.pk, organization=actor.organization)
    before = _rule_snapshot(rule)
    unknown = set(changes) - {"name", "kind", "params", "severity", "channels", "is_active"}
    if unknown:
        raise InvalidInput(_("unknown field %(unknown)r") % {"unknown": sorted(unknown)[0]})
    channels = changes.get("channels", rule.channels)
    if "channels" in changes:
        channels = [dict(c) if isinstance(c, dict) else c for c in channels or []]
        _validate(changes.get("kind", rule.kind), changes.get("severity", rule.severity), channels)
        stored = {
            c.get("url"): c.get("secret") for c in rule.channels if c.get("kind") == "webhook"
        }
        for channel in channels:
            if channel["kind"] != "webhook":
                continue
            if channel.get("secret"):
                channel["secret"] = encrypt(str(channel["secret"]))
            elif stored.get(channel["url"]):
                channel["secret"] = stored[channel["url"]]
            else:
                channel.pop("secret", None)
    else:
        _validate(changes.get("kind", rule.kind), changes.get("severity", rule.severity), [])
    name = changes.get("name", rule.name)
    if (
        AlertRule.objects.filter(organization=rule.organization, name=name)
        .exclude(pk=rule.pk)
        .exists()
    ):
        raise Conflict(_("An alert rule named %(name)r exists.") % {"name": name}, code="duplicate")
    rule.name = name
    rule.kind = changes.get("kind", rule.kind)
    rule.params = changes.get("params", rule.params) or {}
    rule.severity = changes.get("severity", rule.severity)
    rule.channels = channels
    rule.is_active = changes.get("is_active", rule.is_active)
    rule.save(update_fields=["name", "kind", "params", "severity", "channels", "is_active"])
    audit.record(
        actor=actor,
        action="alert_rule.update",
        target=rule,
        before=before,
        after=_rule_snapshot(rule),
    )
    return rule


@transaction.atomic
def alert_rule_delete(*, actor, rule: AlertRule) -> None:
    """Remove a rule; its alerts stay (their rule link is cleared)."""
    actor.require("policy.manage")
    if rule.organization_id != actor.organization.pk:
        raise InvalidInput(_("unknown alert rule"))
    audit.record(actor=actor, action="alert_rule.delete", target=rule, before=_rule_snapshot(rule))
    rule.delete()


@transaction.atomic
def alert_acknowledge(*, actor, alert: Alert, note: str = "") -> Alert:
    actor.require("policy.manage")
    updated = Alert.objects.filter(pk=alert.pk, status=Alert.Status.OPEN).update(
        status=Alert.Status.ACKNOWLEDGED,
        acknowledged_by=actor.member,
        acknowledged_at=timezone.now(),
    )
    alert.refresh_from_db()
    if not updated:
        raise Conflict(
            _("The alert is %(status)s.") % {"status": alert.status}, code=f"alert_{alert.status}"
        )
    audit.record(
        actor=actor,
        action="alert.acknowledge",
        target=alert,
        before={"status": "open"},
        after={"status": alert.status},
        reason=note,
    )
    return alert


@transaction.atomic
def alert_resolve(*, actor, alert: Alert, note: str = "") -> Alert:
    actor.require("policy.manage")
    before = alert.status
    updated = (
        Alert.objects.filter(pk=alert.pk)
        .exclude(status=Alert.Status.RESOLVED)
        .update(status=Alert.Status.RESOLVED, resolved_by=actor.member, resolved_at=timezone.now())
    )
    alert.refresh_from_db()
    if not updated:
        raise Conflict(_("The alert is already resolved."), code="alert_resolved")
    audit.record(
        actor=actor,
        action="alert.resolve",
        target=alert,
        before={"status": before},
        after={"status": alert.status},
        reason=note,
    )
    return alert
