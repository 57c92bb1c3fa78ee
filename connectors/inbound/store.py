"""The inbound hot path: store each platform event once (raw SQL) and ask for a drain.

What is stored is made storable first, whatever an authentic sender put in it: NUL characters
(which PostgreSQL text and jsonb cannot hold) are removed, lone surrogates (which UTF-8 cannot
encode) become U+FFFD, NaN and infinities (which JSON and jsonb have no number for) become null,
nesting deeper than MAX_DEPTH is cut, and an id longer than its column is replaced by a prefix
and its SHA-256, so two long ids sharing a prefix stay two rows.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import re
import time
from dataclasses import dataclass
from datetime import timedelta

from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from cadre.queues import enqueue
from connectors.base import DecisionOutcome, ParsedEvent
from connectors.cards.decisions import card_action_received
from connectors.inbound.drain import drain_request
from connectors.models import Connector

_INSERT_EVENT = (
    "INSERT INTO connectors_inboundevent (organization_id, connector_id, event_key, kind, "
    "sender_id, chat_id, payload, status, received_at, attempts, error, run_ref) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s, 'queued', %s, 0, '', '') "
    "ON CONFLICT (connector_id, event_key) DO NOTHING RETURNING id"
)

HEALTH_WRITE_INTERVAL = 5  # seconds between last_event_at writes for one connector
ID_COLUMN = 191  # event_key, sender_id, chat_id
MAX_DEPTH = 32  # nesting kept in the stored payload (card values, contexts)

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable_text(value: str) -> str:
    """The string without NUL characters, lone surrogates replaced by U+FFFD."""
    if not _UNSTORABLE.search(value):
        return value
    return re.sub("[\ud800-\udfff]", "\ufffd", value.replace("\x00", ""))


def storable_id(value: str) -> str:
    """An id that fits its column: a longer one is a prefix + ':' + its SHA-256 (not a cut,
    which would merge two ids sharing their first 191 characters)."""
    value = storable_text(value)
    if len(value) <= ID_COLUMN:
        return value
    digest = hashlib.sha256(value.encode()).hexdigest()
    return f"{value[: ID_COLUMN - len(digest) - 1]}:{digest}"


def _storable(value, depth: int = 0):
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, dict):
        if depth >= MAX_DEPTH:
            return {}
        return {storable_text(str(k)): _storable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        if depth >= MAX_DEPTH:
            return []
        return [_storable(item, depth + 1) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        # JSON has no NaN or infinity (Python's json reads them, jsonb refuses them): null, as
        # JavaScript's JSON.stringify writes them — a string would pass for a real value.
        return None
    return value


def storable_event(event: ParsedEvent) -> ParsedEvent:
    """The event with every string storable and its ids within their column."""
    changes = {}
    for item in dataclasses.fields(event):
        value = getattr(event, item.name)
        if item.name in ("event_key", "sender_id", "chat_id"):
            cleaned = storable_id(value)
        else:
            cleaned = _storable(value)
        if cleaned != value:
            changes[item.name] = cleaned
    return dataclasses.replace(event, **changes) if changes else event


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
    (`connectors.inbound.drain.inbound_drain`). A card click is checked (token, clicker, single
    use) in the same transaction, so the worker only ever sees accepted clicks; a refused one
    is answered in the ack or, with `notify_refusals`, by a notice task.
    """
    events = [storable_event(event) for event in events]
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
                    event.event_key,
                    event.kind,
                    event.sender_id,
                    event.chat_id,
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
                    lambda event_id=event_id: enqueue(
                        "connectors.tasks.decision_refused_notice", event_id
                    )
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
