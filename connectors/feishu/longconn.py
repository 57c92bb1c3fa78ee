"""Feishu/Lark long-connection mode: events over the SDK's outbound websocket, no public URL.

`lark_oapi.ws.Client` asks `<domain>/callback/ws/endpoint` for a connection URL with the app id
and secret, then holds a websocket to it and reconnects by itself. Each event arrives as a frame
carrying the same JSON an HTTP callback would (in plaintext: the connection is authenticated by
the app credentials over TLS, so there is no signature to check). `receive` puts it through the
HTTP path's own `FeishuPlatform.parse` and `connectors.inbound.store.inbound_store` —
de-duplication on the event id, single-use card tokens, the task enqueued on commit — and the
frame's answer carries what the HTTP acknowledgement would (a card click's toast). A failure
to store answers the frame with an error, so Feishu delivers the event again. Registered:
messages, card actions and the contact events (contact.user.created/updated/deleted_v3,
contact.department.*_v3), which feed the directory sync as they do over HTTP.

Needs the `feishu` extra (`lark-oapi`). One process per connector:
`python manage.py connectors_stream <public id>`; `cadre up` starts one for every active
Feishu connector whose `settings.mode` is `long_connection`.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.db import close_old_connections, connections

from cadre import outbound
from connectors.base import InboundRequest, PayloadInvalid, Verified, platform_for
from connectors.base.transport import PLATFORM_APIS
from connectors.inbound.store import inbound_store
from connectors.models import Connector

logger = logging.getLogger(__name__)

# Seconds the SDK's event loop waits for the database; Feishu wants an answer within 3 s.
STORE_TIMEOUT = 10.0
DOMAINS = {"feishu": "https://open.feishu.cn", "lark": "https://open.larksuite.com"}
_NO_REQUEST = InboundRequest(method="POST", headers={}, query={}, body=b"")


def receive(connector_id: int, data: dict) -> dict:
    """Store one long-connection event; the dict is the frame's answer ({} or a toast).

    Raises when the event could not be stored (the SDK then answers the frame with an error and
    Feishu delivers it again); an unreadable event is acknowledged and dropped, as over HTTP.
    """
    connector = Connector.objects.filter(
        pk=connector_id, platform="feishu", status=Connector.Status.ACTIVE
    ).first()
    if connector is None:
        logger.warning("connectors: Feishu connector %s is gone or disabled", connector_id)
        return {}
    platform = platform_for(connector)
    verified = Verified(data, _NO_REQUEST, {"long_connection": True})
    try:
        events = platform.parse(verified)
    except PayloadInvalid as error:
        logger.warning("connectors: unreadable Feishu long-connection event: %s", error)
        return {}
    if not events:
        return {}
    stored = inbound_store(connector, events, notify_refusals=False)
    decisions = {item.event.event_key: item.decision for item in stored if item.decision}
    reply = platform.acknowledge(verified, events, decisions)
    return json.loads(reply.body or b"{}")


class LongConnection:
    """The SDK client of one connector, with its event handlers.

    The SDK calls handlers inside its asyncio loop, where Django refuses synchronous database
    access; the work is handed to one long-lived thread (one database connection, reused) and
    the loop waits for it — events are answered in order, each within a few milliseconds.
    """

    def __init__(self, connector: Connector):
        self.connector_id = connector.pk
        self.credentials = connector.credentials
        self.settings = connector.settings or {}
        self.database = ThreadPoolExecutor(max_workers=1, thread_name_prefix="feishu-longconn")

    def _store(self, data: dict) -> dict:
        def work() -> dict:
            close_old_connections()  # drop a connection the server closed meanwhile
            return receive(self.connector_id, data)

        return self.database.submit(work).result(timeout=STORE_TIMEOUT)

    def on_event(self, event: Any) -> None:
        """im.message.receive_v1 and the contact.*_v3 events, as the SDK decoded them."""
        import lark_oapi as lark  # lazy: optional dependency (cadre[feishu])

        self._store(json.loads(lark.JSON.marshal(event)))

    def on_card_action(self, trigger: Any) -> Any:
        """card.action.trigger: store the click, answer with the toast the HTTP path shows."""
        import lark_oapi as lark  # lazy: optional dependency (cadre[feishu])

        # lazy: optional dependency (cadre[feishu])
        from lark_oapi.event.callback.model.p2_card_action_trigger import (
            P2CardActionTriggerResponse,
        )

        answer = self._store(json.loads(lark.JSON.marshal(trigger)))
        return P2CardActionTriggerResponse(answer)

    def handler(self):
        import lark_oapi as lark  # lazy: optional dependency (cadre[feishu])

        # Plaintext frames: no encrypt key or token (the SDK does not check them over the
        # websocket anyway).
        builder = lark.EventDispatcherHandler.builder("", "")
        builder.register_p2_customized_event("im.message.receive_v1", self.on_event)
        builder.register_p2_card_action_trigger(self.on_card_action)
        # Contact changes (the directory sync's incremental events): the same parse as over
        # HTTP turns them into directory changes. Feishu pushes only what the app subscribed
        # to; an event without a registered handler would be answered with an error.
        builder.register_p2_contact_user_created_v3(self.on_event)
        builder.register_p2_contact_user_updated_v3(self.on_event)
        builder.register_p2_contact_user_deleted_v3(self.on_event)
        builder.register_p2_contact_department_created_v3(self.on_event)
        builder.register_p2_contact_department_updated_v3(self.on_event)
        builder.register_p2_contact_department_deleted_v3(self.on_event)
        return builder.build()

    def domain(self) -> str:
        """Where the SDK asks for its connection URL: `api_base_url` (a proxy, or a test
        server) or the Feishu / Lark open platform."""
        base = self.settings.get("api_base_url", "").rstrip("/")
        return base or DOMAINS.get(self.settings.get("domain", "feishu"), DOMAINS["feishu"])

    def client(self, handler=None):
        """The SDK client, once `domain()` passed the outbound guard: the SDK calls it with its
        own HTTP client, so the guard checks where it points first (OutboundRefused, and the
        supervisor's backoff, for a refused address; the SDK resolves the name again, which
        only an allow-listed or public name reaches). `handler`: one `handler()` built
        beforehand (a standby's)."""
        import lark_oapi as lark  # lazy: optional dependency (cadre[feishu])

        destination = outbound.parse_url(self.domain())
        # A name not resolving now: the SDK reports it and reconnects by itself.
        with contextlib.suppress(OSError):
            outbound.resolve_checked(
                destination.host, destination.port, allow_setting=PLATFORM_APIS
            )
        return lark.ws.Client(
            self.credentials["app_id"],
            self.credentials["app_secret"],
            event_handler=handler or self.handler(),
            domain=self.domain(),
            log_level=lark.LogLevel.INFO,
        )

    def close(self) -> None:
        """Release the database thread and its connection."""
        self.database.submit(connections.close_all).result(timeout=STORE_TIMEOUT)
        self.database.shutdown(wait=True)


def prepare(connector: Connector) -> Callable[[], None]:
    """Everything before the connection (the SDK's import, seconds of CPU, and the event
    handlers; no network): the returned function connects and holds the connection until the
    process is stopped (the SDK reconnects by itself; a refused app id or secret raises, and
    the supervisor restarts the process with backoff). A standby (`connectors_stream
    --standby`) calls it long before connecting."""
    connection = LongConnection(connector)
    handler = connection.handler()

    def hold() -> None:
        try:
            connection.client(handler).start()
        finally:
            connection.close()

    return hold
