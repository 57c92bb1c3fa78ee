"""Deleting memories (by id, by filter), purging their content, redacting the copies runs hold,
the deletion report, and the retention sweep.

A deletion is verifiable: from the delete on, no read path or index (get, list, search —
vector and lexical —, history, context assembly) returns the memory; its text is redacted from
the runs that carried it (through the `run_copies` port, filled by the agents app), from the
memories derived from runs that quote it (tool trajectories, experiences, tool summaries: their
content, attributes and history, re-indexed and re-embedded), and from the skill drafts,
candidates and proposals that quote it (through the `other_copies` port, filled by the skills
app); the purge that removes its content waits until that redaction is complete (the redaction
needs the text to find it). What was removed and which copies follow their own retention is the
deletion report, kept on the memory's row (`Memory.deletion`, ids and counts only) and returned
by the API; the audit events say the same with ids only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Q, TextField
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast
from django.utils import timezone
from django.utils.translation import gettext
from opentelemetry import trace

from cadre.errors import Conflict, InvalidInput, NotFound
from cadre.governance import audit
from cadre.memory import dedup, selectors
from cadre.memory.models import (
    Kind,
    Memory,
    MemoryEmbedding,
    MemoryTask,
    MemoryVersion,
)
from cadre.memory.services.common import (
    audit_view,
    enqueue,
    enqueue_enrich,
    lock,
    refresh_turn_vectors,
    require_modify,
    require_write,
    write_version,
)
from cadre.memory.text import lexical_document, match_length
from cadre.ports import Registry
from cadre.tenancy.actors import system_actor

tracer = trace.get_tracer(__name__)

# The copies of a memory's text that runs hold, redacted on deletion. The agents app registers
# its redactor ("runs"): `redact_memory(organization_id=, memory_id=, texts=, marker=,
# after_session=, limit=)` returning a batch with `.as_dict()`, and `redaction_pending(...)`.
run_copies: Registry = Registry("memory run copies")

# Carrier sessions redacted in the request that deletes (the rest by the purge task, in
# batches of PURGE_BATCH_SESSIONS); a memory's content is purged once its redaction is done.
INLINE_SESSIONS = 50
PURGE_BATCH_SESSIONS = 200
BUSY_RETRY_SECONDS = 60
# A deletion whose purge has not finished after this long is resumed by the retention sweep.
STALE_DELETION = timedelta(hours=1)
REPORT_IDS = 1000  # ids listed per kind of copy; the counts are always complete

REDACTED_KINDS = ("sessions", "runs", "steps", "events", "waits", "context_records", "summaries")

# Copies of a memory's text outside memory and runs, redacted on deletion. The skills app
# registers its redactor ("skills"): `redact_memory(organization_id=, memory_id=, texts=,
# marker=)` returning {kind: [ids]} of the rows it redacted, and "published_versions": the
# published Hub versions that quote it (immutable: listed among the retained copies).
other_copies: Registry = Registry("memory other copies")

# The memories made from what runs saw (the after-run hook's trajectories and experiences, the
# organizer's tool summaries): they quote a memory a run was given or wrote. Report kinds.
DERIVED_KINDS = {
    Kind.TOOL_TRAJECTORY: "tool_trajectories",
    Kind.EXPERIENCE: "experiences",
    Kind.SUMMARY: "summaries",
}
# A bare text is matched from this length (text.match_length: an ideograph counts three; as in
# the runs' redaction): a two-word memory cannot erase the same two words in every trajectory,
# and a short Chinese fact ("我住在朝阳区") is still found.
MIN_TEXT_MATCH = 12


def deletion_marker(memory: Memory) -> str:
    when = timezone.localtime(memory.deleted_at or timezone.now()).date().isoformat()
    return f"[memory {memory.pk} deleted on {when}]"


# --- the deletion state and report -------------------------------------------------------------


def _start_deletion(memory: Memory, *, embeddings_removed: int) -> None:
    """The deletion record on the row: ids and counts only, never text."""
    source_run = (memory.source_ref or {}).get("run_id")
    memory.deletion = {
        "marker": deletion_marker(memory),
        "deleted_at": memory.deleted_at.isoformat(),
        "embeddings_removed": embeddings_removed,
        "source_run": source_run if isinstance(source_run, int) else None,
        "audit_events": [],
        "task": None,
        "redaction": {
            "status": "pending",
            "cursor": 0,
            "counts": dict.fromkeys(REDACTED_KINDS, 0),
            **{kind: [] for kind in REDACTED_KINDS},
            "deferred_runs": [],
            "sessions_pending": None,
        },
    }


def _redaction_state(memory: Memory) -> dict:
    if not memory.deletion:  # deleted before deletion records existed: start from the top
        _start_deletion(memory, embeddings_removed=0)
    return memory.deletion["redaction"]


# --- derived copies: memories made from runs, skill drafts ---------------------------------------


def text_forms(texts: list[str]) -> list[str]:
    """The forms a text takes in the copies made of it, longest first: as written, with its
    whitespace collapsed (an experience's task line), and JSON-escaped (inside a trajectory's
    quoted arguments or result)."""
    forms: list[str] = []
    for text in texts:
        if not isinstance(text, str) or not text.strip():
            continue
        text = text.strip()
        for form in (text, " ".join(text.split()), json.dumps(text, ensure_ascii=False)[1:-1]):
            if form not in forms:
                forms.append(form)
    return sorted(forms, key=len, reverse=True)


def redact_value(value, forms: list[str], marker: str, patterns=()):
    """`value` (text, or JSON of them) with every form of the text (from MIN_TEXT_MATCH,
    text.match_length) and every match of `patterns` (compiled regexes) replaced by the marker."""
    if isinstance(value, str):
        for form in forms:
            if match_length(form) >= MIN_TEXT_MATCH and form in value:
                value = value.replace(form, marker)
        for pattern in patterns:
            value = pattern.sub(marker, value)
        return value
    if isinstance(value, list):
        return [redact_value(item, forms, marker, patterns) for item in value]
    if isinstance(value, dict):
        return {key: redact_value(item, forms, marker, patterns) for key, item in value.items()}
    return value


def _forms_named(memory_id: int, attributes: dict) -> list[str]:
    """The forms of the text in a tool call that names the memory: a `memory_search` hit
    (`{"id": N, "content"}`) or the `content` argument of the `memory_write` that stored it."""
    result = attributes.get("result")
    if isinstance(result, str):
        try:
            result = json.loads(result)
        except ValueError:  # cut at its length limit: the text match still finds it
            return []
    if not isinstance(result, dict):
        return []
    found = []
    if result.get("memory_id") == memory_id:
        content = (attributes.get("parameters") or {}).get("content")
        if isinstance(content, str):
            found.append(content)
    for entry in result.get("memories") or []:
        named = isinstance(entry, dict) and entry.get("id") == memory_id
        if named and isinstance(entry.get("content"), str):
            found.append(entry["content"])
    return found


def _derived_candidates(memory: Memory):
    return (
        Memory.objects.filter(
            organization_id=memory.organization_id,
            kind__in=list(DERIVED_KINDS),
            purged_at__isnull=True,
        )
        .exclude(pk=memory.pk)
        .annotate(
            attributes_text=Cast("attributes", TextField()),
            result_text=KeyTextTransform("result", "attributes"),
        )
    )


def _redact_derived_memory(row: Memory, forms: list[str], marker: str, reason: str, actor) -> bool:
    """Redact one derived memory: content, attributes and history text; re-indexed (lexical
    now, vectors dropped and re-embedded from the redacted text). False if it held no form."""
    content = redact_value(row.content, forms, marker)
    attributes = redact_value(row.attributes, forms, marker)
    if (content, attributes) == (row.content, row.attributes):
        return False
    row.content, row.attributes = content, attributes
    row.content_hash = dedup.content_hash(content)
    if row.status != Memory.Status.DELETED:  # a deleted memory has no lexical document
        row.search_text = lexical_document(content, attributes)
    row.version += 1
    row.updated_at = timezone.now()
    changed = ["content", "attributes", "content_hash", "search_text", "version", "updated_at"]
    row.save(update_fields=changed)
    fields = ["old_content", "new_content", "old_attributes", "new_attributes"]
    versions = []
    for version in MemoryVersion.objects.filter(memory=row):
        values = [getattr(version, name) for name in fields]
        redacted = [redact_value(value, forms, marker) for value in values]
        if redacted != values:
            for name, value in zip(fields, redacted, strict=True):
                setattr(version, name, value)
            versions.append(version)
    MemoryVersion.objects.bulk_update(versions, fields)
    # Not a correction (the quality figures count those): the same record, a text removed.
    write_version(
        row,
        change=MemoryVersion.Change.STATE_CHANGE,
        actor=actor,
        reason=reason,
        old_status=row.status,
        new_status=row.status,
    )
    # Vectors of the text as it was would still find it by similarity.
    MemoryEmbedding.objects.filter(memory=row).delete()
    if row.status != Memory.Status.DELETED:
        enqueue_enrich(row)
    return True


def _redact_derived(memory: Memory, actor) -> dict:
    """Redact the memory's text from the derived memories of its organization that quote it
    (by exact text, and by the forms found in the tool calls that name it by id), then from
    the copies other apps hold (`other_copies`: skill drafts, candidates, proposals). Returns
    the report part: {"status", "counts": {kind: n}, "copies": {kind: [ids]}}."""
    copies: dict[str, list[int]] = {kind: [] for kind in DERIVED_KINDS.values()}
    published: list[int] = []
    texts = [memory.content] if memory.content else []
    if texts:
        named = _derived_candidates(memory).filter(
            kind=Kind.TOOL_TRAJECTORY,
            result_text__regex=rf'"(memory_)?id": {memory.pk}[,}}]',
        )
        for row in named.only("pk", "attributes"):
            texts += _forms_named(memory.pk, row.attributes or {})
        forms = text_forms(texts)
        matches = Q(pk__in=named.values("pk"))
        for form in forms:
            if match_length(form) >= MIN_TEXT_MATCH:
                escaped = json.dumps(form, ensure_ascii=False)[1:-1]
                matches |= Q(content__contains=form) | Q(attributes_text__contains=escaped)
        # A scan of the organization's derived memories (LIKE): deletions are rare, and a
        # copy may sit in any scope the memory reached (an agent's, a colleague's).
        rows = _derived_candidates(memory).filter(matches).select_for_update(of=("self",))
        marker = memory.deletion["marker"]
        reason = f"redacted: quoted memory {memory.pk}, deleted"
        actor = actor or system_actor(memory.organization, label="memory deletion")
        for row in rows.order_by("pk"):
            if _redact_derived_memory(row, forms, marker, reason, actor):
                copies[DERIVED_KINDS[row.kind]].append(row.pk)
        for _name, redactor in other_copies.items():
            found = redactor.redact_memory(
                organization_id=memory.organization_id,
                memory_id=memory.pk,
                texts=forms,
                marker=marker,
            )
            published += found.pop("published_versions", [])
            for kind, ids in found.items():
                copies[kind] = sorted(set(copies.get(kind, [])) | set(ids))
    return {
        "status": "complete",
        "counts": {kind: len(ids) for kind, ids in copies.items()},
        "copies": {kind: ids[:REPORT_IDS] for kind, ids in copies.items()},
        "published_versions": published[:REPORT_IDS],
    }


def _derived_pending(state: dict) -> bool:
    return (state.get("derived") or {}).get("status") != "complete"


def _advance_redaction(memory: Memory, limit: int, actor=None) -> dict:
    """Redact the derived copies (once), then up to `limit` more carrier sessions; the state
    says whether it is complete."""
    state = _redaction_state(memory)
    if _derived_pending(state):
        state["derived"] = _redact_derived(memory, actor)
    if state["status"] == "complete":
        return state
    redactor = run_copies.get("runs")
    if redactor is None:  # no app records runs: there are no run copies to redact
        state.update(status="complete", sessions_pending=0, deferred_runs=[])
        return state
    texts = [memory.content] if memory.content else []
    batch = redactor.redact_memory(
        organization_id=memory.organization_id,
        memory_id=memory.pk,
        texts=texts,
        marker=memory.deletion["marker"],
        after_session=state["cursor"],
        limit=limit,
    ).as_dict()
    for kind in REDACTED_KINDS:
        new = [pk for pk in batch[kind] if pk not in set(state.get(kind, []))]
        state["counts"][kind] = state["counts"].get(kind, 0) + len(new)
        state[kind] = (state.get(kind, []) + new)[:REPORT_IDS]
    state["cursor"] = batch["cursor"]
    state["deferred_runs"] = batch["deferred_runs"]
    state["sessions_pending"] = redactor.redaction_pending(
        organization_id=memory.organization_id, memory_id=memory.pk, after_session=batch["cursor"]
    )
    state["status"] = "complete" if batch["done"] else "in_progress"
    return state


def _save_deletion(memory: Memory) -> None:
    Memory.objects.filter(pk=memory.pk).update(deletion=memory.deletion)


def _redaction_audit(state: dict) -> dict:
    return {
        "status": state["status"],
        "counts": state["counts"],
        "runs": state["runs"],
        "steps": state["steps"],
        "events": state["events"],
        "deferred_runs": state["deferred_runs"],
        "derived": _derived_report(state),
    }


def _derived_report(state: dict) -> dict:
    derived = state.get("derived") or {}
    return {
        "status": derived.get("status", "pending"),
        "counts": derived.get("counts", {}),
        "copies": derived.get("copies", {}),
    }


RETAINED_COPIES = (
    {
        "copy": "audit_events",
        "holds": "ids, scope, kind, status, version, SHA-256 and length of the content; "
        "never its text",
        "retention": "the audit log's: hash-chained and never rewritten",
    },
    {
        "copy": "audit_exports",
        "holds": "audit events only (ids, never the memory's text)",
        "retention": "bundles already written under DATA_DIR/exports and copies downloaded "
        "from them are not rewritten; they follow the retention of wherever they were kept",
    },
    {
        "copy": "backups",
        "holds": "the memory as it was when the backup was taken",
        "retention": "database backups made before the purge keep it until they age out "
        "under your backup rotation; Cadre does not rewrite backups",
    },
    {
        "copy": "delivered_messages",
        "holds": "replies and agent messages already delivered that quoted it",
        "retention": "the IM platform's (Slack, Feishu/Lark, WeCom, DingTalk) or the "
        "recipient's; Cadre's own record of the run is redacted",
    },
    {
        "copy": "model_provider",
        "holds": "model calls already sent to an external model API",
        "retention": "the provider's data-retention terms; the offline provider keeps nothing",
    },
    {
        "copy": "published_skills",
        "holds": "published Hub skill versions whose files quote it (the candidate's own "
        "copy is redacted)",
        "retention": "a published version is immutable: deprecate or yank it in the Hub",
    },
    {
        "copy": "source_message",
        "holds": "the message the memory was learned from, as the person wrote it",
        "retention": "the session's: redaction removes the copies the memory made, not what "
        "a person said; delete the session to remove it",
    },
)


def deletion_report(memory: Memory, task: MemoryTask | None = None) -> dict:
    """What deleting this memory removed and which copies follow their own retention."""
    deletion = memory.deletion or {}
    state = deletion.get("redaction") or {}
    task_id = task.pk if task is not None else deletion.get("task")
    if task is None and task_id:
        task = MemoryTask.objects.filter(pk=task_id).first()
    retained = []
    for copy in RETAINED_COPIES:
        entry = dict(copy)
        if copy["copy"] == "audit_events":
            entry["ids"] = deletion.get("audit_events", [])
        if copy["copy"] == "source_message":
            if not deletion.get("source_run"):
                continue
            entry["runs"] = [deletion["source_run"]]
        if copy["copy"] == "published_skills":
            entry["ids"] = (state.get("derived") or {}).get("published_versions", [])
            if not entry["ids"]:
                continue
        retained.append(entry)
    purged = memory.purged_at is not None
    return {
        "memory": memory.pk,
        "predecessors": deletion.get("predecessors", []),
        "deleted_with": deletion.get("deleted_with"),
        "status": "purged" if purged else memory.status,
        "marker": deletion.get("marker", deletion_marker(memory)),
        "deleted_at": memory.deleted_at,
        "purged_at": memory.purged_at,
        "removed": {
            "read_paths": ["get", "list", "search", "history", "context_assembly", "export"],
            "vector_index": {"embeddings_removed": deletion.get("embeddings_removed", 0)},
            "lexical_index": True,
            "content": "purged" if purged else "purge_pending",
        },
        "redaction": {
            "status": state.get("status", "pending"),
            "counts": state.get("counts", {}),
            **{kind: state.get(kind, []) for kind in REDACTED_KINDS},
            "deferred_runs": state.get("deferred_runs", []),
            "sessions_pending": state.get("sessions_pending"),
            "derived": _derived_report(state),
        },
        "task": {"id": task.pk, "kind": task.kind, "status": task.status} if task else None,
        "retained": retained,
    }


# --- delete --------------------------------------------------------------------------------


def soft_delete(actor, memory: Memory, reason: str) -> Memory:
    old_status = memory.status
    now = timezone.now()
    memory.status = Memory.Status.DELETED
    memory.deleted_at = now
    memory.version += 1
    memory.updated_at = now
    # The lexical document goes now too (the content stays until the redaction that needs it
    # is done): neither index can find a deleted memory.
    memory.search_text = ""
    write_version(
        memory,
        change=MemoryVersion.Change.DELETION,
        actor=actor,
        reason=reason,
        old_status=old_status,
        new_status=memory.status,
    )
    # Vectors go now, not at purge time: nothing may find a deleted memory by similarity.
    embeddings_removed, _ = MemoryEmbedding.objects.filter(memory=memory).delete()
    _start_deletion(memory, embeddings_removed=embeddings_removed)
    memory.save(
        update_fields=["status", "deleted_at", "version", "updated_at", "search_text", "deletion"]
    )
    # The next turn's vector embeds this one's words as context: recomputed without them.
    refresh_turn_vectors([memory], reason=f"context memory {memory.pk} deleted")
    return memory


def enqueue_purge(organization, ids: list[int], origin: str) -> MemoryTask | None:
    if not ids:
        return None
    return enqueue(
        MemoryTask.Kind.PURGE,
        organization=organization,
        memory=Memory.objects.get(pk=ids[0]) if len(ids) == 1 else None,
        key=f"purge:{origin}:{min(ids)}-{max(ids)}:{len(ids)}:{timezone.now().timestamp()}",
        params={"memory_ids": ids},
    )


def _refuse_deleted(actor, memory: Memory, done: str = "deleted") -> None:
    """A second delete (or purge): a clear conflict for whoever may change the memory, else
    404; nothing is changed either way."""
    if not selectors.can_modify(actor, memory):
        raise NotFound(gettext("Memory not found."))
    when = memory.purged_at if done == "purged" else memory.deleted_at
    message = (
        gettext(
            "Memory %(pk)s was already purged on %(date)s; its deletion report "
            "is at /api/v1/memories/%(pk)s/deletion/."
        )
        if done == "purged"
        else gettext(
            "Memory %(pk)s was already deleted on %(date)s; its deletion report "
            "is at /api/v1/memories/%(pk)s/deletion/."
        )
    )
    raise Conflict(
        message % {"pk": memory.pk, "date": timezone.localtime(when).date()},
        code=f"already_{done}",
        details={"memory": memory.pk, "purged": memory.purged_at is not None},
    )


@transaction.atomic
@tracer.start_as_current_span("memory.delete")
def memory_delete(*, actor, memory: Memory, reason: str = "") -> Memory:
    """Soft delete (hidden from every read path and both indexes at once), its text redacted
    from the runs that carried it (the first INLINE_SESSIONS sessions now, the rest by the
    purge task), then the purge task removes its content. `memory.deletion` is the report."""
    require_write(actor)
    memory = lock(memory)
    if memory.status == Memory.Status.DELETED:
        _refuse_deleted(actor, memory)
    require_modify(actor, memory)
    predecessors = _predecessors(actor, memory)
    for row in [memory, *predecessors]:
        before = audit_view(row)
        soft_delete(actor, row, reason or "deleted")
        state = _advance_redaction(row, INLINE_SESSIONS, actor)
        changes = {
            "embeddings_removed": row.deletion["embeddings_removed"],
            "redaction": _redaction_audit(state),
        }
        if row is memory:
            changes["predecessors"] = [p.pk for p in predecessors]
        else:
            changes["with"] = memory.pk
        event = audit.record(
            actor=actor,
            action="memory.delete",
            target=row,
            before=before,
            after=audit_view(row),
            changes=changes,
            reason="deleted by request" if not reason else "deleted",
        )
        row.deletion["audit_events"].append(event.pk)
    ids = [memory.pk, *(p.pk for p in predecessors)]
    task = enqueue_purge(memory.organization, ids, f"delete:{memory.pk}")
    for row in [memory, *predecessors]:
        row.deletion["task"] = task.pk if task else None
        if row is memory:
            row.deletion["predecessors"] = ids[1:]
        else:
            row.deletion["deleted_with"] = memory.pk
        _save_deletion(row)
    return memory


def _predecessors(actor, memory: Memory) -> list[Memory]:
    """The earlier forms of a memory: what it replaced (a correction supersedes the statement it
    corrects, a merge its duplicate) and what those replaced, which the actor may change. A
    person deleting what they said deletes what it was before too (locked, oldest last)."""
    found: list[Memory] = []
    seen, frontier = {memory.pk}, [memory.pk]
    while frontier:
        rows = list(
            Memory.objects.select_for_update()
            .filter(superseded_by_id__in=frontier)
            .exclude(status=Memory.Status.DELETED)
            .exclude(pk__in=seen)
            .order_by("-pk")
        )
        rows = [row for row in rows if selectors.can_modify(actor, row)]
        seen |= {row.pk for row in rows}
        found += rows
        frontier = [row.pk for row in rows]
    return found


@transaction.atomic
@tracer.start_as_current_span("memory.purge_now")
def memory_purge_now(*, actor, memory: Memory, reason: str = "") -> Memory:
    """Delete (if it is not yet) and purge at once: redaction first, then the content.

    When more carrier sessions remain than one request handles, the purge task finishes the
    redaction and the purge."""
    require_write(actor)
    memory = lock(memory)
    if memory.purged_at is not None:
        _refuse_deleted(actor, memory, done="purged")
    if memory.status != Memory.Status.DELETED:
        memory = memory_delete(actor=actor, memory=memory, reason=reason or "purged by request")
    elif not selectors.can_modify(actor, memory):
        raise NotFound(gettext("Memory not found."))
    memory_purge(
        organization=memory.organization,
        memory_ids=[memory.pk],
        actor=actor,
        reason=reason or "purged by request",
    )
    # Not purged yet: more sessions than one request handles, or a run in progress; the
    # delete's purge task finishes the redaction, then purges (the report says so).
    memory.refresh_from_db()
    return memory


@dataclass
class BulkDeleteResult:
    deleted: list[int]
    skipped: int
    task: MemoryTask | None


@transaction.atomic
@tracer.start_as_current_span("memory.delete_by_filter")
def memory_delete_by_filter(
    *,
    actor,
    scope_keys: list[str] | None = None,
    tags: list[str] | None = None,
    kinds: list[str] | None = None,
    since=None,
    until=None,
    conversation_id: str | None = None,
    reason: str = "",
) -> BulkDeleteResult:
    """Soft-delete every memory the actor may change that matches the filter (at least one
    criterion), in one transaction and one audit event listing the ids; their run copies are
    redacted by the purge task, before it purges."""
    require_write(actor)
    if not any([scope_keys, tags, kinds, since, until, conversation_id]):
        raise InvalidInput(
            gettext(
                "Give at least one filter (scope, tags, kinds, since, until, conversation_id)."
            ),
            details={"filter": ["Required."]},
        )
    queryset = selectors.memory_list(
        actor,
        scope_keys=scope_keys,
        kinds=kinds,
        tags=tags,
        since=since,
        until=until,
        conversation_id=conversation_id,
        statuses=[Memory.Status.ACTIVE, Memory.Status.SUPERSEDED, Memory.Status.ARCHIVED],
    ).select_for_update()
    deleted, skipped = [], 0
    for memory in queryset.order_by("pk"):
        if not selectors.can_modify(actor, memory):
            skipped += 1
            continue
        soft_delete(actor, memory, reason or "deleted by filter")
        deleted.append(memory.pk)
    event = None
    if deleted:
        event = audit.record(
            actor=actor,
            action="memory.delete_by_filter",
            target=("memory", "filter", f"{len(deleted)} memories"),
            changes={
                "memory_ids": deleted,
                "count": len(deleted),
                "skipped": skipped,
                "filter": {
                    "scope_keys": scope_keys or [],
                    "tags_count": len(tags or []),
                    "kinds": kinds or [],
                    "since": since,
                    "until": until,
                },
            },
            reason="delete by filter",
        )
    task = enqueue_purge(actor.organization, deleted, "filter")
    for memory in Memory.objects.filter(pk__in=deleted):
        memory.deletion["audit_events"].append(event.pk)
        memory.deletion["task"] = task.pk if task else None
        _save_deletion(memory)
    return BulkDeleteResult(deleted=deleted, skipped=skipped, task=task)


# --- purge ---------------------------------------------------------------------------------


@transaction.atomic
@tracer.start_as_current_span("memory.purge")
def memory_purge(
    *,
    organization,
    memory_ids: list[int] | None = None,
    actor=None,
    reason: str = "purge",
    redaction_sessions: int | None = None,
) -> dict:
    """Remove the content of deleted memories for good: text, search document, attributes,
    tags, hash, history text and vectors — each once its run copies are redacted (up to
    `redaction_sessions` carrier sessions, PURGE_BATCH_SESSIONS by default, in this call; a
    memory with more, or with a run still in progress, is `deferred` and purged later). The row (id,
    scope, kind, dates, deletion report) stays so records that point at it still resolve.
    Idempotent. Audited with ids, never content."""
    actor = actor or system_actor(organization, label="memory purge")
    queryset = Memory.objects.select_for_update().filter(
        organization=organization, status=Memory.Status.DELETED, purged_at__isnull=True
    )
    if memory_ids is not None:
        queryset = queryset.filter(pk__in=memory_ids)
    rows = list(queryset.order_by("pk"))
    if not rows:
        return {"purged": [], "embeddings_removed": 0, "deferred": [], "retry_in": None}
    ready, deferred, busy = [], [], False
    budget = PURGE_BATCH_SESSIONS if redaction_sessions is None else redaction_sessions
    for row in rows:
        state = _redaction_state(row)
        before = state["counts"]["sessions"]
        if (state["status"] != "complete" or _derived_pending(state)) and budget > 0:
            state = _advance_redaction(row, budget, actor)
            budget -= max(1, state["counts"]["sessions"] - before)
        _save_deletion(row)
        if state["status"] == "complete" and not _derived_pending(state):
            ready.append(row)
        else:
            deferred.append(row.pk)
            busy = busy or bool(state["deferred_runs"])
    result = {
        "purged": [row.pk for row in ready],
        "embeddings_removed": 0,
        "deferred": deferred,
        # A run in progress: come back in a minute; only the budget ran out: at once.
        "retry_in": (BUSY_RETRY_SECONDS if busy else 0) if deferred else None,
    }
    if not ready:
        return result
    ids = result["purged"]
    embeddings_removed, _ = MemoryEmbedding.objects.filter(memory_id__in=ids).delete()
    MemoryVersion.objects.filter(memory_id__in=ids).update(
        old_content="", new_content="", old_attributes={}, new_attributes={}, reason="[purged]"
    )
    now = timezone.now()
    Memory.objects.filter(pk__in=ids).update(
        content="",
        search_text="",
        attributes={},
        tags=[],
        content_hash="",
        purged_at=now,
        updated_at=now,
        provenance=[],
        source_ref={},
    )
    event = audit.record(
        actor=actor,
        action="memory.purge",
        organization=organization,
        target=("memory", ids[0] if len(ids) == 1 else "batch", f"{len(ids)} memories"),
        changes={
            "memory_ids": ids,
            "count": len(ids),
            "embeddings_removed": embeddings_removed,
            "removed": [
                "content",
                "search_text",
                "attributes",
                "tags",
                "content_hash",
                "provenance",
                "source_ref",
                "history_text",
                "embeddings",
            ],
            "redaction": {
                str(row.pk): row.deletion["redaction"]["counts"] for row in ready[:REPORT_IDS]
            },
            # The derived memories and skill copies redacted (by filter deletions and the
            # retention sweep, here; by a delete, in its own event too).
            "derived": {
                str(row.pk): _derived_report(row.deletion["redaction"])
                for row in ready[:REPORT_IDS]
            },
        },
        reason=reason,
    )
    for row in ready:
        row.deletion["audit_events"].append(event.pk)
        row.deletion["embeddings_removed"] = (
            row.deletion.get("embeddings_removed", 0) + embeddings_removed
            if len(ready) == 1
            else row.deletion.get("embeddings_removed", 0)
        )
        _save_deletion(row)
    result["embeddings_removed"] = embeddings_removed
    return result


# --- retention ------------------------------------------------------------------------------


def memory_retention_sweep(*, now: datetime | None = None, batch: int = 500) -> dict:
    """Delete and purge every memory past its `expires_at`, per organization, in batches; and
    resume deletions whose purge has not finished within STALE_DELETION (a lost task)."""
    now = now or timezone.now()
    totals: dict[str, int] = {}
    expired_q = Q(expires_at__lte=now) & (
        ~Q(status=Memory.Status.DELETED) | Q(purged_at__isnull=True)
    )
    stale_q = Q(
        status=Memory.Status.DELETED, purged_at__isnull=True, deleted_at__lte=now - STALE_DELETION
    )
    candidates = Memory.objects.filter(expired_q | stale_q)
    # order_by(): the model's ordering would join the DISTINCT (an organization per memory).
    organization_ids = list(
        candidates.values_list("organization_id", flat=True).order_by().distinct()
    )
    for organization_id in organization_ids:
        after = 0  # rows deferred by their redaction are not taken again in this sweep
        while True:
            with transaction.atomic():
                rows = list(
                    candidates.filter(organization_id=organization_id, pk__gt=after)
                    .select_for_update(skip_locked=True)
                    .select_related("organization")
                    .order_by("pk")[:batch]
                )
                if not rows:
                    break
                after = rows[-1].pk
                organization = rows[0].organization
                actor = system_actor(organization, label="memory retention")
                expired = [row for row in rows if row.expires_at and row.expires_at <= now]
                for memory in expired:
                    if memory.status != Memory.Status.DELETED:
                        soft_delete(actor, memory, "retention: expired")
                purged = []
                for group, reason in (
                    (expired, "retention: expired"),
                    ([row for row in rows if row not in expired], "purge after delete (resumed)"),
                ):
                    if group:
                        purged += memory_purge(
                            organization=organization,
                            memory_ids=[row.pk for row in group],
                            actor=actor,
                            reason=reason,
                        )["purged"]
                totals[str(organization_id)] = totals.get(str(organization_id), 0) + len(purged)
                if len(rows) < batch:
                    break
    return {"purged_by_organization": totals, "purged": sum(totals.values())}
