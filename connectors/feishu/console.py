"""What the console asks for and tells about a Feishu / Lark connector: its settings, and the
exact values and steps for the platform's own console."""

from __future__ import annotations

from typing import TYPE_CHECKING

from connectors.base import SettingField, SetupGuide

if TYPE_CHECKING:
    from connectors.models import Connector

SETTINGS: tuple[SettingField, ...] = (
    SettingField(
        "domain", "Domain", choices=(("feishu", "Feishu (China)"), ("lark", "Lark (global)"))
    ),
    SettingField(
        "mode",
        "How events arrive",
        choices=(
            ("webhook", "HTTP callbacks to this server"),
            ("long_connection", "Long connection (no public URL needed)"),
        ),
    ),
)


def guide(connector: Connector, url: str, mode: str) -> SetupGuide:
    """The setup guide for this connector (`url`: its callback URL; `mode`: how events arrive)."""
    lark = (connector.settings or {}).get("domain") == "lark"
    console = "Lark Developer (open.larksuite.com/app)" if lark else "open.feishu.cn/app"
    guide = SetupGuide()
    if mode == "long_connection":
        guide.steps = [
            f"In {console}, open your app → Events & Callbacks → Event configuration.",
            "Subscription mode: “Receive events through persistent connection”. No request "
            "URL is needed.",
            "Callback configuration: also choose the persistent connection.",
        ]
    else:
        guide.values = [
            ("Event configuration → Request URL", url),
            ("Callback configuration → Request URL", url),
        ]
        guide.steps = [
            f"In {console}, open your app → Events & Callbacks.",
            "Event configuration: choose “Send events to developer server” and paste the "
            "request URL; Feishu checks it at once (Cadre answers the challenge).",
            "Callback configuration: paste the same URL for card callbacks.",
            "Encryption strategy: copy the Encrypt Key and the Verification Token into this "
            "connector (Rotate credentials) — with an Encrypt Key every event is signed.",
        ]
    guide.lists = [
        ("Events to add", ["im.message.receive_v1 (Receive messages)"]),
        ("Callbacks to add", ["card.action.trigger (Card action)"]),
        (
            "Permissions",
            [
                "im:message (read and send messages in chats)",
                "im:message:send_as_bot (send messages as the app)",
                "contact:user.email:readonly (optional: match people by email)",
            ],
        ),
        ("Then", ["Enable the Bot capability and publish a new app version."]),
    ]
    return guide
