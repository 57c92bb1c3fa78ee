"""The dedup funnel's parts: content normalization and hashing, near-duplicate candidates,
and the judges that decide duplicate / update / new (rules by default, a model if configured).

Funnel, within one scope (services.memory_dedup runs it):
1. exact — SHA-256 of the normalized content equals an active memory's (done at write time);
2. near — cosine similarity ≥ NEAR_THRESHOLD among the top NEAR_CANDIDATES active memories of
   the same scope under the active embedding model;
3. judge — memory's model (`extraction.memory_model`) or the rule judge decides.

A statement and a derived record (experience, tool trajectory, summary) are never candidates
of each other: what a run did is not what a person said (`comparable_kinds`).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass
from typing import Protocol

from cadre.llm import ModelProvider, ProviderError, chat_json
from cadre.memory.extraction import charged, memory_model
from cadre.memory.models import (
    DERIVED_KINDS,
    STATEMENT_KINDS,
    Memory,
    MemoryEmbedding,
    SourceKind,
)
from cadre.memory.text import STOP_WORDS

NEAR_THRESHOLD = 0.75  # MemOS local plugin: candidates at cosine >= 0.75 go to the judge
NEAR_CANDIDATES = 5
DUPLICATE_COSINE = 0.92  # MemOS server's similarity dedup threshold
UPDATE_OVERLAP = 0.5  # share of the smaller side's words: "same subject, other value"

DUPLICATE = "duplicate"
UPDATE = "update"
NEW = "new"

# A user statement outranks a tool result, which outranks a model inference. Imports count as
# what a person stated; system-written items as tool results.
AUTHORITY = {
    SourceKind.USER_STATEMENT: 3,
    SourceKind.IMPORT: 3,
    SourceKind.TOOL_RESULT: 2,
    SourceKind.SYSTEM: 2,
    SourceKind.MODEL_INFERENCE: 1,
}

_SPACE = re.compile(r"\s+")
_TRAILING = re.compile(r"[\s.。!！?？;；,，、]+$")
_TOKEN = re.compile(r"[\u3400-\u9fff]|[^\W_\u3400-\u9fff]+")


def normalize_content(text: str) -> str:
    """NFKC, case-folded, whitespace collapsed, trailing punctuation dropped."""
    text = unicodedata.normalize("NFKC", text or "").casefold()
    text = _SPACE.sub(" ", text).strip()
    return _TRAILING.sub("", text)


def content_hash(text: str) -> str:
    return hashlib.sha256(normalize_content(text).encode("utf-8")).hexdigest()


def _tokens(text: str) -> set[str]:
    """Words for overlap measures; each CJK character counts as one (no segmenter needed)."""
    return set(_TOKEN.findall(normalize_content(text)))


def jaccard(a: str, b: str) -> float:
    left, right = _tokens(a), _tokens(b)
    if not left or not right:
        return 0.0
    return len(left & right) / len(left | right)


def overlap(a: str, b: str) -> float:
    left, right = _tokens(a), _tokens(b)
    if not left or not right:
        return 0.0
    return len(left & right) / min(len(left), len(right))


def authority(source_kind: str) -> int:
    return AUTHORITY.get(source_kind, 1)


def outranks(new: Memory, old: Memory) -> bool:
    """Does `new` replace `old`? Higher authority wins; within one authority, the newer."""
    if authority(new.source_kind) != authority(old.source_kind):
        return authority(new.source_kind) > authority(old.source_kind)
    return new.observed_at >= old.observed_at


def comparable_kinds(kind: str) -> list[str]:
    """The kinds a memory of `kind` may be a duplicate or an update of: a statement only of
    statements, a derived record (an experience, a tool call, a summary) only of its own kind.
    A run's record never absorbs, replaces or archives what a person stated, nor the reverse."""
    if kind in DERIVED_KINDS:
        return [str(kind)]
    return [str(other) for other in STATEMENT_KINDS]


def comparable(memory: Memory, other: Memory) -> bool:
    """May one of these two merge into, update or supersede the other?"""
    return str(other.kind) in comparable_kinds(memory.kind)


@dataclass
class Candidate:
    memory: Memory
    similarity: float


@dataclass
class Decision:
    decision: str  # duplicate | update | new
    target: Memory | None
    reason: str
    judge: str
    similarity: float | None = None

    def as_dict(self) -> dict:
        return {
            "decision": self.decision,
            "target_id": self.target.pk if self.target is not None else None,
            "judge": self.judge,
            "similarity": round(self.similarity, 4) if self.similarity is not None else None,
            "reason": self.reason,
        }


def near_candidates(
    memory: Memory,
    vector: list[float],
    model,
    *,
    threshold: float = NEAR_THRESHOLD,
    limit: int = NEAR_CANDIDATES,
) -> list[Candidate]:
    """Active memories of the same scope whose vector is within `threshold` cosine of `vector`,
    of a kind it may merge with (`comparable_kinds`: statements with statements only).

    Exact distances over the scope's rows: a scope holds few enough memories that an index
    scan (whose post-filtering loses rows, see REFERENCE) would only cost recall here.
    """
    from pgvector.django import CosineDistance

    rows = (
        MemoryEmbedding.objects.filter(
            model=model,
            memory__organization_id=memory.organization_id,
            memory__scope_key=memory.scope_key,
            memory__status=Memory.Status.ACTIVE,
            memory__kind__in=comparable_kinds(memory.kind),
        )
        .exclude(memory_id=memory.pk)
        .annotate(distance=CosineDistance("embedding", vector))
        .order_by("distance")
        .select_related("memory")[:limit]
    )
    found = []
    for row in rows:
        similarity = 1.0 - float(row.distance)
        if similarity >= threshold:
            found.append(Candidate(memory=row.memory, similarity=similarity))
    return found


class Judge(Protocol):
    name: str

    def judge(self, memory: Memory, candidates: list[Candidate]) -> Decision: ...


_LATIN_WORD = re.compile(r"[^\W_\u3400-\u9fff]+")
_CJK_CHAR = re.compile(r"[\u3400-\u9fff]")


def _stem(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def content_words(text: str) -> set[str]:
    """Words that carry meaning: stop words dropped, plurals folded, CJK per character."""
    words = set()
    for token in _TOKEN.findall(normalize_content(text)):
        if _CJK_CHAR.fullmatch(token):
            if token not in STOP_WORDS:
                words.add(token)
        elif token in NEGATIONS or (
            token not in STOP_WORDS and (len(token) > 1 or token.isdigit())
        ):
            words.add(_stem(token))
    return words


NEGATIONS = frozenset(
    {
        "not",
        "no",
        "never",
        "none",
        "nor",
        "cannot",
        "without",
        "don",
        "doesn",
        "didn",
        "isn",
        "aren",
        "wasn",
        "weren",
        "won",
        "shouldn",
        "mustn",
        "stop",
        "stopped",
    }
)


def value_words(text: str) -> set[str]:
    """Words that name a value: numbers, names (capitalized mid-sentence), CJK characters.
    Embeddings barely separate "budget is 2 million" from "budget is 3 million" (cosine 0.95
    with all-MiniLM-L6-v2), so a difference in these words means "update", never "duplicate".
    Negations count too: "I like tea" / "I don't like tea" is not a duplicate."""
    values = set()
    # In ALL-CAPS text capitalization says nothing: only numbers and negations count there.
    shouting = (text or "").isupper()
    for match in _LATIN_WORD.finditer(text or ""):
        word = match.group(0)
        folded = unicodedata.normalize("NFKC", word).casefold()
        if (
            any(ch.isdigit() for ch in word)
            or (not shouting and match.start() > 0 and word[0].isupper())
            or folded in NEGATIONS
        ):
            values.add(_stem(folded))
    values |= set(_CJK_CHAR.findall(text or ""))
    return values


def value_changes(new_text: str, old_text: str) -> tuple[bool, bool]:
    """(values changed, subject substituted) between two statements.

    A number or a negation on one side only is a changed value ("budget is 2 million" /
    "3 million"). A name on each side that the other lacks ("Li Wei sends the report" /
    "Tang Yu sends the report", or 李伟/唐宇) is a different subject: another fact, never an
    update of this one. Words present on one side only (an added "all", 都会) are elaboration.
    """
    mine, theirs = value_words(new_text), value_words(old_text)
    only_mine, only_theirs = mine - theirs, theirs - mine

    def numeric(word: str) -> bool:
        return any(ch.isdigit() for ch in word) or word in NEGATIONS

    # A Latin value word (number, name, negation) on either side only changes the value;
    # CJK characters only when both sides have some the other lacks (a substitution: 2月/3月),
    # since characters added on one side (都会) are elaboration.
    cjk_mine = {w for w in only_mine if _CJK_CHAR.fullmatch(w)}
    cjk_theirs = {w for w in only_theirs if _CJK_CHAR.fullmatch(w)}
    latin_changed = bool((only_mine - cjk_mine) | (only_theirs - cjk_theirs))
    values_changed = latin_changed or (bool(cjk_mine) and bool(cjk_theirs))
    # A name swapped where the sentence starts is its subject ("Li Wei sends…"); a name
    # swapped later is the value ("My manager is Li Wei" → "… is Zhou Min": an update).
    # The subject may lead on one side only ("Lin Xue needs invoices…" / "Invoices for Zhou
    # Lin must be sent…"): a swap counts as a new subject when either side leads with it.
    names_mine = {w for w in only_mine if not numeric(w)}
    names_theirs = {w for w in only_theirs if not numeric(w)}
    leading = bool(names_mine & _leading_words(new_text)) or bool(
        names_theirs & _leading_words(old_text)
    )
    return values_changed, bool(names_mine) and bool(names_theirs) and leading


def _leading_words(text: str) -> set[str]:
    """The first two Latin words and the first three CJK characters of a statement."""
    text = (text or "").strip()
    words = {
        _stem(unicodedata.normalize("NFKC", match.group(0)).casefold())
        for match in list(_LATIN_WORD.finditer(text))[:2]
    }
    return words | set(_CJK_CHAR.findall(text[:3]))


class RuleJudge:
    """duplicate: the same meaningful words, or a close paraphrase (cosine >= DUPLICATE_COSINE)
    that changes no value and no subject; update: same kind and most words shared, with a
    changed number or negation but the same subject; new: anything else — in particular the
    same sentence about another person or thing, which must never replace this one."""

    name = "rules"

    def judge(self, memory: Memory, candidates: list[Candidate]) -> Decision:
        best_update: Candidate | None = None
        mine = content_words(memory.content)
        for candidate in candidates:
            other = candidate.memory
            theirs = content_words(other.content)
            values_changed, subject_changed = value_changes(memory.content, other.content)
            if mine == theirs or (
                candidate.similarity >= DUPLICATE_COSINE
                and not values_changed
                and not subject_changed
            ):
                return Decision(
                    DUPLICATE,
                    other,
                    f"near duplicate (cosine {candidate.similarity:.3f}, no value changed)",
                    self.name,
                    candidate.similarity,
                )
            if (
                best_update is None
                and not subject_changed
                and other.kind == memory.kind
                and overlap(memory.content, other.content) >= UPDATE_OVERLAP
            ):
                best_update = candidate
        if best_update is not None:
            return Decision(
                UPDATE,
                best_update.memory,
                f"same subject, different value (cosine {best_update.similarity:.3f})",
                self.name,
                best_update.similarity,
            )
        return Decision(NEW, None, "no candidate says the same thing", self.name)


JUDGE_PROMPT = """You deduplicate a memory store. Given a NEW memory and CANDIDATES already
stored (each with an id), answer with a JSON object {"decision": "duplicate" | "update" |
"new", "target_id": the candidate id it duplicates or updates (null for new), "reason": a
short explanation}. "duplicate": the new memory says nothing the candidate does not already
say. "update": it is about the same thing as the candidate but the value changed (the newer
statement should replace the older). "new": anything else."""


class ModelJudge:
    name = "model"

    def __init__(self, model: ModelProvider):
        self.model = model

    def judge(self, memory: Memory, candidates: list[Candidate]) -> Decision:
        if not candidates:
            return Decision(NEW, None, "no near candidates", self.name)
        listing = "\n".join(
            f"- id {c.memory.pk} ({c.memory.kind}, cosine {c.similarity:.2f}): {c.memory.content}"
            for c in candidates
        )
        with charged("memory.dedup", organization_id=memory.organization_id):
            answer = chat_json(
                self.model,
                JUDGE_PROMPT,
                f"NEW ({memory.kind}): {memory.content}\nCANDIDATES:\n{listing}",
            )
        decision = str(answer.get("decision", "")).lower()
        if decision not in (DUPLICATE, UPDATE, NEW):
            raise ProviderError(f"judge answered an unknown decision {decision!r}")
        target = None
        if decision != NEW:
            by_id = {c.memory.pk: c for c in candidates}
            try:
                chosen = by_id.get(int(answer.get("target_id")))
            except (TypeError, ValueError):
                chosen = None
            if chosen is None:
                raise ProviderError("judge named no valid candidate")
            target = chosen.memory
            similarity = chosen.similarity
        else:
            similarity = None
        reason = str(answer.get("reason", ""))[:500]
        return Decision(decision, target, reason, f"model:{self.model.model}", similarity)


class FallbackJudge:
    def __init__(self, primary: ModelJudge):
        self.primary = primary
        self.name = primary.name

    def judge(self, memory: Memory, candidates: list[Candidate]) -> Decision:
        try:
            return self.primary.judge(memory, candidates)
        except ProviderError as error:
            decision = RuleJudge().judge(memory, candidates)
            decision.judge = "rules (model failed)"
            decision.reason = f"{decision.reason}; model error: {str(error)[:200]}"
            return decision


def judge() -> Judge:
    model = memory_model()
    if model is None:
        return RuleJudge()
    return FallbackJudge(ModelJudge(model))
