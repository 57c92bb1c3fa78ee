"""Slack file download: the file's private URL with the bot token."""

from __future__ import annotations

from urllib.parse import urlsplit

from connectors.base.attachments import AttachmentError


def _trusted(url: str, transport) -> bool:
    """Slack's own hosts, or the host of the connector's configured API (Enterprise Grid or
    GovSlack deployments set `api_base_url`)."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if parts.scheme != "https" and host != (urlsplit(transport.base_url).hostname or "").lower():
        return False
    return (
        host == "slack.com"
        or host.endswith(".slack.com")
        or host == (urlsplit(transport.base_url).hostname or "").lower()
    )


def download_request(transport, attachment) -> tuple[str, str, dict, bool]:
    url = attachment.source.get("url", "")
    # The bot token goes with the request: only ever to Slack (a signed event names the URL,
    # but a token is not sent wherever a payload points).
    if not _trusted(url, transport):
        raise AttachmentError(f"refusing to send the bot token to {urlsplit(url).hostname!r}")
    return "GET", url, {"follow_redirects": True}, True
