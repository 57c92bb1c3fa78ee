"""Arranging connector tests: connectors with fake-API settings, signed webhook posts."""

from __future__ import annotations

import json
import time

from cadre.agents.models import Run
from cadre.tenancy.actors import member_actor
from connectors.base import services
from connectors.models import Connector, Delivery, InboundEvent
from tests.refusals import nothing_changes


def make_connector(
    owner, platform: str, credentials: dict, settings: dict | None = None, name: str = ""
) -> Connector:
    return services.connector_create(
        actor=member_actor(owner),
        platform=platform,
        name=name or f"{platform} test",
        credentials=credentials,
        settings=settings or {},
    )


def nothing_received(**options):
    """A refused inbound request stores no event, starts no run and sends nothing back."""
    return nothing_changes(InboundEvent, Delivery, Run, **options)


def webhook_post(
    client,
    connector,
    event: dict,
    *,
    secret: str = "whsec-test",
    timestamp: int | None = None,
    signature: str | None = None,
):
    from connectors.webhook.inbound import sign

    body = json.dumps(event).encode()
    ts = str(int(time.time()) if timestamp is None else timestamp)
    headers = {
        "HTTP_X_CADRE_TIMESTAMP": ts,
        "HTTP_X_CADRE_SIGNATURE": signature or sign(secret, ts, body),
    }
    return client.post(
        connector.callback_path, data=body, content_type="application/json", **headers
    )
