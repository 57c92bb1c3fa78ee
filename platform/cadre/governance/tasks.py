"""Governance background work: audit sealing and exports, confirmation expiry, alerts."""

from __future__ import annotations

from celery import shared_task

from cadre.governance import alerts, budgets, confirmations, export, notifications

# The sealing task lives beside audit, in the audit trail's layer; imported here because the
# worker registers the tasks it finds in each app's tasks module.
from cadre.governance.audit_tasks import audit_seal  # noqa: F401


@shared_task(
    bind=True,
    autoretry_for=(ConnectionError, OSError),
    retry_backoff=True,
    retry_jitter=True,
    max_retries=3,
    acks_late=True,
)
def audit_export_run(self, export_id: int) -> str:
    """Write one export's bundle (idempotent: a completed export is left alone)."""
    return export.audit_export_run(export_id=export_id).status


@shared_task(autoretry_for=(ConnectionError, OSError), retry_backoff=True, retry_jitter=True)
def audit_exports_expire() -> int:
    """Beat: delete the bundles of exports past CADRE_AUDIT_EXPORT_RETENTION_DAYS."""
    return export.audit_exports_expire()


@shared_task(autoretry_for=(ConnectionError,), retry_backoff=True, retry_jitter=True)
def confirmations_expire() -> int:
    """Beat: expire pending confirmations past their deadline (expired = rejected)."""
    return confirmations.confirmations_expire()


@shared_task(autoretry_for=(ConnectionError,), retry_backoff=True, retry_jitter=True)
def alerts_evaluate() -> int:
    """Beat: evaluate every active alert rule; returns the number of alerts raised or bumped."""
    return alerts.alert_rules_evaluate()


@shared_task(
    autoretry_for=(ConnectionError, OSError),
    retry_backoff=True,
    retry_jitter=True,
    max_retries=5,
)
def alert_notify(alert_id: int, channel_index: int) -> str:
    """Deliver one alert to one of its rule's channels (email, signed webhook, IM)."""
    return notifications.alert_deliver(alert_id=alert_id, channel_index=channel_index)


@shared_task(autoretry_for=(ConnectionError, OSError), retry_backoff=True, retry_jitter=True)
def confirmation_notify(confirmation_id: int) -> int:
    """Send a new confirmation's cards to its deciders through the IM connectors."""
    return confirmations.confirmation_send_cards(confirmation_id=confirmation_id)


@shared_task(autoretry_for=(ConnectionError,), retry_backoff=True, retry_jitter=True)
def usage_release_stale() -> int:
    """Beat: release the budget reservations of model calls whose worker died mid-call."""
    return budgets.usage_release_stale()
