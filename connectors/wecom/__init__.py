"""WeCom (企业微信): encrypted XML callbacks, the app message API, template cards."""

from __future__ import annotations

from connectors.wecom.inbound import WeComPlatform

PLATFORM = WeComPlatform
