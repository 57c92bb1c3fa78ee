"""What the console asks for and tells about a Feishu / Lark connector: its settings, and the
exact values and steps for the platform's own console."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from connectors.base import SettingField, SetupGuide

if TYPE_CHECKING:
    from connectors.models import Connector

SETTINGS: tuple[SettingField, ...] = (
    SettingField(
        "domain",
        gettext_lazy("Domain"),
        choices=(
            ("feishu", gettext_lazy("Feishu (China)")),
            ("lark", gettext_lazy("Lark (global)")),
        ),
    ),
    SettingField(
        "mode",
        gettext_lazy("How events arrive"),
        choices=(
            ("webhook", gettext_lazy("HTTP callbacks to this server")),
            ("long_connection", gettext_lazy("Long connection (no public URL needed)")),
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
            _("In %(console)s, open your app → Events & Callbacks → Event configuration.")
            % {"console": console},
            _(
                "Subscription mode: “Receive events through persistent connection”. No request "
                "URL is needed."
            ),
            _("Callback configuration: also choose the persistent connection."),
        ]
    else:
        guide.values = [
            (_("Event configuration → Request URL"), url),
            (_("Callback configuration → Request URL"), url),
        ]
        guide.steps = [
            _("In %(console)s, open your app → Events & Callbacks.") % {"console": console},
            _(
                "Event configuration: choose “Send events to developer server” and paste the "
                "request URL; Feishu checks it at once (Cadre answers the challenge)."
            ),
            _("Callback configuration: paste the same URL for card callbacks."),
            _(
                "Encryption strategy: copy the Encrypt Key and the Verification Token into this "
                "connector (Rotate credentials) — with an Encrypt Key every event is signed."
            ),
        ]
    guide.lists = [
        (_("Events to add"), [_("im.message.receive_v1 (Receive messages)")]),
        (_("Callbacks to add"), [_("card.action.trigger (Card action)")]),
        (
            _("Permissions"),
            [
                _("im:message (read and send messages in chats)"),
                _("im:message:send_as_bot (send messages as the app)"),
                _("contact:user.email:readonly (optional: match people by email)"),
            ],
        ),
        (_("Then"), [_("Enable the Bot capability and publish a new app version.")]),
    ]
    return guide
