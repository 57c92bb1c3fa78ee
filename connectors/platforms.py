"""The IM platforms Cadre ships, named once: each platform folder's descriptor (its `PLATFORM`),
registered with the base's registry by `ConnectorsConfig.ready()`. Adding a platform is a folder
and a line here; no other platform changes."""

from __future__ import annotations

from connectors import dingtalk, feishu, slack, webhook, wecom
from connectors.base import PLATFORMS

INSTALLED = (dingtalk.PLATFORM, feishu.PLATFORM, slack.PLATFORM, webhook.PLATFORM, wecom.PLATFORM)


def register() -> None:
    """Register every platform under its name (called first by `ConnectorsConfig.ready()`)."""
    for platform in INSTALLED:
        PLATFORMS.register(platform.name, platform)
