"""Slack file download: the file's private URL with the bot token."""

from __future__ import annotations


def download_request(transport, attachment) -> tuple[str, str, dict, bool]:
    url = attachment.source.get("url", "")
    return "GET", url, {"follow_redirects": True}, True
