"""Which DingTalk `sessionWebhook` URLs Cadre may reply to: https on an allow-listed host.

An HTTP callback's `sign` covers only its timestamp, so the body — and the sessionWebhook in
it — is whatever the sender wrote. Replying to any URL found there would let a captured sign
send the agent's answer (and the conversation it quotes) anywhere, loopback included. Only
DingTalk's own host (CADRE_DINGTALK_SESSION_WEBHOOK_HOSTS, default oapi.dingtalk.com) is used;
for any other URL the reply goes through the robot API, to the sender's own DingTalk account.
This host check comes on top of the outbound guard every transport request goes through
(connectors.base.transport): an allowed host resolving to a refused address still gets nothing.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings

DEFAULT_HOSTS = ("oapi.dingtalk.com",)
MAX_URL = 2000


def allowed_hosts() -> list[str]:
    hosts = getattr(settings, "CADRE_DINGTALK_SESSION_WEBHOOK_HOSTS", DEFAULT_HOSTS)
    return [str(host).strip().lower().rstrip(".") for host in hosts if str(host).strip()]


def session_webhook_allowed(url: object) -> bool:
    """True for an https:// URL, without user info, on an allow-listed host
    (an entry ".example.com" also matches its subdomains)."""
    if not isinstance(url, str) or not url or len(url) > MAX_URL:
        return False
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a malformed port
    except ValueError:
        return False
    if parts.scheme != "https" or parts.username is not None or parts.password is not None:
        return False
    host = (parts.hostname or "").rstrip(".")
    if not host:
        return False
    for entry in allowed_hosts():
        if entry.startswith("."):
            if host.endswith(entry) or host == entry[1:]:
                return True
        elif host == entry:
            return True
    return False
