"""What the console asks for and tells about a WeCom connector: its settings, and the
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
        "agent_id",
        "AgentId",
        gettext_lazy("App Management → your app → AgentId; needed to send replies."),
        required=True,
        kind="integer",
    ),
)


def guide(connector: Connector, url: str, mode: str) -> SetupGuide:
    """The setup guide for this connector (`url`: its callback URL; `mode`: how events arrive)."""
    return SetupGuide(
        values=[
            ("URL", url),
            ("Token", _("the Token stored in this connector")),
            ("EncodingAESKey", _("the EncodingAESKey stored in this connector")),
        ],
        steps=[
            _(
                "WeCom admin console → App Management → your app → Receive messages → "
                "Set API receive."
            ),
            _(
                "Paste the URL. Generate the Token and the EncodingAESKey there (or type your "
                "own) and store the same values in this connector — WeCom checks the URL by "
                "sending an encrypted echo that only those values can answer."
            ),
            _("Set this connector's AgentId and Secret from the app's page."),
            _(
                "Add this server's public IP to the app's trusted IP list (WeCom refuses API "
                "calls from other addresses)."
            ),
        ],
    )
