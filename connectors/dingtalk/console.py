"""What the console asks for and tells about a DingTalk connector: its settings, and the
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
        "mode",
        gettext_lazy("How events arrive"),
        gettext_lazy(
            "Stream mode is recommended: messages arrive over a connection Cadre opens with the "
            "app credentials, and no public URL is exposed. An HTTP callback's sign covers only "
            "its timestamp, not the message, so Cadre accepts each sign once and replies only "
            "through DingTalk's own hosts."
        ),
        choices=(
            ("stream", gettext_lazy("Stream mode (recommended; no public URL needed)")),
            ("webhook", gettext_lazy("HTTP callbacks to this server")),
        ),
    ),
    SettingField(
        "robot_code", gettext_lazy("Robot code"), gettext_lazy("Defaults to the Client ID.")
    ),
    SettingField(
        "card_template_id",
        gettext_lazy("Card template id"),
        gettext_lazy(
            "An interactive card template from the card platform, for confirmation cards."
        ),
    ),
)


def guide(connector: Connector, url: str, mode: str) -> SetupGuide:
    """The setup guide for this connector (`url`: its callback URL; `mode`: how events arrive)."""
    if mode == "stream":
        return SetupGuide(
            values=[(_("Message receiving mode"), _("Stream mode"))],
            steps=[
                _("DingTalk developer console → your app → Add capability → Robot → configure."),
                _("Message receiving mode: Stream mode. No public URL is needed."),
                _(
                    'Install the SDK on this server: pip install "cadre[dingtalk]", then run '
                    "python manage.py connectors_stream %(public_id)s"
                )
                % {"public_id": connector.public_id},
            ],
        )
    return SetupGuide(
        values=[(_("Message receiving address"), url)],
        steps=[
            _("DingTalk developer console → your app → Add capability → Robot → configure."),
            _("Message receiving mode: HTTP mode; paste the message receiving address."),
            _(
                "Publish the robot. Cadre checks each callback's timestamp and sign with the "
                "Client Secret."
            ),
        ],
        lists=[
            (
                _("Permissions"),
                [
                    _("Robot: send 1:1 and group messages (qyapi_robot_sendmsg)"),
                    _("Card.Instance.Write (interactive confirmation cards)"),
                ],
            )
        ],
    )
