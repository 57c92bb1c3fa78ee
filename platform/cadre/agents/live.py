"""Live run events: each chat session's Channels group, and the push of committed events to it.

Once the transaction that wrote `RunEvent` rows commits, the rows are sent to the group of
their run's session as one `run.events` message, in id order (`RunEvent.objects` does this for
every writer). The chat consumer joins the group, reads the rows once on connect to catch up
from its cursor, and afterwards forwards only what is pushed.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading

from channels.layers import get_channel_layer

logger = logging.getLogger(__name__)

MESSAGE_TYPE = "run.events"  # handled by ChatConsumer.run_events


def session_group(session_id: int) -> str:
    return f"chat.session.{session_id}"


def event_frame(event) -> dict:
    """What a socket is sent for a `RunEvent` (the chat consumer adds confirmations)."""
    return {"id": event.pk, "run": event.run_id, "kind": event.kind, "data": event.data}


def publish(frames_by_session: dict[int, list[dict]]) -> None:
    """Send each session's new events to its group; a live view missing an update must not
    fail the run that wrote them (the socket catches up from its cursor when it reconnects)."""
    layer = get_channel_layer()
    if layer is None or not frames_by_session:
        return

    async def send() -> None:
        for session_id, frames in frames_by_session.items():
            await layer.group_send(
                session_group(session_id), {"type": MESSAGE_TYPE, "events": frames}
            )

    try:
        _loop().run_until_complete(send())
    except Exception:
        logger.warning(
            "run events not pushed to sessions %s", list(frames_by_session), exc_info=True
        )


_local = threading.local()


def _loop() -> asyncio.AbstractEventLoop:
    """This thread's event loop for pushes, kept from one push to the next. The channel layer
    keeps its Redis connections per loop: `async_to_sync` would start a loop, a thread and a
    connection for every committed write — measured at ~3.6 ms of a worker's CPU per push,
    against ~0.6 ms here. Writers are sync code (the ORM refuses async contexts), so the loop
    is never running when a push starts. A forked worker starts its own."""
    loop = getattr(_local, "loop", None)
    if loop is None or loop.is_closed() or _local.pid != os.getpid():
        loop = _local.loop = asyncio.new_event_loop()
        _local.pid = os.getpid()
    return loop
