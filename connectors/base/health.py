"""Connector health for `cadre doctor` and the console: missing SDK extras, failing connectors."""

from __future__ import annotations

from dataclasses import dataclass

from cadre.checks import FAIL, OK, WARN, Check
from connectors.base import registry
from connectors.models import Connector


@dataclass(frozen=True)
class Health:
    """One connector's state: `level` is "ok", "warn" or "fail"; `fix` says what to do."""

    level: str
    detail: str
    fix: str = ""


def connector_health(connector: Connector) -> Health:
    """The health of one connector (the same judgement in the console and in `cadre doctor`)."""
    platform = registry().get(connector.platform)
    if platform is None:
        return Health(
            "fail", f"unknown platform {connector.platform!r}", "Disable or delete this connector."
        )
    mode = (connector.settings or {}).get("mode", "webhook")
    if mode in ("long_connection", "stream") and not platform.extra_installed():
        return Health(
            "fail",
            f"{platform.label} {mode} mode needs the {platform.extra_module} package",
            f"pip install 'cadre[{platform.extra}]'",
        )
    if connector.signature_rejections or connector.failures:
        return Health(
            "warn",
            f"{connector.signature_rejections} signature rejections, {connector.failures} "
            f"failures (last: {connector.last_failure or '—'})",
            "Compare the credentials with the platform's console; see the connector page.",
        )
    last = connector.last_event_at or "never"
    return Health("ok", f"{platform.label}, last event {last}")


def doctor_checks() -> list[Check]:
    """One check per active connector (registered in cadre.checks.APP_CHECKS): FAIL when its
    mode needs an SDK extra that is not installed, WARN on recent failures or signature
    rejections."""
    statuses = {"ok": OK, "warn": WARN, "fail": FAIL}
    checks = []
    for connector in Connector.objects.filter(status=Connector.Status.ACTIVE):
        health = connector_health(connector)
        checks.append(
            Check(statuses[health.level], f"connector {connector.name}", health.detail, health.fix)
        )
    return checks
