"""Connector health for `cadre doctor` and the console: missing SDK extras, failing connectors."""

from __future__ import annotations

from connectors.base import registry
from connectors.models import Connector


def doctor_checks() -> list:
    """One check per active connector whose mode needs an SDK extra that is not installed,
    and per connector with recent failures or signature rejections."""
    from cadre.runtime.doctor import FAIL, OK, WARN, Check

    checks = []
    platforms = registry()
    for connector in Connector.objects.filter(status=Connector.Status.ACTIVE):
        platform = platforms.get(connector.platform)
        if platform is None:
            checks.append(
                Check(
                    FAIL,
                    f"connector {connector.name}",
                    f"unknown platform {connector.platform!r}",
                    "Disable or delete this connector.",
                )
            )
            continue
        mode = (connector.settings or {}).get("mode", "webhook")
        if mode in ("long_connection", "stream") and not platform.extra_installed():
            checks.append(
                Check(
                    FAIL,
                    f"connector {connector.name}",
                    f"{platform.label} {mode} mode needs the {platform.extra_module} package",
                    f"pip install 'cadre[{platform.extra}]'",
                )
            )
            continue
        if connector.signature_rejections or connector.failures:
            checks.append(
                Check(
                    WARN,
                    f"connector {connector.name}",
                    f"{connector.signature_rejections} signature rejections, {connector.failures} "
                    f"failures (last: {connector.last_failure or '—'})",
                    "Compare the credentials with the platform's console; see the connector page.",
                )
            )
        else:
            last = connector.last_event_at or "never"
            checks.append(
                Check(OK, f"connector {connector.name}", f"{platform.label}, last event {last}")
            )
    return checks
