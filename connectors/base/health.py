"""Connector health for `cadre doctor` and the console: missing SDK extras, failing connectors."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from cadre.checks import FAIL, OK, WARN, Check
from cadre.governance.models import AuditEvent
from connectors.base import registry
from connectors.models import Connector, Delivery

LABELS = {
    "ok": gettext_lazy("Healthy"),
    "warn": gettext_lazy("Needs a look"),
    "fail": gettext_lazy("Failing"),
}


@dataclass(frozen=True)
class Health:
    """One connector's state: `level` is "ok", "warn" or "fail"; `fix` says what to do (a
    shell command when `fix_is_command`); `label` is the badge's word for it."""

    level: str
    detail: str
    fix: str = ""
    label: str = ""
    fix_is_command: bool = False

    def __post_init__(self):
        if not self.label:
            object.__setattr__(self, "label", LABELS[self.level])


@dataclass(frozen=True)
class Outcome:
    """The last thing Cadre asked of the platform: a credential test or a delivery."""

    kind: str  # "test" or "delivery"
    at: datetime
    ok: bool
    message: str
    reachable: bool = True


def last_outcomes(connectors: Iterable[Connector]) -> dict[int, Outcome]:
    """{connector id: the newer of its last credential test (its audit event holds the result)
    and its last finished delivery}, for the connectors Cadre has asked their platform anything.
    Two queries, however many connectors."""
    connectors = list(connectors)
    if not connectors:
        return {}
    outcomes: dict[int, list[Outcome]] = {c.pk: [] for c in connectors}
    tests = (
        AuditEvent.objects.filter(
            organization_id__in={c.organization_id for c in connectors},
            target_type="connector",
            target_id__in=[str(c.pk) for c in connectors],
            action="connector.test_credentials",
        )
        .order_by("target_id", "-created_at", "-pk")
        .distinct("target_id")
        .values_list("target_id", "created_at", "changes")
    )
    for target_id, at, changes in tests:
        changes = changes if isinstance(changes, dict) else {}
        outcomes[int(target_id)].append(
            Outcome(
                "test",
                at,
                changes.get("ok") is True,
                str(changes.get("result") or ""),
                reachable=changes.get("reachable") is not False,
            )
        )
    deliveries = (
        Delivery.objects.filter(connector__in=connectors)
        .exclude(status=Delivery.Status.PENDING)
        .order_by("connector_id", "-created_at", "-pk")
        .distinct("connector_id")
        .values_list("connector_id", "created_at", "sent_at", "status", "error")
    )
    for connector_id, created_at, sent_at, status, error in deliveries:
        sent = status == Delivery.Status.SENT
        outcomes[connector_id].append(Outcome("delivery", sent_at or created_at, sent, error))
    return {
        pk: max(found, key=lambda outcome: outcome.at) for pk, found in outcomes.items() if found
    }


def last_outcome(connector: Connector) -> Outcome | None:
    """The newer of the connector's last credential test and last finished delivery; None when
    Cadre has asked the platform nothing yet."""
    return last_outcomes([connector]).get(connector.pk)


_ASK = object()


def connector_health(connector: Connector, *, last: Outcome | object | None = _ASK) -> Health:
    """The health of one connector (the same judgement in the console and in `cadre doctor`):
    a connector whose last credential test or delivery failed is failing until one succeeds,
    whatever its counters say. `last` is its `last_outcomes` entry when the caller has it."""
    platform = registry().get(connector.platform)
    if platform is None:
        return Health(
            "fail",
            _("unknown platform %(platform)r") % {"platform": connector.platform},
            _("Disable or delete this connector."),
        )
    mode = (connector.settings or {}).get("mode", "webhook")
    if mode in ("long_connection", "stream") and not platform.extra_installed():
        return Health(
            "fail",
            (
                _("%(platform)s long-connection mode needs the %(module)s package")
                if mode == "long_connection"
                else _("%(platform)s stream mode needs the %(module)s package")
            )
            % {"platform": platform.label, "module": platform.extra_module},
            f"pip install 'cadre[{platform.extra}]'",
            fix_is_command=True,
        )
    if last is _ASK:
        last = last_outcome(connector)
    if last is not None and not last.ok:
        if last.kind == "delivery":
            return Health(
                "fail",
                _("The last message to %(platform)s failed: %(reason)s")
                % {"platform": platform.label, "reason": last.message or _("no reason given")},
                _("Test the credentials; see the connector page."),
                label=_("Sending fails"),
            )
        if not last.reachable:
            return Health(
                "fail",
                # The message says what to check (firewall, proxy, DNS).
                _("The last credential test failed: %(reason)s") % {"reason": last.message},
                label=_("Unreachable"),
            )
        return Health(
            "fail",
            _("The last credential test failed: %(reason)s") % {"reason": last.message},
            _("Rotate the credentials to the ones in the platform's console, then test again."),
            label=_("Credentials refused"),
        )
    if connector.signature_rejections or connector.failures:
        return Health(
            "warn",
            _("%(rejections)s signature rejections, %(failures)s failures (last: %(last)s)")
            % {
                "rejections": connector.signature_rejections,
                "failures": connector.failures,
                "last": connector.last_failure or "—",
            },
            _("Compare the credentials with the platform's console; see the connector page."),
        )
    last_event = connector.last_event_at or _("never")
    return Health(
        "ok",
        _("%(platform)s, last event %(when)s") % {"platform": platform.label, "when": last_event},
    )


def doctor_checks() -> list[Check]:
    """One check per active connector (registered in cadre.checks.APP_CHECKS): FAIL when its
    mode needs an SDK extra that is not installed or whose last credential test or delivery
    failed, WARN on recent failures or signature rejections."""
    statuses = {"ok": OK, "warn": WARN, "fail": FAIL}
    checks = []
    connectors = list(Connector.objects.filter(status=Connector.Status.ACTIVE))
    outcomes = last_outcomes(connectors)
    for connector in connectors:
        health = connector_health(connector, last=outcomes.get(connector.pk))
        checks.append(
            Check(statuses[health.level], f"connector {connector.name}", health.detail, health.fix)
        )
    return checks
