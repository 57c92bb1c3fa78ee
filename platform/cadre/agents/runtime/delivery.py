"""Delivery channels: who sends a finished run's reply, and an agent's messages, out of the runtime.

The runtime does not know the IM platforms. Each channel (one per IM platform, registered by the
connectors in their `ready()` under the session channel's name) receives a `Reply` — what
delivery needs of a finished run, never the `Run` itself — and the id of each message an agent
sends with `im_send`. Both are handed over once the runtime's transaction commits. A channel with
nothing registered delivers nothing: the run finishes all the same.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

from django.db import transaction

from cadre.ports import Registry


@dataclass(frozen=True)
class Reply:
    """A finished run's reply, as its channel delivers it."""

    run_id: int
    session_id: int
    channel: str  # the session's channel: the IM platform
    conversation: str  # the session's external id: "<connector id>:<chat id>"
    status: str  # the run's terminal status
    text: str  # what the person is shown (originals, not the model's placeholders)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Reply:
        return cls(**data)


@dataclass(frozen=True)
class Channel:
    """One platform's delivery: `reply` sends a run's reply; `message` sends an agent message
    (an `AgentMessage` id) to its recipients."""

    reply: Callable[[Reply], object]
    message: Callable[[int], object]


channels: Registry[Channel] = Registry("delivery channels")


def reply_deliver(reply: Reply) -> bool:
    """Hand the reply to its channel after commit; False when no channel serves it."""
    channel = channels.get(reply.channel)
    if channel is None:
        return False
    transaction.on_commit(lambda: channel.reply(reply))
    return True


def message_deliver(message_id: int, channel_name: str) -> bool:
    """Hand an agent message to a channel after commit: its session's channel, else any (its
    recipients may be reached on every platform: a message sent from the console goes out
    too). False when no channel is registered."""
    channel = channels.get(channel_name) or next((entry for _, entry in channels.items()), None)
    if channel is None:
        return False
    transaction.on_commit(lambda: channel.message(message_id))
    return True
