"""Conversation turns stored as memories: the text their vectors embed (the turn with the turn
before it, "contextual embedding"), and which turns' vectors a change to one turn makes stale.

A turn memory is one a writer recorded as a turn of a conversation: a `conversation_id` and an
integer `attributes["turn"]` (its position in that conversation), of a stated kind (never an
experience, tool trajectory or summary) and not extracted from messages (an extracted fact
keeps a plain vector). A reply ("Yes, in May") says little alone; the turn it answers says what
it is about, so a turn's vector embeds the previous turn's text with its own (the memory's text,
shown and searched lexically, is unchanged): on the LoCoMo development file this lifts vector
recall@10 from 0.547 to 0.614 and hybrid from 0.754 to 0.776 (docs/memory-retrieval.md).

The context comes only from the same owner: the same organization, scope, subject and
conversation, a live memory (not deleted or purged) that models may be sent (verified), and
its stored text (secrets already redacted by the memory gate when it was written) — never
another person's or another agent's turn. Because a turn's vector then carries its neighbour's
words, whatever changes or removes a turn (edit, delete, erasure, purge, review) also drops the
vectors of the turns that embed it and queues their re-embedding, in the same transaction
(`services.common.refresh_turn_vectors`): the queued task is a durable `MemoryTask`, so a crash
before it runs leaves those turns without a vector (found lexically, re-embedded by the task's
retry or a re-embed), never with one holding removed words.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from django.db.models import Q

from cadre.memory.models import DERIVED_KINDS, Memory, Verification

# Turns before / after a turn that its vector embeds with it (tuned on the LoCoMo development
# file: docs/memory-retrieval.md). Changing them changes every turn's vector: re-embed.
CONTEXT_BEFORE = 1
CONTEXT_AFTER = 0
# A neighbour's text is cut to this many characters: a pasted document before a short reply
# would otherwise drown the reply's own words (and E5 reads 512 tokens at a time).
MAX_CONTEXT_CHARS = 600


def turn_position(memory: Memory) -> int | None:
    """The memory's position in its conversation when it is a turn memory, else None."""
    if not memory.conversation_id or memory.kind in DERIVED_KINDS:
        return None
    attributes = memory.attributes or {}
    if "extracted_by" in attributes:
        return None
    value = attributes.get("turn")
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def _owner(memory: Memory) -> tuple:
    return (memory.organization_id, memory.scope_key, memory.subject_id, memory.conversation_id)


def _usable_as_context(memory: Memory) -> bool:
    return (
        memory.deleted_at is None
        and memory.purged_at is None
        and memory.status != Memory.Status.DELETED
        and memory.verification == Verification.VERIFIED
        and bool(memory.content)
    )


def _owners_condition(owners: Iterable[tuple]) -> Q:
    condition = Q()
    for organization_id, scope_key, subject_id, conversation_id in owners:
        condition |= Q(
            organization_id=organization_id,
            scope_key=scope_key,
            conversation_id=conversation_id,
            **(
                {"subject_id": subject_id}
                if subject_id is not None
                else {"subject_id__isnull": True}
            ),
        )
    return condition


def _turns_at(wanted: dict[tuple, set[int]]) -> dict[tuple, dict[int, Memory]]:
    """The turn memories at the wanted positions of each owner's conversation (one query)."""
    if not wanted:
        return {}
    positions = sorted({turn for turns in wanted.values() for turn in turns})
    rows = Memory.objects.filter(
        _owners_condition(wanted), attributes__turn__in=positions
    ).order_by("pk")
    found: dict[tuple, dict[int, Memory]] = {}
    for row in rows:
        turn = turn_position(row)
        owner = _owner(row)
        if turn is None or turn not in wanted.get(owner, ()):
            continue
        current = found.setdefault(owner, {}).get(turn)
        # Two memories at one position (a turn written twice): the active one, else the first.
        if current is None or (
            current.status != Memory.Status.ACTIVE and row.status == Memory.Status.ACTIVE
        ):
            found[owner][turn] = row
    return found


def _clip(text: str) -> str:
    text = text.strip()
    return text if len(text) <= MAX_CONTEXT_CHARS else text[:MAX_CONTEXT_CHARS].rstrip() + " …"


def embedding_texts(memories: Sequence[Memory]) -> list[str]:
    """What is embedded for each memory: its content; for a turn memory, the usable turns
    around it (CONTEXT_BEFORE before, CONTEXT_AFTER after, each clipped) with it, in
    conversation order. The same function serves writes, refreshes and re-embeds, so a
    re-embed under another model computes the same texts."""
    wanted: dict[tuple, set[int]] = {}
    for memory in memories:
        turn = turn_position(memory)
        if turn is None:
            continue
        offsets = [*range(-CONTEXT_BEFORE, 0), *range(1, CONTEXT_AFTER + 1)]
        wanted.setdefault(_owner(memory), set()).update(turn + offset for offset in offsets)
    found = _turns_at(wanted)
    texts = []
    for memory in memories:
        turn = turn_position(memory)
        if turn is None:
            texts.append(memory.content)
            continue
        neighbours = found.get(_owner(memory), {})
        before = [neighbours.get(turn - k) for k in range(CONTEXT_BEFORE, 0, -1)]
        after = [neighbours.get(turn + k) for k in range(1, CONTEXT_AFTER + 1)]
        parts = [
            _clip(row.content)
            for row in before
            if row is not None and row.pk != memory.pk and _usable_as_context(row)
        ]
        parts.append(memory.content)
        parts += [
            _clip(row.content)
            for row in after
            if row is not None and row.pk != memory.pk and _usable_as_context(row)
        ]
        texts.append("\n".join(parts))
    return texts


def dependents(memories: Iterable[Memory]) -> list[Memory]:
    """The turn memories whose vectors embed one of `memories` (as they are now): the turns
    CONTEXT_BEFORE after and CONTEXT_AFTER before each, same owner and conversation."""
    wanted: dict[tuple, set[int]] = {}
    sources: set[int] = set()
    for memory in memories:
        turn = turn_position(memory)
        if turn is None:
            continue
        sources.add(memory.pk)
        offsets = [*range(1, CONTEXT_BEFORE + 1), *range(-CONTEXT_AFTER, 0)]
        wanted.setdefault(_owner(memory), set()).update(turn + offset for offset in offsets)
    rows = [
        row
        for turns in _turns_at(wanted).values()
        for row in turns.values()
        if row.pk not in sources
        and row.deleted_at is None
        and row.purged_at is None
        and row.status != Memory.Status.DELETED
    ]
    return sorted(rows, key=lambda row: row.pk)
