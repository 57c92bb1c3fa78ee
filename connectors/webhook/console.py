"""What the console asks for and tells about a webhook connector: its settings, and the
exact values and steps for the platform's own console."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from connectors.base import SettingField, SetupGuide
from connectors.webhook.inbound import EVENT_ID_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER

if TYPE_CHECKING:
    from connectors.models import Connector

SETTINGS: tuple[SettingField, ...] = (
    SettingField(
        "callback_url",
        gettext_lazy("Callback URL"),
        gettext_lazy("Where Cadre POSTs replies and cards (signed)."),
        kind="url",
    ),
)


def guide(connector: Connector, url: str, mode: str) -> SetupGuide:
    """The setup guide for this connector (`url`: its callback URL; `mode`: how events arrive)."""
    return SetupGuide(
        values=[
            (_("Endpoint (POST, JSON)"), url),
            (_("Timestamp header"), f"{TIMESTAMP_HEADER}: <unix seconds>"),
            (_("Signature header"), f"{SIGNATURE_HEADER}: v1=<hex digest>"),
            (_("Event id header (optional)"), f"{EVENT_ID_HEADER}: <unique id>"),
            (_("Signature"), 'v1=hex(HMAC-SHA256(signing secret, "<timestamp>." + raw body))'),
        ],
        steps=[
            _(
                "POST each event as JSON to the endpoint, signed with the signing secret. "
                "Requests older than 5 minutes or with a wrong signature are refused with 401."
            ),
            _("Give every event a unique event_id: redeliveries with the same id are ignored."),
            _(
                "Replies and cards are POSTed to this connector's callback URL, signed the same "
                "way with the callback signing secret."
            ),
        ],
        lists=[
            (
                _("Event body"),
                [
                    '{"event_id": "…", "type": "message", "text": "…", '
                    '"user": {"id": "…", "email": "…"}, "chat": {"id": "…", "type": "p2p"}}',
                    '"type": "card_action" with "action": the button value Cadre sent',
                ],
            )
        ],
    )
