"""What the console asks for and tells about a DingTalk connector: its settings, and the
exact values and steps for the platform's own console."""

from __future__ import annotations

from typing import TYPE_CHECKING

from connectors.base import SettingField, SetupGuide

if TYPE_CHECKING:
    from connectors.models import Connector

SETTINGS: tuple[SettingField, ...] = (
    SettingField(
        "mode",
        "How events arrive",
        "Stream mode is recommended: messages arrive over a connection Cadre opens with the "
        "app credentials, and no public URL is exposed. An HTTP callback's sign covers only "
        "its timestamp, not the message, so Cadre accepts each sign once and replies only "
        "through DingTalk's own hosts.",
        choices=(
            ("stream", "Stream mode (recommended; no public URL needed)"),
            ("webhook", "HTTP callbacks to this server"),
        ),
    ),
    SettingField("robot_code", "Robot code", "Defaults to the Client ID."),
    SettingField(
        "card_template_id",
        "Card template id",
        "An interactive card template from the card platform, for confirmation cards.",
    ),
)


def guide(connector: Connector, url: str, mode: str) -> SetupGuide:
    """The setup guide for this connector (`url`: its callback URL; `mode`: how events arrive)."""
    if mode == "stream":
        return SetupGuide(
            values=[("Message receiving mode", "Stream mode")],
            steps=[
                "DingTalk developer console → your app → Add capability → Robot → configure.",
                "Message receiving mode: Stream mode. No public URL is needed.",
                f'Install the SDK on this server: pip install "cadre[dingtalk]", then run '
                f"python manage.py connectors_stream {connector.public_id}",
            ],
        )
    return SetupGuide(
        values=[("Message receiving address", url)],
        steps=[
            "DingTalk developer console → your app → Add capability → Robot → configure.",
            "Message receiving mode: HTTP mode; paste the message receiving address.",
            "Publish the robot. Cadre checks each callback's timestamp and sign with the "
            "Client Secret.",
        ],
        lists=[
            (
                "Permissions",
                [
                    "Robot: send 1:1 and group messages (qyapi_robot_sendmsg)",
                    "Card.Instance.Write (interactive confirmation cards)",
                ],
            )
        ],
    )
