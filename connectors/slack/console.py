"""What the console asks for and tells about a Slack connector: its settings, and the
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
        "team_id", gettext_lazy("Team id"), gettext_lazy("Your workspace id (T…), optional.")
    ),
)


def guide(connector: Connector, url: str, mode: str) -> SetupGuide:
    """The setup guide for this connector (`url`: its callback URL; `mode`: how events arrive)."""
    return SetupGuide(
        values=[
            (_("Event Subscriptions → Request URL"), url),
            (_("Interactivity & Shortcuts → Request URL"), url),
        ],
        steps=[
            _(
                "api.slack.com/apps → your app → Event Subscriptions: enable and paste the "
                "request URL (Slack verifies it at once)."
            ),
            _("Interactivity & Shortcuts: enable and paste the same URL (confirmation buttons)."),
            _(
                "OAuth & Permissions: add the bot scopes below, install the app to the "
                "workspace, and store the Bot User OAuth Token here."
            ),
            _("App Home: allow users to send messages to the app (Messages tab)."),
        ],
        lists=[
            (_("Bot events to subscribe"), ["message.im", "app_mention"]),
            (
                _("Bot token scopes"),
                ["chat:write", "im:history", "app_mentions:read", "users:read", "users:read.email"],
            ),
        ],
    )
