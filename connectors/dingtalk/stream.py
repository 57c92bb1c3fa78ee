"""DingTalk Stream mode: robot messages and card callbacks over DingTalk's outbound connection.

For installs without a public URL. The stream is authenticated by the app's client id and
secret over TLS, so there is no per-message signature; events go through the same parse and
the same `inbound_store` (de-duplication, single-use card tokens) as HTTP callbacks. Needs the
`dingtalk` extra (`dingtalk-stream`); run one process per connector with
`python manage.py connectors_stream <connector public id>`.
"""

from __future__ import annotations

import logging

from asgiref.sync import sync_to_async

from connectors.base import InboundRequest, PayloadInvalid, Verified, platform_for
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


def handler_for(connector_id: int):
    """A dingtalk_stream CallbackHandler storing messages for this connector."""
    import dingtalk_stream  # lazy: optional dependency (cadre[dingtalk])

    class CadreHandler(dingtalk_stream.CallbackHandler):
        async def process(self, callback: dingtalk_stream.CallbackMessage):
            answer = await sync_to_async(receive)(connector_id, callback.data or {})
            return dingtalk_stream.AckMessage.STATUS_OK, answer

    return CadreHandler()


def run(connector: Connector) -> None:  # pragma: no cover - needs DingTalk's servers
    import dingtalk_stream  # lazy: optional dependency (cadre[dingtalk])

    credentials = connector.credentials
    client = dingtalk_stream.DingTalkStreamClient(
        dingtalk_stream.Credential(credentials["app_key"], credentials["app_secret"])
    )
    handler = handler_for(connector.pk)
    client.register_callback_handler(dingtalk_stream.ChatbotMessage.TOPIC, handler)
    client.register_callback_handler(CARD_CALLBACK_TOPIC, handler)
    client.start_forever()
