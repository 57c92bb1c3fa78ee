"""WeCom file download: temporary media (media/get) by the message's MediaId."""

from __future__ import annotations

import json


def download_request(transport, attachment) -> tuple[str, str, dict, bool]:
    return "GET", "/cgi-bin/media/get", {"params": {"media_id": attachment.key}}, True


def download_error(content: bytes) -> str:
    """WeCom answers a bad media id with a JSON error body (and status 200)."""
    if not content.startswith(b'{"errcode"'):
        return ""
    try:
        data = json.loads(content)
    except ValueError:
        return ""
    if data.get("errcode", 0) == 0:
        return ""
    return f"WeCom {data.get('errcode')}: {data.get('errmsg', '')}"
