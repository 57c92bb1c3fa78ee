"""Adding memories (explicit, extracted, tool trajectories), updating and superseding them."""

from __future__ import annotations

import json
import logging
import re
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext
from opentelemetry import trace

from cadre.errors import Conflict, InvalidInput, NotFound
from cadre.governance import audit
from cadre.governance.masking.engine import mask
from cadre.governance.masking.vault import EphemeralVault
from cadre.memory import dedup, turns
from cadre.memory.extraction import charged
from cadre.memory.extraction import extractor as default_extractor
from cadre.memory.models import (
    GOVERNED_SCOPES,
    Kind,
    Memory,
    MemoryEmbedding,
    MemoryVersion,
    Scope,
    SourceKind,
    Verification,
)
from cadre.memory.sensitive import placeholders_in, protect
from cadre.memory.services.common import (
    EXACT_REASON,
    MAX_CONTENT_CHARS,
    MAX_MESSAGES,
    audit_verification,
    audit_view,
    author_fields,
    aware,
    capped_provenance,
    check_choice,
    clean_attributes,
    clean_content,
    clean_source_ref,
    clean_tags,
    default_expiry,
    enqueue_enrich,
    lock,
    refresh_turn_vectors,
    require_modify,
    require_write,
    resolve_write_scope,
    verification_for_write,
    vouches_for_shared,
    write_version,
)
from cadre.memory.statements import is_question
from cadre.memory.text import lexical_document
from cadre.tenancy.models import Member

tracer = trace.get_tracer(__name__)
logger = logging.getLogger(__name__)


# --- add ---------------------------------------------------------------------------------


@transaction.atomic
@tracer.start_as_current_span("memory.add")
def memory_add(
    *,
    actor,
    scope: str,
    scope_id: int | None = None,
    kind: str,
    content: str,
    attributes: dict | None = None,
    source_kind: str,
    source_ref: dict | None = None,
    observed_at: datetime | None = None,
    valid_from: datetime | None = None,
    valid_to: datetime | None = None,
    expires_at: datetime | None = None,
    tags: list[str] | None = None,
    conversation_id: str = "",
    confidence: float = 1.0,
    subject=None,
) -> Memory:
    """Write one memory and return it, readable and lexically searchable at once.

    `subject` is the member the memory is about (who stated it); a personal memory's subject
    is its owner, an agent's memory defaults to the member the agent serves.

    An exact duplicate (same normalized content, same scope, still active, a comparable kind:
    statements with statements, a derived record with its own kind) is not stored twice: the
    existing item absorbs the new provenance (a `merge` version) and is returned with
    `dedup_decision = "exact_duplicate"`. Embedding, near-duplicate dedup and organization
    follow asynchronously.
    """
    require_write(actor)
    key = resolve_write_scope(actor, scope, scope_id)
    kind = check_choice(kind, Kind.values, "kind")
    source_kind = check_choice(source_kind, SourceKind.values, "source_kind")
    content, sensitive_types = protect(clean_content(content), organization=actor.organization)
    attributes = clean_attributes(attributes)
    tags = clean_tags(tags)
    source_ref = clean_source_ref(source_ref)
    try:
        confidence = float(confidence)
    except (TypeError, ValueError):
        raise InvalidInput(gettext("confidence must be a number.")) from None
    if not 0.0 <= confidence <= 1.0:
        raise InvalidInput(
            gettext("confidence must be between 0 and 1."), details={"confidence": ["0..1"]}
        )
    now = timezone.now()
    observed_at = aware(observed_at, "observed_at") or now
    valid_from = aware(valid_from, "valid_from") or observed_at
    valid_to = aware(valid_to, "valid_to")
    if valid_to is not None and valid_to <= valid_from:
        raise InvalidInput(
            gettext("valid_to must be after valid_from."), details={"valid_to": ["Order."]}
        )
    expires_at = aware(expires_at, "expires_at")
    retention_policy = ""
    if expires_at is None:
        expires_at, retention_policy = default_expiry(actor.organization, kind, observed_at)
    digest = dedup.content_hash(content)
    scope_name, _, raw_id = key.partition(":")
    subject_id = _subject_id(actor, scope_name, int(raw_id) if raw_id else None, subject)
    verification = verification_for_write(actor, scope=scope_name, subject_id=subject_id)
    provenance = {
        "source_kind": source_kind,
        "source_ref": source_ref or {},
        **{k: v for k, v in author_fields(actor).items() if k != "author_label"},
        "observed_at": observed_at.isoformat(),
    }

    existing = (
        Memory.objects.select_for_update()
        .filter(
            organization=actor.organization,
            scope_key=key,
            content_hash=digest,
            status=Memory.Status.ACTIVE,
            # A statement never merges into a run's record with the same words, nor the reverse.
            kind__in=dedup.comparable_kinds(kind),
        )
        .order_by("pk")
        .first()
    )
    if existing is not None:
        existing.provenance = capped_provenance([*existing.provenance, provenance])
        existing.tags = list(dict.fromkeys([*existing.tags, *tags]))
        existing.version += 1
        existing.updated_at = now
        fields = ["provenance", "tags", "version", "updated_at"]
        # Someone who governs the scope writing the very same words vouches for them; an
        # unvouched repeat of a verified memory adds nothing a model was not already sent.
        vouched = (
            verification == Verification.VERIFIED and existing.verification != Verification.VERIFIED
        )
        if vouched:
            existing.verification = Verification.VERIFIED
            fields.append("verification")
        existing.save(update_fields=fields)
        write_version(
            existing,
            change=MemoryVersion.Change.MERGE,
            actor=actor,
            reason=f"{EXACT_REASON}: the same content was written again ({source_kind})"
            + ("; verified: written again by someone who governs the scope" if vouched else ""),
            old_status=existing.status,
        )
        audit.record(
            actor=actor,
            action="memory.merge",
            target=existing,
            changes={
                "decision": "exact_duplicate",
                "memory": audit_view(existing),
                "provenance_count": len(existing.provenance),
                **({"verification": Verification.VERIFIED} if vouched else {}),
            },
            reason=EXACT_REASON,
        )
        existing.dedup_decision = "exact_duplicate"
        return existing

    memory = Memory(
        organization=actor.organization,
        scope=scope_name,
        scope_id=int(raw_id) if raw_id else None,
        scope_key=key,
        subject_id=subject_id,
        kind=kind,
        content=content,
        sensitive_types=sensitive_types,
        attributes=attributes,
        search_text=lexical_document(content, attributes),
        source_kind=source_kind,
        source_ref=source_ref or {},
        observed_at=observed_at,
        confidence=confidence,
        valid_from=valid_from,
        valid_to=valid_to,
        expires_at=expires_at,
        retention_policy=retention_policy,
        content_hash=digest,
        tags=tags,
        conversation_id=str(conversation_id or "")[:128],
        verification=verification,
        created_at=now,
        updated_at=now,
        **author_fields(actor),
    )
    memory.save()
    memory.provenance = [{"memory_id": memory.pk, **provenance}]
    memory.save(update_fields=["provenance"])
    write_version(
        memory,
        change=MemoryVersion.Change.ADDITION,
        actor=actor,
        new_content=content,
        new_attributes=attributes,
        new_status=memory.status,
    )
    audit.record(
        actor=actor,
        action="memory.add",
        target=memory,
        after={**audit_view(memory), **audit_verification(memory)},
    )
    enqueue_enrich(memory)
    # A turn written after the turn that follows it (an import out of order): that turn's
    # vector was computed without this one as context.
    refresh_turn_vectors([memory], reason=f"context memory {memory.pk} added")
    memory.dedup_decision = "stored"
    return memory


def _subject_id(actor, scope: str, scope_id: int | None, subject) -> int | None:
    if scope == Scope.USER:
        return scope_id
    if subject is not None:
        subject_id = getattr(subject, "pk", subject)
        if not Member.objects.filter(organization=actor.organization, pk=subject_id).exists():
            raise InvalidInput(gettext("The subject is not a member of this organization."))
        return int(subject_id)
    if scope == Scope.AGENT and actor.kind == "agent" and getattr(actor, "member", None):
        return actor.member.pk
    return None


# What a person states about themselves and their work: it belongs to them, not to one agent.
PERSONAL_KINDS = (Kind.FACT, Kind.PREFERENCE, Kind.REQUIREMENT)


class ExtractionResult(list):
    """The memories written (it is the list), plus which extractor ran and how many
    candidates it proposed (exact duplicates return the existing item)."""

    def __init__(self, memories: list[Memory], *, extractor: str, candidates: int):
        super().__init__(memories)
        self.extractor = extractor
        self.candidates = candidates

    @property
    def memories(self) -> list[Memory]:
        return list(self)


def memory_add_from_messages(
    *,
    actor,
    messages: list[dict],
    scope: str = Scope.USER,
    scope_id: int | None = None,
    conversation_id: str = "",
    source_ref: dict | None = None,
    tags: list[str] | None = None,
    extractor=None,
    personal_scope: tuple[str, int | None] | None = None,
    subject=None,
    already_written: list[str] | None = None,
    observed_at: datetime | None = None,
    expires_at: datetime | None = None,
) -> ExtractionResult:  # a list[Memory] with .extractor and .candidates
    """Extract memories from conversation messages and write each (see extraction.py).

    Rule-extracted items are the user's own words (`user_statement`); model-extracted items
    are the model's reading of them (`model_inference`), which the conflict rule ranks lower.
    With `personal_scope` (scope, scope_id), what the person states about themselves (facts,
    preferences, requirements) is written there and the rest (experience) to `scope`.

    A question states nothing: a candidate that only asks (statements.is_question) is never
    written. `already_written` holds what the same turn already stored (the memory tool's
    writes, as said): a candidate saying nothing more than one of them is not written again.
    """
    require_write(actor)
    source_ref = clean_source_ref(source_ref)  # refused whether or not anything is extracted
    if not isinstance(messages, list) or not messages:
        raise InvalidInput(
            gettext("messages must be a non-empty list."), details={"messages": ["List."]}
        )
    if len(messages) > MAX_MESSAGES:
        raise InvalidInput(
            gettext("At most %(max_messages)s messages.") % {"max_messages": MAX_MESSAGES},
            details={"messages": ["Too many."]},
        )
    for message in messages:
        if not isinstance(message, dict) or not isinstance(message.get("content"), str):
            raise InvalidInput(
                gettext("Each message needs a 'content' string (and a 'role')."),
                details={"messages": ["{role, content} objects."]},
            )
    resolve_write_scope(actor, scope, scope_id)  # fail before calling a model
    if personal_scope is not None:
        resolve_write_scope(actor, *personal_scope)
    extractor = extractor or default_extractor()
    vault = EphemeralVault()
    if not extractor.name.startswith("rules"):
        # Memory's model reads the conversation with placeholders (numbered for this call
        # only); what it extracts gets the originals back before it is stored.
        messages = [
            {
                **message,
                "content": mask(
                    message["content"], conversation=vault, organization=actor.organization
                ).text,
            }
            for message in messages
        ]
    candidates = []
    stored = [dedup.normalize_content(text) for text in already_written or () if text]
    # Charged to the run that asked (process_memory), else to the acting member.
    with charged("memory.extraction", actor=actor):
        extracted = extractor.extract(messages)
    for candidate in extracted:
        candidate.content = vault.reidentify(candidate.content)
        if placeholders_in(candidate.content):
            # A placeholder left over from some session's masking means nothing outside it
            # (and may mean another value in another session): never made durable.
            logger.info("extracted memory skipped: it holds a session placeholder")
            continue
        if is_question(candidate.content):
            # "Which format do I prefer?" matches the preference rule but states nothing.
            logger.info("extracted memory skipped: it is a question")
            continue
        said = dedup.normalize_content(candidate.content)
        if any(said and said in text for text in stored):
            # Already stored this turn (the memory tool): writing it again would only add an
            # exact-duplicate merge to the same memory.
            continue
        candidates.append(candidate)
    source_kind = (
        SourceKind.USER_STATEMENT
        if extractor.name.startswith("rules")
        else SourceKind.MODEL_INFERENCE
    )
    written = []
    if not candidates:
        return ExtractionResult(written, extractor=extractor.name, candidates=0)
    with transaction.atomic():
        for candidate in candidates:
            ref = dict(source_ref or {})
            if conversation_id:
                ref.setdefault("conversation_id", conversation_id)
            if candidate.message_index is not None:
                message = messages[candidate.message_index]
                ref["message_index"] = candidate.message_index
                if message.get("id"):
                    ref["message_id"] = str(message["id"])[:128]
            target = (
                personal_scope
                if personal_scope is not None and candidate.kind in PERSONAL_KINDS
                else (scope, scope_id)
            )
            written.append(
                memory_add(
                    actor=actor,
                    scope=target[0],
                    scope_id=target[1],
                    subject=subject,
                    kind=candidate.kind,
                    content=candidate.content,
                    attributes={**candidate.attributes, "extracted_by": extractor.name},
                    source_kind=source_kind,
                    source_ref=ref,
                    tags=tags,
                    conversation_id=conversation_id,
                    confidence=candidate.confidence,
                    observed_at=observed_at,
                    expires_at=expires_at,
                )
            )
    return ExtractionResult(written, extractor=extractor.name, candidates=len(candidates))


def tool_trajectory_record(
    *,
    actor,
    tool: str,
    parameters: dict,
    result,
    run_id: str,
    step_id: str = "",
    tool_call_id: str = "",
    ok: bool = True,
    duration_ms: int | None = None,
    scope: str | None = None,
    scope_id: int | None = None,
    conversation_id: str = "",
    tags: list[str] | None = None,
    subject=None,
) -> Memory:
    """Record one real tool call (name, parameters, result) as a `tool_trajectory` memory, so
    later runs can search past calls by kind. Defaults to the agent's scope (else the user's).
    `subject`: the run's member (whose permissions decide whether a shared-scope record waits
    for review)."""
    tool = str(tool or "").strip()[:128]
    if not tool:
        raise InvalidInput(
            gettext("A tool trajectory needs the tool name."), details={"tool": ["Required."]}
        )
    if scope is None:
        scope = Scope.AGENT if getattr(actor, "agent", None) is not None else Scope.USER
    result_text = (
        result if isinstance(result, str) else json.dumps(result, default=str, ensure_ascii=False)
    )
    params_text = json.dumps(parameters or {}, default=str, ensure_ascii=False, sort_keys=True)
    outcome = "ok" if ok else "error"
    content = f"Tool {tool}({params_text[:1500]}) -> {outcome}: {result_text[:4000]}"
    attributes = {
        "tool": tool,
        "parameters": clean_attributes(parameters or {}),
        "result": result_text[:8000],
        "ok": bool(ok),
        "run_id": str(run_id),
        "step_id": str(step_id),
        "duration_ms": duration_ms,
        "keywords": [tool, *re.split(r"[._\-/]", tool)],
    }
    return memory_add(
        actor=actor,
        scope=scope,
        scope_id=scope_id,
        kind=Kind.TOOL_TRAJECTORY,
        content=content[:MAX_CONTENT_CHARS],
        attributes=attributes,
        source_kind=SourceKind.TOOL_RESULT,
        source_ref={
            "run_id": str(run_id),
            "step_id": str(step_id),
            "tool_call_id": str(tool_call_id),
        },
        tags=[*(tags or []), f"tool:{tool}"[:64]],
        conversation_id=conversation_id,
        subject=subject,
    )


# --- update and supersede ------------------------------------------------------------------

UPDATABLE = (
    "content",
    "attributes",
    "tags",
    "kind",
    "valid_from",
    "valid_to",
    "expires_at",
    "confidence",
    "status",
)


@transaction.atomic
@tracer.start_as_current_span("memory.update")
def memory_update(
    *, actor, memory: Memory, expected_version: int, reason: str = "", **changes
) -> Memory:
    """Change a memory in place if it is still at `expected_version` (else 409, nothing lost).

    A content change is a `correction` (re-hashed, re-indexed, re-embedded); a status change
    (active <-> archived) is a `state_change`. Deleting goes through memory_delete.
    """
    require_write(actor)
    unknown = set(changes) - set(UPDATABLE)
    if unknown:
        raise InvalidInput(
            gettext("Cannot change %(value)s.") % {"value": ", ".join(sorted(unknown))}
        )
    memory = lock(memory)
    if memory.status == Memory.Status.DELETED:
        raise NotFound(gettext("Memory not found."))
    require_modify(actor, memory)
    if int(expected_version) != memory.version:
        raise Conflict(
            gettext("The memory changed: it is at version %(version)s, not %(expected_version)s.")
            % {"version": memory.version, "expected_version": expected_version},
            code="version_conflict",
            details={"current_version": memory.version, "expected_version": expected_version},
        )
    before = audit_view(memory)
    old_content, old_attributes, old_status = memory.content, dict(memory.attributes), memory.status
    old_kind = memory.kind
    # The turns whose vectors embed this one as context, where it stands now (its position,
    # text or kind may change below).
    context_of = turns.dependents([memory])
    fields = {"version", "updated_at"}
    if "content" in changes:
        memory.content, memory.sensitive_types = protect(
            clean_content(changes["content"]), organization=memory.organization
        )
        memory.content_hash = dedup.content_hash(memory.content)
        fields |= {"content", "content_hash", "sensitive_types"}
    if "attributes" in changes:
        memory.attributes = clean_attributes(changes["attributes"])
        fields.add("attributes")
    if "tags" in changes:
        memory.tags = clean_tags(changes["tags"])
        fields.add("tags")
    if "kind" in changes:
        memory.kind = check_choice(changes["kind"], Kind.values, "kind")
        fields.add("kind")
    if "status" in changes:
        status = changes["status"]
        if status not in (Memory.Status.ACTIVE, Memory.Status.ARCHIVED):
            raise InvalidInput(
                gettext("status can be set to active or archived (delete to delete)."),
                details={"status": ["active or archived"]},
            )
        if memory.status == Memory.Status.SUPERSEDED and status == Memory.Status.ACTIVE:
            raise InvalidInput(
                gettext(
                    "A superseded memory cannot be reactivated; add or correct the memory "
                    "that replaced it."
                ),
                details={"status": ["Superseded."]},
            )
        memory.status = status
        fields.add("status")
    for name in ("valid_from", "valid_to", "expires_at"):
        if name in changes:
            setattr(memory, name, aware(changes[name], name))
            fields.add(name)
    if "valid_from" in changes and memory.valid_from is None:
        raise InvalidInput(
            gettext("valid_from cannot be empty."), details={"valid_from": ["Required."]}
        )
    if memory.valid_to is not None and memory.valid_to <= memory.valid_from:
        raise InvalidInput(
            gettext("valid_to must be after valid_from."), details={"valid_to": ["Order."]}
        )
    if "confidence" in changes:
        try:
            memory.confidence = float(changes["confidence"])
        except (TypeError, ValueError):
            raise InvalidInput(gettext("confidence must be a number.")) from None
        if not 0.0 <= memory.confidence <= 1.0:
            raise InvalidInput(gettext("confidence must be between 0 and 1."))
        fields.add("confidence")
    content_changed = memory.content != old_content
    if content_changed or "attributes" in changes:
        memory.search_text = lexical_document(memory.content, memory.attributes)
        fields.add("search_text")
    old_verification = memory.verification
    if (
        (content_changed or "attributes" in changes)
        and memory.scope in GOVERNED_SCOPES
        and not vouches_for_shared(actor)
    ):
        # What was accepted is not what it now says: the new text waits for review again
        # (else an author could turn an accepted memory into anything).
        memory.verification = Verification.UNVERIFIED
        fields.add("verification")
    memory.version += 1
    memory.updated_at = timezone.now()
    memory.save(update_fields=sorted(fields))
    if content_changed:
        MemoryEmbedding.objects.filter(memory=memory).delete()  # stale vectors mislead search
    change = (
        MemoryVersion.Change.CORRECTION
        if content_changed or "attributes" in changes
        else MemoryVersion.Change.STATE_CHANGE
    )
    if memory.verification != old_verification:
        reason = "; ".join(filter(None, [reason, "waits for review again"]))
    write_version(
        memory,
        change=change,
        actor=actor,
        reason=reason,
        old_content=old_content if content_changed else "",
        new_content=memory.content if content_changed else "",
        old_attributes=old_attributes if "attributes" in changes else None,
        new_attributes=memory.attributes if "attributes" in changes else None,
        old_status=old_status,
        new_status=memory.status,
    )
    audit.record(
        actor=actor,
        action="memory.update",
        target=memory,
        before={
            **before,
            **(
                {"verification": old_verification}
                if old_verification != memory.verification
                else {}
            ),
        },
        after={**audit_view(memory), **audit_verification(memory)},
        reason="" if not reason else "update with reason",
    )
    if content_changed:
        enqueue_enrich(memory)
    if (
        content_changed
        or memory.attributes != old_attributes
        or memory.kind != old_kind
        or memory.verification != old_verification
    ):
        refresh_turn_vectors(
            [memory], reason=f"context memory {memory.pk} changed", also=context_of
        )
    return memory


def memory_supersede(
    *, actor, old: Memory, new: Memory, change: str, reason: str, audit_reason: str
) -> Memory:
    """Mark `old` replaced by `new` (its validity ends where the new one's starts). A statement
    and a derived record (experience, tool trajectory, summary) never replace each other."""
    if not dedup.comparable(new, old):
        raise InvalidInput(
            gettext(
                "A %(kind)s memory cannot replace a %(kind2)s memory: what a run "
                "recorded and what a person stated never supersede each other."
            )
            % {"kind": new.kind, "kind2": old.kind},
            code="derived_memory",
            details={"kind": [f"{new.kind} over {old.kind}"]},
        )
    old = lock(old)
    before = audit_view(old)
    old_status = old.status
    old.status = Memory.Status.SUPERSEDED
    old.superseded_by = new
    ends = max(new.valid_from, old.valid_from + timedelta(microseconds=1))
    old.valid_to = ends if old.valid_to is None or old.valid_to > ends else old.valid_to
    old.version += 1
    old.updated_at = timezone.now()
    old.save(update_fields=["status", "superseded_by", "valid_to", "version", "updated_at"])
    write_version(
        old,
        change=change,
        actor=actor,
        reason=reason,
        old_status=old_status,
        new_status=old.status,
        related=new,
    )
    audit.record(
        actor=actor,
        action="memory.supersede",
        target=old,
        before=before,
        after={**audit_view(old), "superseded_by": new.pk},
        reason=audit_reason,
    )
    return old
