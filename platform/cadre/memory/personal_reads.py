"""Reads of another person's personal memory: noted by the memory gate, audited once per request
and person read, and shown to that person as their access log (docs/memory.md, "Who looked")."""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field

from django.db.models import QuerySet

from cadre.governance import audit
from cadre.governance.audit_models import AuditEvent
from cadre.memory.models import Memory, Scope, scope_parts
from cadre.observability import current_request
from cadre.tenancy.querysets import TenantQuerySet

ACTION = "memory.personal_read"


@dataclass
class PersonalReads:
    """What one request read of other people's personal memory: memory ids per person."""

    route: str = ""
    via: str = ""
    read: dict[int, dict] = field(default_factory=dict)  # person id -> {actor, ids}

    def note(self, actor, person_id: int, memory_ids) -> None:
        entry = self.read.setdefault(person_id, {"actor": actor, "ids": set()})
        entry["ids"].update(memory_ids)


_READS: ContextVar[PersonalReads | None] = ContextVar("personal_reads", default=None)


def reader_id(actor) -> int | None:
    """The member whose reads of others' personal memory are noted: a person (or their API
    key) who may read other members' personal scopes; None for everyone else (agents and the
    system read under their own rules, see `selectors._system_read`)."""
    if actor is None or actor.kind not in ("member", "api_key") or actor.organization is None:
        return None
    member = getattr(actor, "member", None)
    if member is None or member.organization_id != actor.organization.pk:
        return None
    return member.pk if actor.has("memory.personal") else None


def note(actor, reader: int, memories) -> None:
    """Note the memories read that lie in someone else's personal scope (not the reader's own,
    nor those the reader is the subject of): into the request's collector, or audited at once
    outside a request."""
    by_person: dict[int, set[int]] = {}
    for memory in memories:
        if isinstance(memory, dict):
            key, subject, pk = memory.get("scope_key"), memory.get("subject_id"), memory.get("id")
        else:
            key, subject, pk = memory.scope_key, memory.subject_id, memory.pk
        if not key or not key.startswith(f"{Scope.USER}:"):
            continue
        _, person = scope_parts(key)
        if person is None or person == reader or subject == reader:
            continue
        by_person.setdefault(person, set()).add(pk)
    if not by_person:
        return
    reads = _READS.get()
    if reads is not None:
        for person, ids in by_person.items():
            reads.note(actor, person, ids)
        return
    reads = PersonalReads(route="", via="direct")
    for person, ids in by_person.items():
        reads.note(actor, person, ids)
    _record(reads)


def _record(reads: PersonalReads) -> None:
    context = current_request()
    for person, entry in reads.read.items():
        audit.record(
            actor=entry["actor"],
            action=ACTION,
            target=("member", person),
            changes={
                "route": reads.route,
                "via": reads.via,
                "count": len(entry["ids"]),
                "request_id": context.request_id if context else "",
            },
        )


class WatchedMemories(TenantQuerySet):
    """The gate's queryset for a reader who may read other people's personal memory: the rows
    it fetches (model instances, or values carrying `scope_key`) are noted."""

    _reader: int | None = None
    _reader_actor = None

    def _clone(self):
        clone = super()._clone()
        clone._reader, clone._reader_actor = self._reader, self._reader_actor
        return clone

    def _fetch_all(self):
        fresh = self._result_cache is None
        super()._fetch_all()
        if fresh and self._reader is not None:
            note(self._reader_actor, self._reader, _rows(self._result_cache))

    def _iterator(self, use_chunked_fetch, chunk_size):
        for row in super()._iterator(use_chunked_fetch, chunk_size):
            if self._reader is not None:
                note(self._reader_actor, self._reader, _rows([row]))
            yield row


def _rows(rows) -> list:
    return [row for row in rows or () if isinstance(row, Memory | dict)]


def watched(actor, rows: QuerySet) -> QuerySet:
    """`rows` (memories) watched for reads of other people's personal memory by this actor."""
    reader = reader_id(actor)
    if reader is None:
        return rows
    watched_rows = WatchedMemories(model=rows.model, query=rows.query.chain(), using=rows._db)
    watched_rows._reader, watched_rows._reader_actor = reader, actor
    return watched_rows


class PersonalReadsMiddleware:
    """Collects a request's reads of other people's personal memory and audits them once per
    person read when the response is ready (a streamed response: when it has been sent)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        reads = PersonalReads()
        token = _READS.set(reads)
        try:
            response = self.get_response(request)
        finally:
            _READS.reset(token)
        match = getattr(request, "resolver_match", None)
        reads.route = (match.view_name if match else "") or request.path[:200]
        reads.via = _surface(request.path)
        if reads.read:
            _record(reads)
        return response


def _surface(path: str) -> str:
    for prefix, name in (
        ("/api/", "api"),
        ("/mem0/", "mem0"),
        ("/memos/", "memos"),
    ):
        if path.startswith(prefix):
            return name
    return "console"


def access_log(actor) -> QuerySet[AuditEvent]:
    """Who read the caller's own personal memory: the audit events of those reads, newest
    first. Only ever the caller's own (a member, or their API key); nobody else's."""
    if actor is None or actor.kind not in ("member", "api_key") or actor.organization is None:
        return AuditEvent.objects.none()
    member = getattr(actor, "member", None)
    if member is None or member.organization_id != actor.organization.pk:
        return AuditEvent.objects.none()
    return AuditEvent.objects.filter(
        organization=actor.organization,
        action=ACTION,
        target_type="member",
        target_id=str(member.pk),
    ).order_by("-created_at", "-id")


def entry(event: AuditEvent) -> dict:
    """One line of a person's access log, as the API and the Memory page show it."""
    changes = event.changes if isinstance(event.changes, dict) else {}
    return {
        "at": event.created_at,
        "reader": event.actor_label,
        "reader_type": event.actor_type,
        "route": str(changes.get("route", "")),
        "via": str(changes.get("via", "")),
        "count": int(changes.get("count", 0) or 0),
    }
