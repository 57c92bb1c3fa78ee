"""Alert notification channels: email (Django's backend) and signed webhook built in, others
(IM) registered by the apps that deliver them in `ALERT_CHANNELS`.

A webhook receives the alert as JSON with
    X-Cadre-Timestamp: <unix seconds>
    X-Cadre-Signature: v1=<hex HMAC-SHA256(secret, "<timestamp>.<raw body>")>
so the receiver can check origin and freshness (reject beyond 5 minutes).

Webhook URLs are a server-side request made on behalf of whoever configured the rule, so
they may only reach the public internet: http(s) only, and no host that resolves to a
loopback, private, link-local (cloud metadata), shared, multicast or reserved address — unless
the host or its network is listed in CADRE_ALERT_WEBHOOK_ALLOWED_HOSTS (on-prem receivers,
tests). The URL is checked when a rule is saved and again at every send (DNS can change), and
the request goes to the very address that was checked (no second lookup, no redirects).
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import ipaddress
import json
import logging
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from urllib.parse import urlsplit

from django.conf import settings
from django.core.mail import send_mail
from django.urls import NoReverseMatch, reverse

from cadre.crypto import decrypt
from cadre.errors import InvalidInput
from cadre.governance.models import Alert
from cadre.ports import Registry

logger = logging.getLogger(__name__)

# Channel kind -> deliver(alert, channel) -> outcome ("email", "refused", ...). Email and webhook
# are registered below; connectors registers "im". A channel whose kind nobody delivers is
# skipped: a rule may name IM members on an installation without connectors.
ALERT_CHANNELS: Registry[Callable[[Alert, dict], str]] = Registry("alert channels")

WEBHOOK_TIMEOUT = 10
WEBHOOK_SCHEMES = ("http", "https")
MAX_WEBHOOK_URL = 2000


class WebhookRefused(InvalidInput):
    """A webhook URL Cadre will not call: a bad scheme or an internal destination (HTTP 400)."""

    code = "webhook_url_refused"


# --- the destination check ------------------------------------------------------------------


ALERT_ALLOW_SETTING = "CADRE_ALERT_WEBHOOK_ALLOWED_HOSTS"


def _allow_list(setting: str = ALERT_ALLOW_SETTING) -> tuple[bool, set[str], list]:
    """(everything allowed, host names, networks) from the allow-list setting."""
    names: set[str] = set()
    networks: list = []
    for entry in getattr(settings, setting, []) or []:
        entry = str(entry).strip().lower()
        if entry == "*":
            return True, names, networks
        try:
            networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
        except ValueError:
            names.add(entry.rstrip("."))
    return False, names, networks


def _internal(address) -> bool:
    """Not a public unicast address: loopback, private, link-local, shared, reserved, …"""
    return not address.is_global or address.is_multicast


def _check_addresses(host: str, addresses: list, setting: str = ALERT_ALLOW_SETTING) -> None:
    everything, names, networks = _allow_list(setting)
    if everything or host in names:
        return
    for address in addresses:
        if address.version == 6 and address.ipv4_mapped is not None:
            address = address.ipv4_mapped  # ::ffff:10.0.0.1 is 10.0.0.1
        if _internal(address) and not any(address in network for network in networks):
            raise WebhookRefused(
                f"The webhook host {host!r} resolves to the internal address {address}; "
                "webhooks may only reach public addresses (an administrator can allow internal "
                f"hosts with {setting}).",
                details={"url": [f"{host} resolves to an internal address ({address})."]},
            )


def _parse(url) -> tuple[str, str, int]:
    """(scheme, host, port) of an acceptable-looking webhook URL, else WebhookRefused."""
    if not isinstance(url, str) or not url.strip() or len(url) > MAX_WEBHOOK_URL:
        raise WebhookRefused(
            "A webhook channel needs a URL (at most 2,000 characters).",
            details={"url": ["Enter an http:// or https:// URL."]},
        )
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as error:
        raise WebhookRefused(
            f"The webhook URL is malformed ({error}).", details={"url": [str(error)]}
        ) from None
    scheme = parts.scheme.lower()
    if scheme not in WEBHOOK_SCHEMES:
        raise WebhookRefused(
            f"Webhook URLs must use http or https, not {scheme or 'no scheme'!r}.",
            details={"url": ["Only http:// and https:// URLs are accepted."]},
        )
    host = (parts.hostname or "").rstrip(".").lower()
    if not host:
        raise WebhookRefused(
            "The webhook URL has no host.", details={"url": ["Enter a URL with a host name."]}
        )
    return scheme, host, port or (443 if scheme == "https" else 80)


def _literal(host: str):
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _resolve(host: str, port: int) -> list:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos))


def validate_webhook_url(url, *, allow_setting: str = ALERT_ALLOW_SETTING) -> str:
    """Check a webhook URL when a rule is saved; returns it stripped, or raises WebhookRefused
    (400). A host that does not resolve right now is accepted: the send-time check decides.
    `allow_setting` names the allow-list (webhook connectors have their own)."""
    _, host, port = _parse(url)
    literal = _literal(host)
    if literal is not None:
        _check_addresses(host, [literal], allow_setting)
    else:
        try:
            addresses = _resolve(host, port)
        except (OSError, UnicodeError):
            addresses = []
        _check_addresses(host, addresses, allow_setting)
    return url.strip()


@dataclass(frozen=True)
class WebhookTarget:
    scheme: str
    host: str
    port: int
    address: str  # the checked address the request is sent to
    path: str


def webhook_target(url: str, *, allow_setting: str = ALERT_ALLOW_SETTING) -> WebhookTarget:
    """Resolve and check a webhook URL at send time (DNS errors propagate as OSError, which
    the delivery task retries; an internal destination is WebhookRefused)."""
    scheme, host, port = _parse(url)
    literal = _literal(host)
    addresses = [literal] if literal is not None else _resolve(host, port)
    if not addresses:
        raise OSError(f"{host} has no address")
    _check_addresses(host, addresses, allow_setting)
    parts = urlsplit(url.strip())
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return WebhookTarget(scheme, host, port, str(addresses[0]), path)


def _pinned_connection(target: WebhookTarget) -> http.client.HTTPConnection:
    """A connection to the checked address; TLS still verifies the certificate for the host
    name (SNI), and the Host header carries the name."""
    if target.scheme == "https":
        connection = http.client.HTTPSConnection(target.host, target.port, timeout=WEBHOOK_TIMEOUT)
    else:
        connection = http.client.HTTPConnection(target.host, target.port, timeout=WEBHOOK_TIMEOUT)
    connection._create_connection = partial(_connect_to, target.address)
    return connection


def _connect_to(address: str, destination, timeout, source_address=None):
    return socket.create_connection((address, destination[1]), timeout, source_address)


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
    """POST the signed payload; the destination is checked again now (DNS can change) and
    redirects are not followed (a redirect could point anywhere). Returns the HTTP status."""
    target = webhook_target(url)
    body = json.dumps(payload, ensure_ascii=False, sort_keys=True).encode()
    timestamp = str(int(time.time()))
    connection = _pinned_connection(target)
    try:
        connection.request(
            "POST",
            target.path,
            body=body,
            headers={
                "Content-Type": "application/json",
                "User-Agent": "Cadre-Alerts/1",
                "X-Cadre-Timestamp": timestamp,
                "X-Cadre-Signature": webhook_signature(secret, timestamp, body),
            },
        )
        response = connection.getresponse()
        response.read(64 * 1024)
    finally:
        connection.close()
    if response.status >= 500 or response.status == 429:
        # The receiver is down or busy: the delivery task retries (OSError is retried).
        raise ConnectionError(f"webhook answered {response.status}")
    if response.status >= 300:
        # Redirects are not followed and a 4xx will not change on retry: log it and stop.
        logger.warning("webhook %s answered %s; not retried", target.host, response.status)
    return response.status


def _deliver_email(alert: Alert, channel: dict) -> str:
    send_mail(
        subject=f"[Cadre {alert.severity}] {alert.title}",
        message=json.dumps(alert_payload(alert), ensure_ascii=False, indent=2),
        from_email=None,
        recipient_list=list(channel.get("to", [])),
    )
    return "email"


def _deliver_webhook(alert: Alert, channel: dict) -> str:
    secret = decrypt(channel["secret"]) if channel.get("secret") else ""
    try:
        send_webhook(channel["url"], secret, alert_payload(alert))
    except WebhookRefused as refused:
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
