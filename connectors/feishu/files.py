"""Feishu file download: a message's file or image through im/v1 message resources."""

from __future__ import annotations


def download_request(transport, attachment) -> tuple[str, str, dict, bool]:
    message_id = attachment.source.get("message_id", "")
    kind = "image" if attachment.kind == "image" else "file"
    return (
        "GET",
        f"/open-apis/im/v1/messages/{message_id}/resources/{attachment.key}",
        {"params": {"type": kind}},
        True,
    )
