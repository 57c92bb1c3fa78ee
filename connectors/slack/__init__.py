"""Slack: Events API and interactivity with v0 request signing, chat.postMessage/chat.update."""

from __future__ import annotations

from connectors.slack.inbound import SlackPlatform

PLATFORM = SlackPlatform
