"""The one way to record a state change: `audit.record(...)`, in the change's transaction.

Events form a SHA-256 hash chain per organization, built in two steps so that writers never
wait for each other:

1. `record` inserts the event *unsealed* (no sequence, no hashes) in the caller's transaction.
   It takes no lock, so concurrent transactions commit side by side.
2. `seal` — run by the `audit_seal` task shortly after the commit, by a beat safety net, and
   before anything reads the chain (export, stream, verify --seal) — locks the organization's
   chain head row, takes the committed unsealed events in id order, gives them the next
   sequence numbers and their prev_hash/hash, and writes them in one statement per batch.

An event that commits late (a lower id than events already sealed) is simply sealed in a later
batch: the chain order is the sealing order (sequence), never the id, so a sealed chain is never
rewritten. The database lets exactly that one update through (see migration 0005).

The chain is unkeyed; what anchors it against whoever can write the table are the signed
digests of its heads (`digest_write`, audit_digest), checked by `verify_chain`.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import logging
import re
import time
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import cache, partial
from operator import itemgetter
from typing import Any

from celery import current_app as celery_app
from django.core.cache import cache as django_cache
from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection, transaction
from django.utils import timezone

from cadre.governance import audit_digest
from cadre.governance.audit_models import AuditChainHead, AuditEvent
from cadre.observability import current_request, current_trace_id
from cadre.queues import enqueue, enqueue_with

logger = logging.getLogger(__name__)

GENESIS_HASH = "0" * 64
REDACTED = "[redacted]"
_SECRET_NAME = re.compile(
    r"pass(word)?|secret|token|key_hash|api_?key|credential|private|encrypt|signing", re.I
)

_HASHED_FIELDS = AuditEvent.CHAINED_FIELDS
# What the sealer reads of an unsealed event to hash it (sequence and prev_hash it assigns).
_SEAL_COLUMNS = (
    "id",
    "created_at",
    *(name for name in _HASHED_FIELDS if name not in ("sequence", "prev_hash")),
)

SEAL_BATCH = 2000  # events per sealing statement (and per chain-lock hold)
# After a commit, a seal task is due at the end of the current window (plus a margin): one task
# per organization and window, whatever the number of writers. This is also the usual delay
# before an event is sealed.
SEAL_WINDOW = 0.5
SEAL_MARGIN = 0.1
# The sealing task (audit_tasks imports this module; this one names the task).
SEAL_TASK = "cadre.governance.audit_tasks.audit_seal"


def _plain(value: Any) -> Any:
    """JSON-safe copy (dates, UUIDs, decimals become strings) with secret-named keys redacted.

    Values made of JSON's own types only (the usual changes) skip the JSON round trip."""
    try:
        return _plain_copy(value)
    except _NotPlain:
        pass
    value = json.loads(json.dumps(value, cls=DjangoJSONEncoder, ensure_ascii=False))
    return _redact(value)


class _NotPlain(Exception):
    """A value other than JSON's own types: `_plain` takes the JSON round trip."""


def _plain_copy(value: Any) -> Any:
    """`_redact` of a value made of JSON's own types only (exactly dict with str keys, list,
    str, int, float, bool, None): what the JSON round trip would give, without it. Raises
    _NotPlain on anything else (tuples, subclasses such as enums, dates...)."""
    kind = type(value)
    if kind is str:
        return value.replace("\x00", "")
    if kind is dict:
        copy = {}
        for key, item in value.items():
            if type(key) is not str:
                raise _NotPlain
            copy[key.replace("\x00", "")] = (
                REDACTED if _SECRET_NAME.search(key) else _plain_copy(item)
            )
        return copy
    if kind is list:
        return [_plain_copy(item) for item in value]
    if value is None or kind is int or kind is bool or kind is float:
        return value
    raise _NotPlain


def _text(value: str) -> str:
    # PostgreSQL text and jsonb cannot hold NUL characters.
    return value.replace("\x00", "")


def _redact(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            _text(key): (REDACTED if _SECRET_NAME.search(str(key)) else _redact(item))
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_redact(item) for item in value]
    if isinstance(value, str):
        return _text(value)
    return value


def _stored_ip(value: str | None) -> str | None:
    """A valid address (PostgreSQL's inet keeps its own spelling, which the sealer hashes) or
    None."""
    if not value:
        return None
    try:
        return str(ipaddress.ip_address(value.strip().split("%", 1)[0]))
    except ValueError:
        return None


def diff_summary(before: dict | None, after: dict | None) -> dict:
    """Only what changed: {"before": {...}, "after": {...}} over the changed keys."""
    before = _plain(before) if before is not None else None
    after = _plain(after) if after is not None else None
    if before is None and after is None:
        return {}
    if before is None:
        return {"after": after}
    if after is None:
        return {"before": before}
    keys = sorted(set(before) | set(after))
    changed = [key for key in keys if before.get(key) != after.get(key)]
    return {
        "before": {key: before.get(key) for key in changed},
        "after": {key: after.get(key) for key in changed},
    }


def event_hash(organization_id: int, created_at, fields: dict) -> str:
    """SHA-256 of the event's canonical JSON: the chained fields, organization and time."""
    payload = {name: fields[name] for name in _HASHED_FIELDS}
    payload["organization"] = organization_id
    payload["created_at"] = created_at.astimezone(UTC).isoformat()
    canonical = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _target_parts(target) -> tuple[str, str, str]:
    if target is None:
        return "", "", ""
    if isinstance(target, tuple):
        target_type, target_id, *label = target
        return str(target_type), str(target_id), _text(str(label[0] if label else ""))[:200]
    return target._meta.model_name, str(target.pk), _text(str(target))[:200]


def _lock_head(organization_id: int) -> AuditChainHead:
    """Lock the organization's chain head (created on its first seal) until the transaction
    ends: only the sealer takes it, so sealers queue and writers never do."""
    head = AuditChainHead.objects.select_for_update().filter(organization_id=organization_id)
    found = head.first()
    if found is not None:
        return found
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO governance_auditchainhead (organization_id, sequence, hash) "
            "VALUES (%s, 0, %s) ON CONFLICT (organization_id) DO NOTHING",
            [organization_id, GENESIS_HASH],
        )
    return head.get()


def _event_values(
    *,
    actor,
    action: str,
    target=None,
    before: dict | None = None,
    after: dict | None = None,
    reason: str = "",
    organization=None,
    changes: dict | None = None,
) -> tuple[Any, dict[str, Any]]:
    """The organization and the column values (by attname) of a new, unsealed event."""
    organization = organization or getattr(actor, "organization", None)
    if organization is None:
        organization = getattr(target, "organization", None)
    if organization is None:
        raise ValueError("audit.record needs an organization (from the actor or the target)")
    target_type, target_id, target_label = _target_parts(target)
    context = current_request()
    values = {
        **_UNSEALED,
        "organization_id": organization.pk,
        "created_at": timezone.now(),
        # str() as the fields' own preparation does (a no-op on the usual str)
        "actor_type": str(getattr(actor, "kind", "system")),
        "actor_id": str(getattr(actor, "actor_id", "")),
        "actor_label": _text(str(getattr(actor, "label", "")))[:200],
        "action": str(action),
        "target_type": target_type,
        "target_id": target_id,
        "target_label": target_label,
        "changes": _plain(changes) if changes is not None else diff_summary(before, after),
        "reason": _text(reason or ""),
        "request_id": _text(context.request_id)[:64] if context else "",
        "trace_id": current_trace_id(),
        "ip": _stored_ip(context.ip) if context else None,
        "user_agent": _text(context.user_agent or "")[:400] if context else "",
    }
    return organization, values


def _instance(organization, values: dict[str, Any], db: str | None = None) -> AuditEvent:
    """The AuditEvent of these values, with its organization cached as `AuditEvent(
    organization=...)` does: unsaved, or the row just inserted in database `db`."""
    if db is None:
        event = AuditEvent(*_ROW(values))
    else:  # positional, as the ORM builds the instances it loads
        event = AuditEvent.from_db(db, _ATTNAMES, _ROW(values))
    _ORGANIZATION_FIELD.set_cached_value(event, organization)
    return event


def new_event(**arguments) -> AuditEvent:
    """The unsaved, unsealed event `record` inserts (keyword arguments as for `record`)."""
    return _instance(*_event_values(**arguments))


def record(
    *,
    actor,
    action: str,
    target=None,
    before: dict | None = None,
    after: dict | None = None,
    reason: str = "",
    organization=None,
    changes: dict | None = None,
) -> AuditEvent:
    """Insert one audit event in the current transaction and return it (unsealed).

    `target` is a model instance or a (type, id[, label]) tuple; `before`/`after` are dicts of
    the fields that matter — only the changed keys are kept, secret-named keys are redacted.
    The event rolls back with the change; once committed it is sealed into the organization's
    hash chain within about a second (`seal`), and `sequence`, `prev_hash` and `hash` are set
    then.
    """
    organization, values = _event_values(
        actor=actor,
        action=action,
        target=target,
        before=before,
        after=after,
        reason=reason,
        organization=organization,
        changes=changes,
    )
    params = list(_PARAMS(values))
    params[_CHANGES_PARAM] = json.dumps(params[_CHANGES_PARAM], ensure_ascii=False)
    db = transaction.get_connection()
    with db.cursor() as cursor:
        cursor.execute(_insert_statement(), params)
        values["id"] = cursor.fetchone()[0]
    event = _instance(organization, values, db.alias)
    # Robust: the change is committed by then; a broker hiccup must not fail the caller, and
    # the beat safety net seals whatever no task picked up.
    db.on_commit(partial(_seal_soon, values["organization_id"]), robust=True)
    return event


# The INSERT is written once from the model instead of compiled by the ORM on every call, and
# its values are the plain Python values above (only `changes` is dumped, to JSON): building a
# model instance, preparing each value through its field and the JSON round trip of plain
# changes cost the writer about a quarter of its CPU time per event (issue #5 benchmark), and
# every service pays it on every change. The chain fields are not inserted: NULL until sealed.
_ATTNAMES = tuple(field.attname for field in AuditEvent._meta.concrete_fields)
_UNSEALED = {"id": None, "sequence": None, "prev_hash": None, "hash": None}
_INSERTED = tuple(attname for attname in _ATTNAMES if attname not in _UNSEALED)
_ROW, _PARAMS = itemgetter(*_ATTNAMES), itemgetter(*_INSERTED)
_CHANGES_PARAM = _INSERTED.index("changes")
_ORGANIZATION_FIELD = AuditEvent._meta.get_field("organization")
# Values are passed as they are, so a column of another type needs its cast here.
_CASTS = {"changes": "::jsonb", "ip": "::inet"}


@cache
def _insert_statement() -> str:
    quote = connection.ops.quote_name
    fields = {field.attname: field for field in AuditEvent._meta.concrete_fields}
    columns = ", ".join(quote(fields[attname].column) for attname in _INSERTED)
    placeholders = ", ".join(f"%s{_CASTS.get(attname, '')}" for attname in _INSERTED)
    return (  # names from the model only, values as parameters
        f"INSERT INTO {quote(AuditEvent._meta.db_table)} ({columns}) "  # noqa: S608
        f"VALUES ({placeholders}) RETURNING {quote(AuditEvent._meta.pk.column)}"
    )


# Per process: the last window a seal task is known to be due for, per organization.
_due_window: dict[int, int] = {}


def _seal_soon(organization_id: int) -> None:
    """After a commit: make sure a seal task for the organization starts after now.

    A task due at the end of the current window starts after every commit that reaches here
    within the window, so one task per window and organization is enough: the first process to
    claim the window (a Redis key) enqueues it, everyone else does nothing.
    """
    window = int(time.time() // SEAL_WINDOW)
    # Checked first, as almost every commit finds its window claimed: reading Celery's
    # settings costs the writer more than all of record's own work. Only the branch that
    # enqueues claims a window, so an app that is eager (tests) seals on every commit.
    if _due_window.get(organization_id) == window:
        return
    if celery_app.conf.task_always_eager:
        enqueue(SEAL_TASK, organization_id)  # runs here and now
        return
    _due_window[organization_id] = window
    if not django_cache.add(f"audit:seal:{organization_id}:{window}", 1, timeout=60):
        return
    due = datetime.fromtimestamp((window + 1) * SEAL_WINDOW + SEAL_MARGIN, UTC)
    enqueue_with(SEAL_TASK, args=[organization_id], eta=due)


def seal(*, organization=None, batch_size: int = SEAL_BATCH) -> int:
    """Seal the committed, unsealed events of `organization` (an instance or an id; every
    organization with unsealed events when None) into the hash chain. Returns how many.

    Idempotent and safe to run concurrently (sealers queue on the chain head). Call it outside
    a transaction: each batch commits on its own so the chain lock is held for one batch only;
    inside one, it seals what that transaction sees and holds the lock until it ends.
    """
    if organization is None:
        organization_ids = list(
            AuditEvent.objects.unsealed()
            .order_by()
            .values_list("organization_id", flat=True)
            .distinct()
        )
    else:
        organization_ids = [getattr(organization, "pk", organization)]
    sealed = 0
    for organization_id in organization_ids:
        while True:
            with transaction.atomic():
                count = _seal_batch(organization_id, batch_size)
            sealed += count
            if count < batch_size:
                break
    return sealed


def _seal_batch(organization_id: int, batch_size: int) -> int:
    head = _lock_head(organization_id)
    # Read after the lock: this statement's snapshot sees every seal committed before ours and
    # only committed events, so a transaction still open is left for a later batch.
    rows = list(
        AuditEvent.objects.unsealed()
        .filter(organization_id=organization_id)
        .order_by("id")
        .values_list(*_SEAL_COLUMNS)[:batch_size]
    )
    if not rows:
        return 0
    ids, sequences, prev_hashes, hashes = [], [], [], []
    sequence, previous = head.sequence, head.hash
    for values in rows:
        fields = dict(zip(_SEAL_COLUMNS, values, strict=True))
        sequence += 1
        fields["sequence"], fields["prev_hash"] = sequence, previous
        digest = event_hash(organization_id, fields["created_at"], fields)
        ids.append(fields["id"])
        sequences.append(sequence)
        prev_hashes.append(previous)
        hashes.append(digest)
        previous = digest
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE governance_auditevent AS event "
            "SET sequence = sealed.sequence, prev_hash = sealed.prev_hash, hash = sealed.hash "
            "FROM unnest(%s::bigint[], %s::bigint[], %s::text[], %s::text[]) "
            "AS sealed(id, sequence, prev_hash, hash) "
            "WHERE event.id = sealed.id AND event.sequence IS NULL",
            [ids, sequences, prev_hashes, hashes],
        )
        if cursor.rowcount != len(ids):  # cannot happen under the lock; never half-seal
            raise RuntimeError(
                f"sealed {cursor.rowcount} of {len(ids)} audit events of organization "
                f"{organization_id}: another sealer ran without the chain lock"
            )
    AuditChainHead.objects.filter(organization_id=organization_id).update(
        sequence=sequence, hash=previous
    )
    return len(ids)


def verify_chain(organization) -> dict:
    """Recompute the organization's sealed chain from one consistent snapshot, and check it
    against the signed digests of its heads (audit_digest): a chain recomputed after a digest
    was signed differs from it.

    Returns {"ok", "checked", "unsealed", "broken": {...} | None, "digests": {...}};
    `unsealed` counts the events still waiting for their seal (not part of the chain yet, so
    not checked), `digests` what the digest log anchored (audit_digest.Anchors.summary).
    """
    anchors = audit_digest.anchors(organization.pk)
    with _snapshot():
        return _verify_chain(organization, anchors)


@contextmanager
def _snapshot():
    """One snapshot for the events and the head: a seal committing meanwhile is either wholly
    seen or not at all, so it never looks like missing events. (Inside a transaction already,
    that transaction's view.)"""
    if connection.in_atomic_block:
        yield
        return
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        yield


def _walk(organization_id: int, events, sequence: int, previous: str, anchors: dict[int, dict]):
    """Check `events` (sealed, in sequence order) as the chain from position `sequence` on,
    linked to `previous`. Returns (checked, last hash, broken or None)."""
    checked, matched = 0, sequence - 1
    for event in events:
        fields = {name: getattr(event, name) for name in _HASHED_FIELDS}
        anchor = anchors.get(event.sequence)
        problem = None
        if event.sequence != sequence:
            problem = f"event missing at position {sequence}"
        elif event.prev_hash != previous:
            problem = "prev_hash does not match the previous event's hash"
        elif event_hash(organization_id, event.created_at, fields) != event.hash:
            problem = "content does not match its hash (edited)"
        elif anchor is not None and anchor["hash"] != event.hash:
            problem = (
                f"differs from the digest signed at {anchor['signed_at']}: the chain was "
                f"rewritten and its hashes recomputed (an event at positions {matched + 1}-"
                f"{sequence} was changed, removed or inserted)"
            )
        if problem:
            broken = {"event_id": event.pk, "position": sequence, "problem": problem}
            return checked, previous, broken
        if anchor is not None:
            matched = sequence
        previous, sequence = event.hash, sequence + 1
        checked += 1
    return checked, previous, None


def _verify_chain(organization, anchors: audit_digest.Anchors) -> dict:
    unsealed = AuditEvent.objects.unsealed().filter(organization=organization).count()
    events = (
        AuditEvent.objects.sealed()
        .filter(organization=organization)
        .order_by("sequence")
        .iterator(2000)
    )
    result = {"ok": False, "unsealed": unsealed, "digests": anchors.summary()}
    checked, previous, broken = _walk(organization.pk, events, 1, GENESIS_HASH, anchors.trusted)
    result["checked"] = checked
    if broken:
        return {**result, "broken": broken}
    head = AuditChainHead.objects.filter(organization=organization).first()
    if head is not None and (head.sequence != checked or head.hash != previous):
        problem = (
            f"chain head is at position {head.sequence}: events after position {checked} "
            "are missing"
        )
        return {**result, "broken": {"event_id": None, "position": checked + 1, "problem": problem}}
    last = anchors.last
    if last is not None and last["sequence"] > checked:
        problem = (
            f"the chain ends at position {checked}, but the digest signed at "
            f"{last['signed_at']} has it at position {last['sequence']}: events were removed"
        )
        return {**result, "broken": {"event_id": None, "position": checked + 1, "problem": problem}}
    if anchors.invalid:
        where = ", ".join(map(str, anchors.invalid[:10]))
        problem = (
            f"signed digest(s) {where} in {audit_digest.location()}: not a digest of this "
            "organization signed by the instance key (the digests were altered)"
        )
        return {**result, "broken": {"event_id": None, "position": None, "problem": problem}}
    return {**result, "ok": True, "broken": None}


class AuditChainBroken(Exception):
    """The chain no longer extends its last signed digest: no new digest is signed over it."""


def digest_write(organization) -> dict | None:
    """Sign the organization's chain head and store it as a new anchor object, once the chain
    from the last signed digest to the head checks out (so a rewritten chain is never signed).

    Returns the new digest, or None when the head has not moved since the last one. Raises
    AuditChainBroken when the chain does not extend the last digest. Seal first for an
    up-to-date head (the beat task does).
    """
    organization_id = getattr(organization, "pk", organization)
    last = audit_digest.latest(organization_id)
    with _snapshot():
        head = AuditChainHead.objects.filter(organization_id=organization_id).first()
        if head is None or head.sequence == 0:
            return None
        if last is not None and (last["sequence"], last["hash"]) == (head.sequence, head.hash):
            return None
        sealed = AuditEvent.objects.sealed().filter(organization_id=organization_id)
        sequence, previous = 1, GENESIS_HASH
        if last is not None:
            at_last = sealed.filter(sequence=last["sequence"]).values_list("hash", flat=True)
            if list(at_last) != [last["hash"]]:
                raise AuditChainBroken(
                    f"organization {organization_id}: the event at position {last['sequence']} "
                    f"no longer has the hash of the digest signed at {last['signed_at']}"
                )
            sequence, previous = last["sequence"] + 1, last["hash"]
        events = sealed.filter(sequence__gte=sequence).order_by("sequence").iterator(2000)
        checked, previous, broken = _walk(organization_id, events, sequence, previous, {})
        if broken or sequence + checked - 1 != head.sequence or previous != head.hash:
            where = broken or {"position": sequence + checked, "problem": "head mismatch"}
            raise AuditChainBroken(
                f"organization {organization_id}: chain broken at position "
                f"{where['position']}: {where['problem']}"
            )
    digest = audit_digest.signed(
        organization_id=organization_id, sequence=head.sequence, hash=head.hash
    )
    audit_digest.write(digest)
    return digest


def digest_all() -> dict:
    """Seal, then sign a digest of every organization's chain head that moved (the beat task).
    A chain that no longer extends its last digest gets none, and is logged as an error."""
    written, broken = 0, []
    for organization_id in AuditChainHead.objects.order_by("pk").values_list("pk", flat=True):
        seal(organization=organization_id)
        try:
            written += digest_write(organization_id) is not None
        except AuditChainBroken as error:
            logger.error("audit digest refused: %s", error)
            broken.append(organization_id)
    return {"written": written, "broken": broken}
