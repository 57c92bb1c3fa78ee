"""The one way to record a state change: `audit.record(...)`, in the change's transaction.

Events form a SHA-256 hash chain per organization. Appending locks the organization's chain
head row (SELECT … FOR UPDATE), so concurrent writers queue instead of forking the chain; the
lock is released when the surrounding transaction commits, together with the change itself.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import re
from datetime import UTC
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection, transaction
from django.utils import timezone

from cadre.governance.models import AuditChainHead, AuditEvent
from cadre.observability import current_request, current_trace_id

GENESIS_HASH = "0" * 64
REDACTED = "[redacted]"
_SECRET_NAME = re.compile(
    r"pass(word)?|secret|token|key_hash|api_?key|credential|private|encrypt|signing", re.I
)

_HASHED_FIELDS = AuditEvent.CHAINED_FIELDS


def _plain(value: Any) -> Any:
    """JSON-safe copy (dates, UUIDs, decimals become strings) with secret-named keys redacted."""
    value = json.loads(json.dumps(value, cls=DjangoJSONEncoder, ensure_ascii=False))
    return _redact(value)


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
    """The address exactly as the inet column will give it back (the hash must match then).

    Not an address → None. IPv6 is normalised by PostgreSQL itself, whose spelling of some
    forms (e.g. IPv4-compatible ::1.2.3.4) differs from Python's.
    """
    if not value:
        return None
    try:
        address = ipaddress.ip_address(value.strip().split("%", 1)[0])
    except ValueError:
        return None
    if address.version == 4:
        return str(address)
    with connection.cursor() as cursor:
        cursor.execute("SELECT host(%s::inet)", [str(address)])
        return cursor.fetchone()[0]


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
    """Lock the organization's chain head (created on its first event)."""
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
    """Append one audit event in the current transaction and return it.

    `target` is a model instance or a (type, id[, label]) tuple; `before`/`after` are dicts of
    the fields that matter — only the changed keys are kept, secret-named keys are redacted.
    """
    organization = organization or getattr(actor, "organization", None)
    if organization is None:
        organization = getattr(target, "organization", None)
    if organization is None:
        raise ValueError("audit.record needs an organization (from the actor or the target)")
    target_type, target_id, target_label = _target_parts(target)
    context = current_request()
    summary = _plain(changes) if changes is not None else diff_summary(before, after)

    # No savepoint: the event belongs to the caller's transaction (a failure fails the change),
    # and every statement saved here shortens the time the chain head stays locked.
    with transaction.atomic(savepoint=False):
        head = _lock_head(organization.pk)
        created_at = timezone.now()
        fields = {
            "sequence": head.sequence + 1,
            "actor_type": getattr(actor, "kind", "system"),
            "actor_id": getattr(actor, "actor_id", ""),
            "actor_label": _text(str(getattr(actor, "label", "")))[:200],
            "action": action,
            "target_type": target_type,
            "target_id": target_id,
            "target_label": target_label,
            "changes": summary,
            "reason": _text(reason or ""),
            "request_id": _text(context.request_id)[:64] if context else "",
            "trace_id": current_trace_id(),
            "ip": _stored_ip(context.ip) if context else None,
            "user_agent": _text(context.user_agent or "")[:400] if context else "",
            "prev_hash": head.hash,
        }
        digest = event_hash(organization.pk, created_at, fields)
        event = AuditEvent(organization=organization, created_at=created_at, hash=digest, **fields)
        event.save(force_insert=True)
        AuditChainHead.objects.filter(organization_id=organization.pk).update(
            sequence=fields["sequence"], hash=digest
        )
    return event


def verify_chain(organization) -> dict:
    """Recompute the organization's chain. Returns {"ok", "checked", "broken": {...} | None}."""
    expected_sequence, previous = 1, GENESIS_HASH
    checked = 0
    events = (
        AuditEvent.objects.filter(organization=organization).order_by("sequence").iterator(2000)
    )
    for event in events:
        fields = {name: getattr(event, name) for name in _HASHED_FIELDS}
        problem = None
        if event.sequence != expected_sequence:
            problem = f"event missing at position {expected_sequence}"
        elif event.prev_hash != previous:
            problem = "prev_hash does not match the previous event's hash"
        elif event_hash(organization.pk, event.created_at, fields) != event.hash:
            problem = "content does not match its hash (edited)"
        if problem:
            return {
                "ok": False,
                "checked": checked,
                "broken": {"event_id": event.pk, "position": expected_sequence, "problem": problem},
            }
        previous, expected_sequence = event.hash, expected_sequence + 1
        checked += 1
    head = AuditChainHead.objects.filter(organization=organization).first()
    if head is not None and (head.sequence != checked or head.hash != previous):
        return {
            "ok": False,
            "checked": checked,
            "broken": {
                "event_id": None,
                "position": checked + 1,
                "problem": f"chain head is at position {head.sequence}: events after "
                f"position {checked} are missing",
            },
        }
    return {"ok": True, "checked": checked, "broken": None}
