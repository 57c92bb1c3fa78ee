"""Governance background work: audit sealing and exports, confirmation expiry, alerts."""

from __future__ import annotations

from celery import shared_task

# The sealing task lives beside audit, which enqueues it and so must not import this module;
# imported here because the worker registers the tasks it finds in each app's tasks module.
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
    from cadre.governance.export import audit_export_run as run

    return run(export_id=export_id).status


@shared_task(autoretry_for=(ConnectionError,), retry_backoff=True, retry_jitter=True)
def confirmations_expire() -> int:
    """Beat: expire pending confirmations past their deadline (expired = rejected)."""
    from cadre.governance.confirmations import confirmations_expire as expire

    return expire()


@shared_task(autoretry_for=(ConnectionError,), retry_backoff=True, retry_jitter=True)
def alerts_evaluate() -> int:
    """Beat: evaluate every active alert rule; returns the number of alerts raised or bumped."""
    from cadre.governance.alerts import alert_rules_evaluate

    return alert_rules_evaluate()


@shared_task(
    autoretry_for=(ConnectionError, OSError),
    retry_backoff=True,
    retry_jitter=True,
    max_retries=5,
)
def alert_notify(alert_id: int, channel_index: int) -> str:
    """Deliver one alert to one of its rule's channels (email, signed webhook, IM)."""
    from cadre.governance.notifications import alert_deliver

    return alert_deliver(alert_id=alert_id, channel_index=channel_index)


@shared_task(autoretry_for=(ConnectionError, OSError), retry_backoff=True, retry_jitter=True)
def confirmation_notify(confirmation_id: int) -> int:
    """Send a new confirmation's cards to its deciders through the IM connectors."""
    from cadre.governance.confirmations import confirmation_send_cards

    return confirmation_send_cards(confirmation_id=confirmation_id)


@shared_task(autoretry_for=(ConnectionError,), retry_backoff=True, retry_jitter=True)
def usage_release_stale() -> int:
    """Beat: release the budget reservations of model calls whose worker died mid-call."""
    from cadre.governance.budgets import usage_release_stale as release

    return release()
