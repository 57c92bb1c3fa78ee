"""The connectors as the runtime's delivery channels: one per platform of `connectors.base`.

Each platform is registered under its name twice: as an IM platform (`cadre.im`, its display
name) and as the agents runtime's delivery channel (`cadre.agents.runtime.records.delivery`), whose
replies and agent messages are sent by the connectors' tasks.
"""

from __future__ import annotations

from cadre import im
from cadre.agents.models import AgentMessage
from cadre.agents.runtime.records import delivery
from cadre.queues import enqueue
from connectors.base import registry
from connectors.outbound.agent_messages import undeliverable


def reply_send(reply: delivery.Reply) -> None:
    enqueue("connectors.tasks.deliver_run_reply", reply.to_dict())


def message_send(message_id: int) -> None:
    enqueue("connectors.tasks.agent_message_deliver", message_id)


def message_check(message: AgentMessage) -> str:
    return undeliverable(message)


CHANNEL = delivery.Channel(reply=reply_send, message=message_send, check=message_check)


def register() -> None:
    """Register every platform (called by `ConnectorsConfig.ready()`)."""
    for name, platform in registry().items():
        im.platforms.register(name, platform.label)
        delivery.channels.register(name, CHANNEL)
