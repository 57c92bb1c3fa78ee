"""Alert notification channels: email (Django's backend), signed webhook, IM via connectors.

A webhook receives the alert as JSON with
    X-Cadre-Timestamp: <unix seconds>
    X-Cadre-Signature: v1=<hex HMAC-SHA256(secret, "<timestamp>.<raw body>")>
so the receiver can check origin and freshness (reject beyond 5 minutes).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
import urllib.request

from django.conf import settings
from django.core.mail import send_mail

from cadre.governance.models import Alert

WEBHOOK_TIMEOUT = 10


def alert_payload(alert: Alert) -> dict:
    return {
        "id": alert.pk,
        "organization": alert.organization_id,
        "rule": alert.rule.name if alert.rule_id else None,
        "kind": alert.rule.kind if alert.rule_id else None,
        "severity": alert.severity,
        "title": alert.title,
        "details": alert.details,
        "status": alert.status,
        "count": alert.count,
        "first_seen_at": alert.first_seen_at.isoformat(),
        "last_seen_at": alert.last_seen_at.isoformat(),
        "url": f"{settings.CADRE_BASE_URL}/console/alerts/{alert.pk}",
    }


def webhook_signature(secret: str, timestamp: str, body: bytes) -> str:
    digest = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return f"v1={digest.hexdigest()}"


def send_webhook(url: str, secret: str, payload: dict) -> int:
    body = json.dumps(payload, ensure_ascii=False, sort_keys=True).encode()
    timestamp = str(int(time.time()))
    request = urllib.request.Request(  # noqa: S310 - the URL is validated as http(s) on save
        url,
        data=body,
        method="POST",
        headers={
            "Content-Type": "application/json",
            "User-Agent": "Cadre-Alerts/1",
            "X-Cadre-Timestamp": timestamp,
            "X-Cadre-Signature": webhook_signature(secret, timestamp, body),
        },
    )
    with urllib.request.urlopen(request, timeout=WEBHOOK_TIMEOUT) as response:  # noqa: S310
        return response.status


def send_im(alert: Alert, member_ids: list[int]) -> int:
    """Text the alert to members through their IM connector (0 if connectors are absent)."""
    try:
        from connectors.dispatch import send
        from connectors.models import Connector
    except ImportError:
        return 0
    from cadre.tenancy.models import IMIdentity

    connectors = {
        c.platform: c
        for c in Connector.objects.filter(
            organization_id=alert.organization_id, status=Connector.Status.ACTIVE
        )
    }
    sent = 0
    identities = IMIdentity.objects.filter(
        organization_id=alert.organization_id,
        member_id__in=member_ids,
        platform__in=list(connectors),
    )
    done: set[int] = set()
    for identity in identities:
        if identity.member_id in done:
            continue
        send(
            connectors[identity.platform],
            kind="text",
            recipient=identity.platform_user_id,
            body={"text": f"[{alert.severity.upper()}] {alert.title}"},
            idempotency_key=f"alert:{alert.pk}:{identity.member_id}",
        )
        done.add(identity.member_id)
        sent += 1
    return sent


def alert_deliver(*, alert_id: int, channel_index: int) -> str:
    """Deliver one alert to one channel of its rule (the Celery task retries on errors)."""
    alert = Alert.objects.select_related("rule").filter(pk=alert_id).first()
    if alert is None or alert.rule is None or channel_index >= len(alert.rule.channels):
        return "skipped"
    channel = alert.rule.channels[channel_index]
    payload = alert_payload(alert)
    if channel["kind"] == "email":
        send_mail(
            subject=f"[Cadre {alert.severity}] {alert.title}",
            message=json.dumps(payload, ensure_ascii=False, indent=2),
            from_email=None,
            recipient_list=list(channel.get("to", [])),
        )
        return "email"
    if channel["kind"] == "webhook":
        from cadre.crypto import decrypt

        secret = decrypt(channel["secret"]) if channel.get("secret") else ""
        send_webhook(channel["url"], secret, payload)
        return "webhook"
    if channel["kind"] == "im":
        send_im(alert, [int(pk) for pk in channel.get("members", [])])
        return "im"
    return "skipped"
