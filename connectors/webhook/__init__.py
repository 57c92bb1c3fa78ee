"""Generic signed webhook: JSON in, HMAC-SHA256 over timestamp + body, replies to a callback URL."""

from __future__ import annotations

from connectors.webhook.inbound import WebhookPlatform

PLATFORM = WebhookPlatform
