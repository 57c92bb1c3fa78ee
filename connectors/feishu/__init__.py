"""Feishu / Lark: event subscription callbacks (plain or AES-encrypted), im/v1 messages, cards."""

from __future__ import annotations

from connectors.feishu.inbound import FeishuPlatform

PLATFORM = FeishuPlatform
