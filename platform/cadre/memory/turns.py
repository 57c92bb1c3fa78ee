"""Conversation turns stored as memories: the texts their vectors embed ("contextual" views of
the turn), and which turns' vectors a change to one turn makes stale.

A turn memory is one a writer recorded as a turn of a conversation: a `conversation_id` and an
integer `attributes["turn"]` (its position in that conversation), of a stated kind (never an
experience, tool trajectory or summary) and not extracted from messages (an extracted fact
keeps a plain vector). A reply ("Yes, in May") says little alone; the turns it answers say what
it is about. So a turn's vector is the mean of the vectors of three views of it (`VIEWS`): the
turn alone, with the turn before it, and with the two before it (the memory's text, shown and
searched lexically, is unchanged). The mean is not normalized: a turn whose views agree (it
says what it is about, or its conversation stays on one topic) keeps a longer vector, and the
vector side ranks by inner product (search.vector_candidates), so such a turn ranks above one
that matches a query in one view only. On the LoCoMo development file vector recall@10 went
0.547 (alone) -> 0.614 (with the previous turn) -> 0.685 (the three views; see
docs/memory-retrieval.md).

The context comes only from the same owner: the same organization, scope, subject and
conversation, a live memory (not deleted or purged) that models may be sent (verified), and
its stored text (secrets already redacted by the memory gate when it was written) — never
another person's or another agent's turn. Because a turn's vector then carries its neighbours'
words, whatever changes or removes a turn (edit, delete, erasure, purge, review) also drops the
vectors of the turns that embed it and queues their re-embedding, in the same transaction
(`services.common.refresh_turn_vectors`): the queued task is a durable `MemoryTask`, so a crash
before it runs leaves those turns without a vector (found lexically, re-embedded by the task's
retry or a re-embed), never with one holding removed words.

A vector is computed outside any transaction (the model takes its time), so the writer and a
change can cross: a neighbour deleted while the turn's vector is being computed. Both take the
conversation's lock (`lock_conversations`, a transaction-scoped advisory lock): the change
before it drops the vectors that embed it, the writer before it reads the turns again and
inserts (embeddings.embed_memories). Whichever comes second sees the other's work: the change
drops the vector just written, or the writer finds the views changed and writes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from django.db import connection
from django.db.models import Q

from cadre.memory.models import DERIVED_KINDS, Memory, Verification

# The views of a turn whose vectors' mean is its vector: how many turns before it each embeds
# with it (tuned on the LoCoMo development file: docs/memory-retrieval.md). Turns after a turn
# (CONTEXT_AFTER, every view) are for experiments: on that file they did not help. Changing
# either changes every turn's vector: re-embed.
VIEWS = (0, 1, 2)
CONTEXT_BEFORE = max(VIEWS)
CONTEXT_AFTER = 0
# A neighbour's text is cut to this many characters: a pasted document before a short reply
# would otherwise drown the reply's own words (and E5 reads 512 tokens at a time).
MAX_CONTEXT_CHARS = 600
_LOCK_NAMESPACE = 0x7E45  # first key of the advisory lock pair: "turn vectors"


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


def embedding_views(memories: Sequence[Memory]) -> list[tuple[str, ...]]:
    """The texts embedded for each memory, whose vectors' mean is its vector: its content;
    for a turn memory, one text per view in `VIEWS` (the usable turns up to that many before
    it, each clipped, then the turn, then CONTEXT_AFTER turns after it, in conversation order;
    a view that reaches past the conversation's start repeats a shorter one). The same function
    serves writes, refreshes and re-embeds, so a re-embed under another model computes the
    same texts."""
    wanted: dict[tuple, set[int]] = {}
    for memory in memories:
        turn = turn_position(memory)
        if turn is None:
            continue
        offsets = [*range(-CONTEXT_BEFORE, 0), *range(1, CONTEXT_AFTER + 1)]
        wanted.setdefault(_owner(memory), set()).update(turn + offset for offset in offsets)
    found = _turns_at(wanted)
    views: list[tuple[str, ...]] = []
    for memory in memories:
        turn = turn_position(memory)
        if turn is None:
            views.append((memory.content,))
            continue
        neighbours = found.get(_owner(memory), {})
        after = _context(neighbours, memory, turn, range(1, CONTEXT_AFTER + 1))
        views.append(
            tuple(
                "\n".join(
                    [*_context(neighbours, memory, turn, range(-window, 0)), memory.content, *after]
                )
                for window in VIEWS
            )
        )
    return views


def _context(neighbours: dict[int, Memory], memory: Memory, turn: int, offsets) -> list[str]:
    """The clipped texts of the usable turns at these offsets from `turn`, in order."""
    rows = [neighbours.get(turn + offset) for offset in offsets]
    return [
        _clip(row.content)
        for row in rows
        if row is not None and row.pk != memory.pk and _usable_as_context(row)
    ]


def lock_conversations(memories: Iterable[Memory]) -> None:
    """Hold the locks of the conversations these turns belong to until the transaction ends
    (one per owner and conversation, taken in a fixed order; other memories take none)."""
    keys = sorted({":".join(map(str, _owner(m))) for m in memories if turn_position(m) is not None})
    if not keys:
        return
    with connection.cursor() as cursor:
        for key in keys:
            cursor.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", [_LOCK_NAMESPACE, key])


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
