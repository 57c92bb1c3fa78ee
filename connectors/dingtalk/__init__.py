"""DingTalk: HTTP robot callbacks (timestamp + sign), robot messages, interactive cards."""

from __future__ import annotations

from connectors.dingtalk.inbound import DingTalkPlatform

PLATFORM = DingTalkPlatform
