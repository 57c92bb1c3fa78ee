"""Alert notification channels: email (Django's backend) and signed webhook built in, others
(IM) registered by the apps that deliver them in `ALERT_CHANNELS`.

A webhook receives the alert as JSON with
    X-Cadre-Timestamp: <unix seconds>
    X-Cadre-Signature: v1=<hex HMAC-SHA256(secret, "<timestamp>.<raw body>")>
so the receiver can check origin and freshness (reject beyond 5 minutes).

Webhook URLs are a server-side request made on behalf of whoever configured the rule, so
they go through the outbound guard (cadre.outbound): http(s) only, public addresses only unless
CADRE_ALERT_WEBHOOK_ALLOWED_HOSTS lists the host or its network, link-local and metadata
addresses never. The URL is checked when a rule is saved and again at every send (DNS can
change), and the request goes to the very address that was checked (no second lookup, no
redirects).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
import zoneinfo
from collections.abc import Callable

import httpx
from django.conf import settings
from django.core.mail import send_mail
from django.urls import NoReverseMatch, reverse
from django.utils import timezone, translation
from django.utils.dateformat import format as date_format
from django.utils.translation import gettext as _

from cadre import outbound
from cadre.crypto import decrypt
from cadre.governance.models import Alert
from cadre.ports import Registry
from cadre.tenancy.languages import member_language, organization_language
from cadre.tenancy.models import Member

logger = logging.getLogger(__name__)

# Channel kind -> deliver(alert, channel) -> outcome ("email", "refused", ...). Email and webhook
# are registered below; connectors registers "im". A channel whose kind nobody delivers is
# skipped: a rule may name IM members on an installation without connectors.
ALERT_CHANNELS: Registry[Callable[[Alert, dict], str]] = Registry("alert channels")

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
        "url": _alert_url(alert),
    }


def _alert_url(alert: Alert) -> str:
    try:
        return f"{settings.CADRE_BASE_URL}{reverse('console:alert', args=[alert.pk])}"
    except NoReverseMatch:
        return f"{settings.CADRE_BASE_URL}/alerts/{alert.pk}/"


def webhook_signature(secret: str, timestamp: str, body: bytes) -> str:
    digest = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return f"v1={digest.hexdigest()}"


def send_webhook(url: str, secret: str, payload: dict) -> int:
    """POST the signed payload; the destination is checked again now, in the connection (DNS
    can change), and redirects are not followed (a redirect could point anywhere). Returns the
    HTTP status."""
    # A URL saved before the rules tightened is refused here, not sent.
    host = outbound.parse_url(url).host
    body = json.dumps(payload, ensure_ascii=False, sort_keys=True).encode()
    timestamp = str(int(time.time()))
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "Cadre-Alerts/1",
        "X-Cadre-Timestamp": timestamp,
        "X-Cadre-Signature": webhook_signature(secret, timestamp, body),
    }
    try:
        with (
            outbound.http_client(
                allow_setting=outbound.ALERT_WEBHOOKS, timeout=WEBHOOK_TIMEOUT
            ) as client,
            client.stream("POST", url.strip(), content=body, headers=headers) as response,
        ):
            for _chunk in response.iter_bytes():  # drained, up to the first 64 KB
                if response.num_bytes_downloaded >= 64 * 1024:
                    break
    except httpx.TransportError as error:
        # Unreachable or timed out: the delivery task retries (ConnectionError is retried).
        raise ConnectionError(f"webhook {host}: {error}") from error
    if response.status_code >= 500 or response.status_code == 429:
        # The receiver is down or busy: the delivery task retries (OSError is retried).
        raise ConnectionError(f"webhook answered {response.status_code}")
    if response.status_code >= 300:
        # Redirects are not followed and a 4xx will not change on retry: log it and stop.
        logger.warning("webhook %s answered %s; not retried", host, response.status_code)
    return response.status_code


def _recipient_language(alert: Alert, address: str) -> str:
    """The language to write to an address in: its member's, else the organization's."""
    member = (
        Member.objects.select_related("organization")
        .filter(organization_id=alert.organization_id, email__iexact=address.strip())
        .exclude(status=Member.Status.DEACTIVATED)
        .first()
    )
    if member is not None:
        return member_language(member)
    return organization_language(alert.organization)


def _email_text(alert: Alert, payload: dict) -> tuple[str, str]:
    """The alert's subject and body in the active language (the JSON stays as the API has it)."""
    names = {"severity": alert.severity_label, "title": alert.title}
    subject = _("[Cadre %(severity)s] %(title)s") % names
    try:  # in the organization's time zone, as the console shows it
        zone = zoneinfo.ZoneInfo(alert.organization.time_zone or "UTC")
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        zone = zoneinfo.ZoneInfo("UTC")
    last_seen = date_format(timezone.localtime(alert.last_seen_at, zone), _("j M Y, H:i T"))
    body = _(
        "Alert: %(title)s\nSeverity: %(severity)s\nSeen %(count)s times, last at %(last_seen)s."
        "\nOpen it in the console: %(url)s"
    ) % {**names, "count": alert.count, "last_seen": last_seen, "url": payload["url"]}
    details = json.dumps(payload, ensure_ascii=False, indent=2)
    return subject, f"{body}\n\n{details}"


def _deliver_email(alert: Alert, channel: dict) -> str:
    # One message per language: each recipient reads it in theirs.
    by_language: dict[str, list[str]] = {}
    for address in channel.get("to", []):
        by_language.setdefault(_recipient_language(alert, address), []).append(address)
    payload = alert_payload(alert)
    for language, addresses in by_language.items():
        with translation.override(language):
            subject, message = _email_text(alert, payload)
        send_mail(subject=subject, message=message, from_email=None, recipient_list=addresses)
    return "email"


def _deliver_webhook(alert: Alert, channel: dict) -> str:
    secret = decrypt(channel["secret"]) if channel.get("secret") else ""
    try:
        send_webhook(channel["url"], secret, alert_payload(alert))
    except outbound.OutboundRefused as refused:
        # Not retried: the destination is not allowed (the rule needs another URL).
        logger.warning("alert %s: webhook refused: %s", alert.pk, refused.message)
        return "refused"
    return "webhook"


ALERT_CHANNELS.register("email", _deliver_email)
ALERT_CHANNELS.register("webhook", _deliver_webhook)


def alert_deliver(*, alert_id: int, channel_index: int) -> str:
    """Deliver one alert to one channel of its rule (the Celery task retries on errors)."""
    alert = Alert.objects.select_related("rule").filter(pk=alert_id).first()
    if alert is None or alert.rule is None or channel_index >= len(alert.rule.channels):
        return "skipped"
    channel = alert.rule.channels[channel_index]
    deliver = ALERT_CHANNELS.get(channel["kind"])
    if deliver is None:
        return "skipped"
    return deliver(alert, channel)
