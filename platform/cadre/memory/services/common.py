"""Helpers shared by the memory services: validation, scopes, versions, task enqueueing."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from cadre import queues
from cadre.errors import InvalidInput, NotFound, NotPermitted
from cadre.memory import selectors, turns
from cadre.memory.models import (
    GOVERNED_SCOPES,
    Memory,
    MemoryEmbedding,
    MemoryTask,
    MemoryVersion,
    Scope,
    Verification,
    scope_key,
)
from cadre.tenancy.actors import member_actor
from cadre.tenancy.models import Department, Member, Position

MAX_CONTENT_CHARS = 8000
MAX_TAGS = 32
MAX_ATTRIBUTES_BYTES = 32_000
# A memory written again keeps where each write came from, up to this many entries: the first
# and the latest (each write is also a version in its history).
MAX_PROVENANCE = 20
MAX_MESSAGES = 200
EXACT_REASON = "exact duplicate"
NEAR_REASON = "near duplicate of"


# --- small helpers --------------------------------------------------------------------------


def audit_view(memory: Memory) -> dict:
    """What the audit log may know about a memory: never its text."""
    return {
        "id": memory.pk,
        "scope_key": memory.scope_key,
        "kind": memory.kind,
        "status": memory.status,
        "version": memory.version,
        "source_kind": memory.source_kind,
        "content_sha256": memory.content_hash,
        "content_length": len(memory.content or ""),
        "tags_count": len(memory.tags or []),
        "expires_at": memory.expires_at,
    }


def audit_verification(memory: Memory) -> dict:
    """The verification state for an audit diff, when it is not the usual `verified`."""
    return (
        {}
        if memory.verification == Verification.VERIFIED
        else {"verification": memory.verification}
    )


def vouches_for_shared(actor, *, subject_id: int | None = None) -> bool:
    """Does this write come from someone who governs shared memory (`memory.manage`)?

    A member or an API key by its own permissions (a key's are capped by its creator's); the
    system's jobs always. An agent holds no memory permission of its own: what it writes comes
    from the turn of the member it names as the subject (the run's member), so that member's
    permissions decide — with no subject, nobody vouches."""
    if actor is None:
        return False
    if actor.kind == "system":
        return True
    if actor.kind in ("member", "api_key"):
        return actor.has("memory.manage")
    if actor.kind == "agent" and subject_id is not None:
        member = Member.objects.filter(organization=actor.organization, pk=subject_id).first()
        return member is not None and member_actor(member).has("memory.manage")
    return False


def verification_for_write(actor, *, scope: str, subject_id: int | None = None) -> str:
    """`verified`, or `unverified` for a write into a shared scope nobody governing it vouched
    for: such a memory reaches no model until a holder of `memory.manage` accepts it."""
    if scope not in GOVERNED_SCOPES or vouches_for_shared(actor, subject_id=subject_id):
        return Verification.VERIFIED
    return Verification.UNVERIFIED


def author_fields(actor) -> dict:
    return {
        "author_type": actor.kind,
        "author_id": str(actor.actor_id)[:64],
        "author_label": str(actor.label)[:200],
    }


def write_version(
    memory: Memory,
    *,
    change: str,
    actor,
    reason: str = "",
    old_content: str = "",
    new_content: str = "",
    old_attributes: dict | None = None,
    new_attributes: dict | None = None,
    old_status: str = "",
    new_status: str = "",
    related: Memory | None = None,
) -> MemoryVersion:
    return MemoryVersion.objects.create(
        memory=memory,
        version=memory.version,
        change=change,
        old_content=old_content,
        new_content=new_content,
        old_attributes=old_attributes or {},
        new_attributes=new_attributes or {},
        old_status=old_status,
        new_status=new_status or memory.status,
        actor_type=actor.kind,
        actor_id=str(actor.actor_id)[:64],
        actor_label=str(actor.label)[:200],
        reason=reason[:2000],
        related_memory=related,
    )


def clean_tags(tags) -> list[str]:
    if tags is None:
        return []
    if isinstance(tags, str) or not isinstance(tags, list | tuple):
        raise InvalidInput(_("tags must be a list of strings."), details={"tags": ["A list."]})
    cleaned = []
    for tag in tags:
        tag = str(tag).strip()[:64]
        if tag and tag not in cleaned:
            cleaned.append(tag)
    if len(cleaned) > MAX_TAGS:
        raise InvalidInput(
            _("At most %(max_tags)s tags.") % {"max_tags": MAX_TAGS},
            details={"tags": ["Too many."]},
        )
    return cleaned


def clean_content(content) -> str:
    content = str(content or "").strip()
    if not content:
        raise InvalidInput(_("A memory needs content."), details={"content": ["Required."]})
    if len(content) > MAX_CONTENT_CHARS:
        raise InvalidInput(
            _("Content is longer than %(max_content_chars)s characters.")
            % {"max_content_chars": MAX_CONTENT_CHARS},
            details={"content": [f"At most {MAX_CONTENT_CHARS} characters."]},
        )
    return content


def clean_attributes(attributes) -> dict:
    if attributes is None:
        return {}
    if not isinstance(attributes, dict):
        raise InvalidInput(
            _("attributes must be an object."), details={"attributes": ["An object."]}
        )
    try:
        size = len(json.dumps(attributes, default=str))
    except (TypeError, ValueError):
        raise InvalidInput(
            _("attributes must be JSON."), details={"attributes": ["JSON."]}
        ) from None
    if size > MAX_ATTRIBUTES_BYTES:
        raise InvalidInput(_("attributes are too large."), details={"attributes": ["Too large."]})
    return json.loads(json.dumps(attributes, default=str))


def capped_provenance(entries: list) -> list:
    """A memory's provenance after a merge: its own first entry and the latest others, at most
    MAX_PROVENANCE (a sentence written again and again must not grow its row without end)."""
    return entries[:1] + entries[1:][-(MAX_PROVENANCE - 1) :]


def clean_source_ref(source_ref) -> dict:
    """Where a memory came from, as its writer states it: an object of at most
    MAX_ATTRIBUTES_BYTES of JSON (it is kept in the memory's provenance)."""
    if source_ref is None:
        return {}
    if not isinstance(source_ref, dict):
        raise InvalidInput(_("source_ref must be an object."), details={"source_ref": ["Object."]})
    try:
        size = len(json.dumps(source_ref, default=str))
    except (TypeError, ValueError, RecursionError):
        raise InvalidInput(
            _("source_ref must be JSON."), details={"source_ref": ["JSON."]}
        ) from None
    if size > MAX_ATTRIBUTES_BYTES:
        raise InvalidInput(_("source_ref is too large."), details={"source_ref": ["Too large."]})
    return source_ref


def check_choice(value: str, choices, name: str) -> str:
    if value not in choices:
        raise InvalidInput(
            _("Unknown %(name)s %(value)r.") % {"name": name, "value": value},
            details={name: [f"Choose from: {', '.join(choices)}."]},
        )
    return value


def aware(value: datetime | None, name: str) -> datetime | None:
    if value is not None and timezone.is_naive(value):
        raise InvalidInput(
            _("%(name)s needs a time zone.") % {"name": name}, details={name: ["Aware datetime."]}
        )
    return value


def require_write(actor) -> None:
    if not selectors.can_write_memory(actor):
        if actor is not None and actor.kind == "api_key":
            raise NotPermitted(_("This API key needs the 'memory:write' scope."))
        raise NotPermitted(_("You may not write memory."))


def check_scope_owner(actor, scope: str, scope_id: int | None) -> None:
    """The scope's owner exists in the actor's organization (else 404, as for any object)."""
    model = {Scope.USER: Member, Scope.DEPARTMENT: Department, Scope.POSITION: Position}.get(scope)
    if (
        model is not None
        and not model.objects.filter(organization=actor.organization, pk=scope_id).exists()
    ):
        raise NotFound(
            _("No %(scope)s %(scope_id)s in this organization.")
            % {"scope": scope, "scope_id": scope_id}
        )


def resolve_write_scope(actor, scope: str, scope_id: int | None) -> str:
    """The scope key to write to, if the actor may write there."""
    check_choice(scope, Scope.values, "scope")
    if scope == Scope.ORGANIZATION:
        scope_id = None
    elif scope_id is None:
        if scope == Scope.USER and getattr(actor, "member", None) is not None:
            scope_id = actor.member.pk
        elif scope == Scope.AGENT and getattr(actor, "agent", None) is not None:
            scope_id = actor.agent.pk
        else:
            raise InvalidInput(
                _("A %(scope)s memory needs scope_id.") % {"scope": scope},
                details={"scope_id": ["Required."]},
            )
    try:
        scope_id = int(scope_id) if scope_id is not None else None
    except (TypeError, ValueError):
        raise InvalidInput(
            _("scope_id must be an integer."), details={"scope_id": ["Integer."]}
        ) from None
    key = scope_key(scope, scope_id)
    if key not in selectors.writable_scope_keys(actor):
        if scope == Scope.USER:
            # Another person's personal memory: indistinguishable from a missing one.
            raise NotFound(
                _("No %(scope)s %(scope_id)s in this organization.")
                % {"scope": scope, "scope_id": scope_id}
            )
        check_scope_owner(actor, scope, scope_id)
        raise NotPermitted(_("You may not write to the %(key)s memory.") % {"key": key})
    check_scope_owner(actor, scope, scope_id)
    return key


def default_expiry(organization, kind: str, observed_at: datetime) -> tuple[datetime | None, str]:
    """Retention from the organization's settings: {"memory_retention_days": {"kind": days}}."""
    policy = (organization.settings or {}).get("memory_retention_days") or {}
    days = policy.get(kind, policy.get("*")) if isinstance(policy, dict) else None
    if isinstance(days, int) and days > 0:
        return observed_at + timedelta(days=days), f"days:{days}"
    return None, ""


def enqueue(kind: str, *, organization, memory: Memory | None, key: str, params=None):
    """Create (or reuse) the visible task record and send the Celery task after commit."""
    task, created = MemoryTask.objects.get_or_create(
        idempotency_key=key[:191],
        defaults={
            "organization": organization,
            "kind": kind,
            "memory": memory,
            "params": params or {},
        },
    )
    if created or task.status == MemoryTask.Status.FAILED:
        # By name: the tasks import these services (the map's task is the Memory Viewer's,
        # kept under its memory name for routing and queued messages).
        name = f"cadre.memory.tasks.memory_{kind}"
        transaction.on_commit(lambda: queues.enqueue(name, task.pk))
    return task


def enqueue_enrich(memory: Memory) -> MemoryTask:
    return enqueue(
        MemoryTask.Kind.ENRICH,
        organization=memory.organization,
        memory=memory,
        key=f"enrich:{memory.pk}:v{memory.version}",
    )


def refresh_turn_vectors(memories, *, reason: str, also=()) -> list[int]:
    """The turns whose vectors embed one of `memories` as context (turns.dependents), and the
    turn memories in `also`: their vectors dropped under every model and their re-embedding
    queued (a durable task), in the caller's transaction, so no vector keeps words of a turn
    that was changed, removed or withheld. Call with the memories as they stand after the
    change; pass in `also` the dependents found before it when the change moved them.
    Returns the ids refreshed."""
    memories = list(memories)
    # A vector being written for one of these turns now waits, or is refused (turns.py).
    turns.lock_conversations([*memories, *also])
    rows = {row.pk: row for row in [*also, *turns.dependents(memories)]}
    refreshed = []
    for pk in sorted(rows):
        row = rows[pk]
        MemoryEmbedding.objects.filter(memory=row).delete()
        enqueue(
            MemoryTask.Kind.ENRICH,
            organization=row.organization,
            memory=row,
            key=f"enrich:{row.pk}:v{row.version}:context:{timezone.now().timestamp()}",
            params={"reason": reason[:200]},
        )
        refreshed.append(pk)
    return refreshed


def lock(memory: Memory) -> Memory:
    return Memory.objects.select_for_update().get(pk=memory.pk)


def require_modify(actor, memory: Memory) -> None:
    if not selectors.can_modify(actor, memory):
        if not selectors.memory_queryset(actor).filter(pk=memory.pk).exists():
            raise NotFound(_("Memory not found."))
        raise NotPermitted(_("You may not change this memory (shared memory needs memory.manage)."))
