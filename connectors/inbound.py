"""The inbound hot path: store each platform event once (raw SQL) and ask for a drain."""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import dataclass
from datetime import timedelta

from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from connectors.base import DecisionOutcome, ParsedEvent
from connectors.models import Connector

_INSERT_EVENT = (
    "INSERT INTO connectors_inboundevent (organization_id, connector_id, event_key, kind, "
    "sender_id, chat_id, payload, status, received_at, attempts, error, run_ref) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s, 'queued', %s, 0, '', '') "
    "ON CONFLICT (connector_id, event_key) DO NOTHING RETURNING id"
)

HEALTH_WRITE_INTERVAL = 5  # seconds between last_event_at writes for one connector


@dataclass(frozen=True)
class Stored:
    event: ParsedEvent
    event_id: int | None  # None: a duplicate of an event already stored
    decision: DecisionOutcome | None = None  # card clicks: what the clicker is told


def inbound_store(
    connector: Connector, events: list[ParsedEvent], *, notify_refusals: bool = False
) -> list[Stored]:
    """Insert each event once (ON CONFLICT DO NOTHING) and ask for a drain on commit.

    Concurrent deliveries of one event race on the unique (connector, event_key) index:
    exactly one insert returns an id, and the worker's drain claims each stored event once
    (`connectors.drain.inbound_drain`). A card click is checked (token, clicker, single
    use) in the same transaction, so the worker only ever sees accepted clicks; a refused one
    is answered in the ack or, with `notify_refusals`, by a notice task.
    """
    from connectors.decisions import card_action_received
    from connectors.drain import drain_request
    from connectors.tasks import decision_refused_notice

    now = timezone.now()
    stored: list[Stored] = []
    to_process = False
    # One plain message needs one statement: in autocommit the INSERT commits by itself (one
    # round trip instead of BEGIN/INSERT/COMMIT) and on_commit runs right after it.
    single = len(events) == 1 and events[0].kind != "card_action"
    with (
        contextlib.nullcontext() if single else transaction.atomic(),
        connection.cursor() as cursor,
    ):
        for event in events:
            cursor.execute(
                _INSERT_EVENT,
                [
                    connector.organization_id,
                    connector.pk,
                    event.event_key[:191],
                    event.kind,
                    event.sender_id[:191],
                    event.chat_id[:191],
                    json.dumps(event.payload(), ensure_ascii=False),
                    now,
                ],
            )
            row = cursor.fetchone()
            event_id = row[0] if row else None
            decision = None
            if event.kind == "card_action":
                decision = card_action_received(connector, event, event_id)
            stored.append(Stored(event, event_id, decision))
            if event_id is None:
                continue
            if decision is None or decision.accepted:
                to_process = True
            elif notify_refusals:
                transaction.on_commit(
                    lambda event_id=event_id: decision_refused_notice.delay(event_id)
                )
        if to_process:  # one request for the whole request's events, after they are visible
            transaction.on_commit(drain_request)
    if any(item.event_id for item in stored):
        _touch_last_event(connector, now)
    return stored


_health_written: dict[int, float] = {}  # connector id -> monotonic time of this process' write


def _touch_last_event(connector: Connector, now) -> None:
    """Health: last_event_at, written at most every few seconds per process, conditionally
    (concurrent requests do not queue on the connector row)."""
    clock = time.monotonic()
    if clock - _health_written.get(connector.pk, -HEALTH_WRITE_INTERVAL) < HEALTH_WRITE_INTERVAL:
        return
    _health_written[connector.pk] = clock
    threshold = now - timedelta(seconds=HEALTH_WRITE_INTERVAL)
    Connector.objects.filter(
        Q(last_event_at__isnull=True) | Q(last_event_at__lt=threshold), pk=connector.pk
    ).update(last_event_at=now)
