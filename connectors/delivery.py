"""The connectors as the runtime's delivery channels: one per platform of `connectors.base`.

Each platform is registered under its name twice: as an IM platform (`cadre.im`, its display
name) and as the agents runtime's delivery channel (`cadre.agents.runtime.delivery`), whose
replies and agent messages are sent by the connectors' tasks.
"""

from __future__ import annotations

from cadre import im
from cadre.agents.runtime import delivery
from connectors.base import registry


def reply_send(reply: delivery.Reply) -> None:
    from connectors.tasks import deliver_run_reply

    deliver_run_reply.delay(reply.to_dict())


def message_send(message_id: int) -> None:
    from connectors.tasks import agent_message_deliver

    agent_message_deliver.delay(message_id)


def message_check(message_id: int) -> str:
    from connectors.agent_messages import undeliverable

    return undeliverable(message_id)


CHANNEL = delivery.Channel(reply=reply_send, message=message_send, check=message_check)


def register() -> None:
    """Register every platform (called by `ConnectorsConfig.ready()`)."""
    for name, platform in registry().items():
        im.platforms.register(name, platform.label)
        delivery.channels.register(name, CHANNEL)
