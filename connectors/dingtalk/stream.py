"""DingTalk Stream mode: robot messages, card callbacks and contact events over DingTalk's
outbound connection.

For installs without a public URL. The stream is authenticated by the app's client id and
secret over TLS, so there is no per-message signature; events go through the same parse and
the same `inbound_store` (de-duplication, single-use card tokens) as HTTP callbacks. Needs the
`dingtalk` extra (`dingtalk-stream`); run one process per connector with
`python manage.py connectors_stream <connector public id>`.

Contact-change events (user_add_org, user_modify_org, user_leave_org, org_dept_*) arrive as
EVENT frames: the SDK subscribes to events only as a whole (`register_all_event_handler`, topic
"*"; which events come is what the app subscribed to in the developer console). The frame's
headers name the event (eventType, eventId, eventBornTime, eventCorpId) and its data carries
the ids (`{"userId": [...]}` or `{"deptId": [...]}`); `event_body` turns it into the body an
HTTP event subscription delivers, so both take one parse. Other events are acknowledged and
dropped.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

from asgiref.sync import sync_to_async

from connectors.base import InboundRequest, PayloadInvalid, Verified, platform_for
from connectors.dingtalk.directory import CHANGE_KINDS
from connectors.inbound.store import inbound_store
from connectors.models import Connector

logger = logging.getLogger(__name__)

CARD_CALLBACK_TOPIC = "/v1.0/card/instances/callback"
_NO_REQUEST = InboundRequest(method="POST", headers={}, query={}, body=b"")


def receive(connector_id: int, data: dict) -> dict:
    """Store one stream message; the dict is what the stream acknowledgement carries."""
    connector = Connector.objects.filter(
        pk=connector_id, platform="dingtalk", status=Connector.Status.ACTIVE
    ).first()
    if connector is None:
        return {"ok": False, "error": "connector disabled"}
    try:
        # The platform's parse: the same checks as HTTP callbacks (file messages allowed?).
        [event] = platform_for(connector).parse(Verified(data, _NO_REQUEST))
    except PayloadInvalid as error:
        logger.warning("connectors: unreadable DingTalk stream message: %s", error)
        return {"ok": False, "error": str(error)}
    stored = inbound_store(connector, [event], notify_refusals=False)[0]
    if stored.decision is not None:
        return {
            "cardUpdateOptions": {"updateCardDataByKey": True},
            "userPrivateData": {"cardParamMap": {"notice": stored.decision.message}},
        }
    return {"ok": True, "duplicate": stored.event_id is None}


def event_body(event_type: str, headers: dict, data: dict) -> dict | None:
    """A stream EVENT frame as an HTTP event-subscription body (None: not a contact event)."""
    if event_type not in CHANGE_KINDS:
        return None
    ids_key = "UserId" if CHANGE_KINDS[event_type].startswith("user_") else "DeptId"
    ids = data.get("userId" if ids_key == "UserId" else "deptId")
    if ids is None:
        ids = data.get(ids_key) or []
    return {
        "EventType": event_type,
        "EventId": str(headers.get("event_id") or data.get("eventId") or ""),
        "TimeStamp": str(headers.get("event_born_time") or data.get("timeStamp") or ""),
        "CorpId": str(headers.get("event_corp_id") or ""),
        ids_key: ids if isinstance(ids, list) else [ids],
    }


def receive_event(connector_id: int, event_type: str, headers: dict, data: dict) -> dict:
    """Store one stream EVENT frame when it is a contact change; others are dropped."""
    body = event_body(event_type, headers, data)
    if body is None:
        return {"ok": True, "ignored": event_type}
    return receive(connector_id, body)


def handler_for(connector_id: int):
    """A dingtalk_stream CallbackHandler storing messages for this connector."""
    import dingtalk_stream  # lazy: optional dependency (cadre[dingtalk])

    class CadreHandler(dingtalk_stream.CallbackHandler):
        async def process(self, callback: dingtalk_stream.CallbackMessage):
            answer = await sync_to_async(receive)(connector_id, callback.data or {})
            return dingtalk_stream.AckMessage.STATUS_OK, answer

    return CadreHandler()


def event_handler_for(connector_id: int):
    """A dingtalk_stream EventHandler storing this connector's contact-change events. An
    unreadable event is acknowledged (it stays unreadable); one that could not be stored (the
    database is down) raises, is never acknowledged, and DingTalk delivers it again."""
    import dingtalk_stream  # lazy: optional dependency (cadre[dingtalk])

    class CadreEventHandler(dingtalk_stream.EventHandler):
        async def process(self, event: dingtalk_stream.EventMessage):
            headers = {
                "event_id": event.headers.event_id,
                "event_born_time": event.headers.event_born_time,
                "event_corp_id": event.headers.event_corp_id,
            }
            answer = await sync_to_async(receive_event)(
                connector_id, event.headers.event_type or "", headers, event.data or {}
            )
            return dingtalk_stream.AckMessage.STATUS_OK, json.dumps(answer)

    return CadreEventHandler()


def client_for(connector: Connector):
    """The SDK client of one connector: robot messages, card callbacks and every event the
    app subscribed to (contact changes among them)."""
    import dingtalk_stream  # lazy: optional dependency (cadre[dingtalk])

    credentials = connector.credentials
    client = dingtalk_stream.DingTalkStreamClient(
        dingtalk_stream.Credential(credentials["app_key"], credentials["app_secret"])
    )
    handler = handler_for(connector.pk)
    client.register_callback_handler(dingtalk_stream.ChatbotMessage.TOPIC, handler)
    client.register_callback_handler(CARD_CALLBACK_TOPIC, handler)
    client.register_all_event_handler(event_handler_for(connector.pk))
    return client


def prepare(connector: Connector) -> Callable[[], None]:
    """Everything before the connection (the SDK's import and its client; no network): the
    returned function connects and holds it. A standby (`connectors_stream --standby`) calls
    it long before connecting."""
    return client_for(connector).start_forever
