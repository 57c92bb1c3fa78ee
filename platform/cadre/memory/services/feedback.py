"""Natural-language corrections: find the memories a correction contradicts and supersede them."""

# ruff: noqa: RUF001 - Chinese punctuation is the point

from __future__ import annotations

import re
from dataclasses import dataclass, field

from django.db import transaction
from django.utils import translation
from django.utils.translation import gettext as _
from opentelemetry import trace

from cadre.llm import ProviderError, chat_json
from cadre.memory import dedup, embeddings, selectors
from cadre.memory import text as memory_text
from cadre.memory.extraction import charged, memory_model
from cadre.memory.models import (
    STATEMENT_KINDS,
    Kind,
    Memory,
    MemoryVersion,
    SourceKind,
)
from cadre.memory.services.common import (
    clean_content,
    require_write,
)
from cadre.memory.services.writes import memory_add, memory_supersede
from cadre.memory.statements import is_question

# --- feedback ------------------------------------------------------------------------------
#
# A correction states what is right now and, often, what it replaces: "our discount limit is
# 12%, not 10%", "use numbered lists instead of bullet points", "其实用编号列表，不要用项目符号".
# Only statements are corrected: facts, preferences and requirements someone stated. What was
# derived from a run (`DERIVED_KINDS`: experience, tool_trajectory, summary) records what
# happened and is never the target of a correction, however alike its words are.

_CORRECTION_PREFIX = re.compile(
    r"^\s*(?:(?:no|nope|wrong|incorrect|not quite|actually|correction|update)\b[\s,.:;!—–-]*|"
    r"(?:that(?:'s| is) (?:wrong|not right|incorrect|outdated|out of date)|"
    r"this is (?:wrong|outdated))[\s,.:;!—–-]*|"
    r"(?:不对|错了|不是的|更正|纠正|说错了|有误|其实|实际上)[\s，,。.：:；;！!—-]*)+",
    re.I,
)
# The preambles that say something was wrong (not a mere "actually"/"其实", nor "no problem").
_WRONG = re.compile(
    r"^\s*(?:(?:actually|update|correction)[\s,.:;!—–-]*)?"
    r"(?:no(?![\s,]+(?:problem|worries|thanks|thank|need|rush|idea|way|one|doubt|matter)\b)|"
    r"nope|wrong|incorrect|not quite|"
    r"correction|that(?:'s| is) (?:wrong|not right|incorrect|outdated|out of date)|"
    r"this is (?:wrong|outdated))\b|^\s*(?:不对|错了|不是的|更正|纠正|说错了|有误)",
    re.I,
)
# Cosine similarity of a correction to a memory it changes, on the usual scale (unrelated ≈ 0;
# each model's cosines are read on it by `embeddings.calibrated_similarity`), and the margin
# below it a memory sharing a third of the words may have. Measured (multilingual-e5-small /
# all-MiniLM-L6-v2): English corrections and the memory they change 0.39-0.77 / 0.50-0.90,
# unrelated English pairs at most 0.11 / 0.13; short Chinese sentences about other things
# reach 0.64 / 0.62 (the search's candidates are the ones compared).
FEEDBACK_MIN_SIMILARITY = 0.45
FEEDBACK_OVERLAP_MARGIN = 0.1
FEEDBACK_MIN_OVERLAP = 0.34
# Of the replaced value's words, the share a memory must hold to be the one it contradicts.
FEEDBACK_MIN_OLD_SHARE = 0.6
# Of the corrected statement's words, the share a memory must hold when only a number changed.
FEEDBACK_MIN_TOPIC_SHARE = 0.66
SEARCH_TOP_K = 10

# "X instead of Y", "X, not Y", "not Y but X", "X, no longer Y", "don't use Y, use X",
# "change Y to X"; "X，不要用Y", "X而不是Y", "不是Y，是X", "用X代替Y", "把Y改成X" — (new, old).
_REPLACES = [
    re.compile(
        r"^(?P<new>.+?)(?:\s*[,;]\s*(?:and |but )?not|\s+(?:instead of|rather than|in place of|"
        r"and not|but not))\s+(?P<old>[^,;.!?]+)[\s,;.!?]*$",
        re.I,
    ),
    re.compile(r"^(?:instead of|rather than)\s+(?P<old>[^,;]+)[,;]\s*(?P<new>.+)$", re.I),
    re.compile(
        r"^(?:it(?:'s| is)\s+)?not\s+(?P<old>[^,;]+?)(?:\s*,?\s*but|[,;])\s+(?P<new>.+)$", re.I
    ),
    re.compile(
        r"^(?P<new>.*?)[\s,;]*\b(?:no longer|not any ?more|no more)\s+(?P<old>[^,;.!?]+)", re.I
    ),
    re.compile(
        r"^(?:don'?t|do not|never|stop)\s+(?:use|using|write|writing|send|sending|call|"
        r"calling)?\s*(?P<old>[^,;.]+)[,;.]\s*(?P<new>.+)$",
        re.I,
    ),
    re.compile(
        r"^(?P<new>.+?)[,;.]\s*(?:don'?t|do not|never|stop)\s+(?:use|using|write|writing|"
        r"send|sending)?\s*(?P<old>[^,;.!?]+)",
        re.I,
    ),
    re.compile(r"^(?:change|switch)\s+(?P<old>.+?)\s+to\s+(?P<new>.+)$", re.I),
    re.compile(
        r"^(?:不是|不要再?|别再?|不再|不用)(?P<old>[^，,；;。]+)[，,；;]\s*(?:而是|是|要|改用|请)?(?P<new>.+)$"
    ),
    re.compile(r"^(?:用|以|改用)(?P<new>.+?)(?:代替|替代|取代|替换)(?P<old>.+)$"),
    re.compile(r"^(?:把|将)(?P<old>.+?)(?:改成|改为|换成|变成)(?P<new>.+)$"),
    re.compile(
        r"^(?P<new>.+?)(?:[，,；;]\s*(?:而是?不是|而非|不是|不要再?|别再?|不再|不用)|而不是|而非)"
        r"(?P<old>[^，,；;。]+)"
    ),
]

tracer = trace.get_tracer(__name__)


def correction_statement(text: str) -> str:
    """The corrected fact in a feedback message, without "that's wrong —" and the like."""
    cleaned = _CORRECTION_PREFIX.sub("", text or "").strip()
    return cleaned or (text or "").strip()


def _terms(text: str) -> set[str]:
    return set(memory_text.content_terms(text or ""))


@dataclass(frozen=True)
class Claim:
    """A correction read by rules: the corrected statement, what it says now (`new`) and the
    value it replaces (`old`, "" when it names none)."""

    statement: str
    new: str = ""
    old: str = ""

    @property
    def new_terms(self) -> set[str]:
        return _terms(self.new) - _terms(self.old)

    @property
    def old_terms(self) -> set[str]:
        return _terms(self.old) - _terms(self.new)


def correction_claim(text: str) -> Claim:
    """`text` as a correction: the statement, and the value it replaces when it names one
    ("12%, not 10%" → old "10%"; "numbered lists instead of bullet points" → old "bullet
    points"; "用编号列表，不要用项目符号" → old "用项目符号")."""
    statement = correction_statement(text).strip()
    body = statement.rstrip(" .!。！")
    for pattern in _REPLACES:
        match = pattern.match(body)
        if match is None:
            continue
        new, old = match.group("new").strip(" ,;，；"), match.group("old").strip(" ,;，；。.")
        if _terms(old) - _terms(new):
            return Claim(statement=statement, new=new, old=old)
    return Claim(statement=statement, new=statement)


def is_factual_correction(text: str) -> bool:
    """Does `text` read as a correction of something said before: a preamble saying it was
    wrong ("no, that's wrong", "不对"), or a statement naming the value it replaces ("…, not
    10%", "…instead of…", "…，不要…")? A question or a request is not one."""
    if not (text or "").strip() or is_question(correction_statement(text)):
        return False
    return bool(_WRONG.match(text)) or bool(correction_claim(text).old)


def contradicts(claim: Claim, content: str, kind: str | None = None) -> bool:
    """Does `content` (a memory of `kind`, or an instruction line when None) say what `claim`
    replaces? It holds most of the replaced value's words, does not already say the corrected
    thing, and is on the same subject:
    - a replaced number ("12%, not 10%") needs most of the statement's words around it
      ("discount limit"): a 10% elsewhere is another matter;
    - a fact needs a word of the new statement ("the report goes to Li Wei, not Zhang San"
      does not touch "Zhang San is my manager");
    - a preference, a requirement or an instruction is about how things are done, and the
      replaced way alone names it ("numbered lists instead of bullet points")."""
    old, new, have = claim.old_terms, claim.new_terms, _terms(content)
    if not old:
        return False
    shared = old & have
    if not shared or len(shared) < FEEDBACK_MIN_OLD_SHARE * len(old):
        return False
    if new and new <= have:
        return False  # it already says the corrected thing (the correction restated)
    words = {term for term in new if not term.isdigit()}
    if all(term.isdigit() for term in shared):
        return bool(words) and len(words & have) >= FEEDBACK_MIN_TOPIC_SHARE * len(words)
    if kind == Kind.FACT:
        return bool(words & have)
    return True


def contradicted_lines(text: str, document: str) -> list[str]:
    """The lines of `document` (an SOP, AGENT.md) that the correction `text` contradicts."""
    claim = correction_claim(text)
    if not claim.old:
        return []
    lines = (line.strip(" \t-*>#") for line in (document or "").splitlines())
    return [line for line in lines if line and contradicts(claim, line)]


# Where one statement holds several: sentence ends, "…, and …", "…; …", "…，并且…", "…；…".
_CLAUSES = re.compile(
    r"(?<=[.!?。！？])\s+|(?<=[。！？；])|\s*;\s+|,\s*(?:and|but|also)\s+|"
    r"[，,]\s*(?:并且|而且|另外|还有|同时)"
)


def _clauses(content: str) -> list[str]:
    parts = (part.strip(" ,;，；") for part in _CLAUSES.split(content or ""))
    return [part for part in parts if part and _terms(part)]


def _sentence(text: str, chinese: bool) -> str:
    text = text.strip()
    if text[:1].isascii() and text[:1].islower():
        text = text[0].upper() + text[1:]
    if text and text[-1] not in ".!?。！？":
        text += "。" if chinese else "."
    return text


def with_untouched(statement: str, claim: Claim, olds: list[Memory]) -> str:
    """The corrected statement, with what the replaced statements also said that the
    correction does not touch ("…write reports in bullet points, and my manager is Li Wei."
    corrected by "use numbered lists instead of bullet points" keeps "My manager is Li Wei.")."""
    kept = [
        clause
        for old in olds
        for clause in _clauses(old.content)
        if not contradicts(claim, clause, old.kind) and not _terms(clause) <= _terms(statement)
    ]
    if not kept or len(kept) == sum(len(_clauses(old.content)) for old in olds):
        return statement  # nothing besides, or no one clause is what it replaces
    chinese = _is_chinese(statement)
    parts = [_sentence(statement, chinese), *(_sentence(clause, chinese) for clause in kept)]
    return ("" if chinese else " ").join(dict.fromkeys(parts))


def _is_chinese(text: str) -> bool:
    return bool(re.search(r"[\u3400-\u9fff]", text or ""))


def feedback_message(text: str, pairs: list[tuple[str, str]]) -> str:
    """What the person is told: which memory the correction updated ("Updated memory: “old” →
    “new”"), or that nothing was changed — in their language (the active one: the request's,
    or the run's member's), or in Chinese when they wrote in Chinese."""
    language = "zh-hans" if _is_chinese(text) else translation.get_language()
    with translation.override(language):
        if not pairs:
            return _("Nothing was changed: no stored memory says otherwise.")
        shown = "; ".join(f"“{old[:200]}” → “{new[:200]}”" for old, new in pairs)
        return _("Updated memory: %(changes)s") % {"changes": shown}


@dataclass
class FeedbackResult:
    statement: str
    created: list[Memory] = field(default_factory=list)
    superseded: list[Memory] = field(default_factory=list)
    judge: str = "rules"
    considered: list[dict] = field(default_factory=list)
    # "updated_memory" when it superseded something, else "nothing_changed"; `message` tells
    # the person which (what the API, MCP, MemOS and chat answers say).
    outcome: str = "nothing_changed"
    message: str = ""


FEEDBACK_PROMPT = """A user corrects what an assistant remembers. Given the CORRECTION and
numbered stored MEMORIES, answer with a JSON object {"affected": [ids of memories the
correction contradicts or updates], "content": one self-contained sentence stating the
corrected fact in the user's language}. Use an empty list when none is affected."""


def _feedback_affected(claim: Claim, hits: list, actor=None) -> tuple[list, str, str]:
    """(affected hits, new content, judge name) — by the model if configured, else by rules."""
    statement = claim.statement
    model = memory_model()
    if model is not None and hits:
        listing = "\n".join(f"- id {h.memory.pk}: {h.memory.content}" for h in hits)
        try:
            with charged("memory.feedback", actor=actor):
                answer = chat_json(
                    model, FEEDBACK_PROMPT, f"CORRECTION: {statement}\nMEMORIES:\n{listing}"
                )
            ids = {int(i) for i in answer.get("affected") or []}
            content = str(answer.get("content") or statement).strip() or statement
            return [h for h in hits if h.memory.pk in ids], content, f"model:{model.model}"
        except (ProviderError, TypeError, ValueError):
            pass  # fall through to rules
    return _rule_affected(claim, hits), statement, "rules"


def _rule_affected(claim: Claim, hits: list) -> list:
    """The hits the correction contradicts. When it names the value it replaces, the memories
    saying that value (`contradicts`); otherwise the memories closest to the statement (cosine
    ≥ FEEDBACK_MIN_SIMILARITY on the usual scale, or a little less with a third of the words
    shared)."""
    if not hits:
        return []
    if claim.old:
        return [hit for hit in hits if contradicts(claim, hit.memory.content, hit.memory.kind)]
    statement = claim.statement
    model = embeddings.active_model(hits[0].memory.organization_id)
    vectors = embeddings.provider_for(model).embed(
        [statement, *[hit.memory.content for hit in hits]]
    )
    query = vectors[0]
    affected = []
    for hit, vector in zip(hits, vectors[1:], strict=True):
        similarity = embeddings.calibrated_similarity(
            model, sum(a * b for a, b in zip(query, vector, strict=True))
        )
        hit.components = {**(hit.components or {}), "feedback_similarity": round(similarity, 4)}
        if similarity >= FEEDBACK_MIN_SIMILARITY or (
            dedup.overlap(statement, hit.memory.content) >= FEEDBACK_MIN_OVERLAP
            and similarity >= FEEDBACK_MIN_SIMILARITY - FEEDBACK_OVERLAP_MARGIN
        ):
            affected.append(hit)
    return affected


def _candidates(actor, claim: Claim, scope_keys, conversation_id) -> list:
    """The statements the actor may change that the correction could be about: found by the
    statement and, when it names one, by the value it replaces. Derived records are not
    searched (they are never corrected)."""
    hits: dict[int, object] = {}
    for query in dict.fromkeys(q for q in (claim.statement, claim.old) if q):
        found = selectors.memory_search(
            actor=actor,
            query=query,
            top_k=SEARCH_TOP_K,
            scope_keys=scope_keys,
            kinds=list(STATEMENT_KINDS),
            conversation_id=conversation_id,
            force=True,
        )
        for hit in found.hits:
            memory = hit.memory
            if (
                memory.pk not in hits
                and memory.kind in STATEMENT_KINDS
                and memory.status == Memory.Status.ACTIVE
                and selectors.can_modify(actor, memory)
            ):
                hits[memory.pk] = hit
    return list(hits.values())


@tracer.start_as_current_span("memory.feedback")
def memory_feedback(
    *, actor, text: str, scope_keys: list[str] | None = None, conversation_id: str | None = None
) -> FeedbackResult:
    """Apply a natural-language correction: find the statements it contradicts (facts,
    preferences, requirements the actor may change; never a derived record), write the
    corrected statement in each affected scope, and supersede the old items with a recorded
    `correction`. With nothing contradicted nothing is written, and the result says so
    (`outcome`, `message`). The next search returns the new state; history keeps the old.
    The judge (a model, when configured) reads before the transaction that writes."""
    require_write(actor)
    text = clean_content(text)
    claim = correction_claim(text)
    hits = _candidates(actor, claim, scope_keys, conversation_id)
    affected, content, judge_name = _feedback_affected(claim, hits, actor)
    with transaction.atomic():
        return _apply(actor, text, content, judge_name, hits, affected, conversation_id)


def _apply(actor, text, content, judge_name, hits, affected, conversation_id) -> FeedbackResult:
    """Write the corrected statement in each affected scope and supersede what it replaces
    (each old item read again, locked: one changed meanwhile is left as it is)."""
    result = FeedbackResult(
        statement=content,
        judge=judge_name,
        considered=[
            {
                "id": hit.memory.pk,
                "score": round(float(hit.score), 4),
                "affected": any(hit is chosen for chosen in affected),
            }
            for hit in hits
        ],
    )
    by_scope: dict[str, list] = {}
    current = Memory.objects.select_for_update().in_bulk([hit.memory.pk for hit in affected])
    for hit in affected:
        memory = current.get(hit.memory.pk)
        if memory is None or memory.status != Memory.Status.ACTIVE:
            continue  # corrected, merged or deleted since it was read
        by_scope.setdefault(memory.scope_key, []).append(memory)
    pairs: list[tuple[str, str]] = []
    claim = correction_claim(text)
    for key, olds in by_scope.items():
        scope_name, _sep, raw_id = key.partition(":")
        new = memory_add(
            actor=actor,
            scope=scope_name,
            scope_id=int(raw_id) if raw_id else None,
            kind=olds[0].kind,
            # A model judge writes the merged statement itself; by rules, what the replaced
            # statements said besides the corrected part is kept.
            content=content if judge_name != "rules" else with_untouched(content, claim, olds),
            source_kind=SourceKind.USER_STATEMENT,
            conversation_id=conversation_id or "",
            attributes={"feedback": True, "correction_of": [old.pk for old in olds]},
            tags=list(dict.fromkeys(tag for old in olds for tag in old.tags)),
        )
        result.created.append(new)
        for old in olds:
            if old.pk == new.pk:
                continue  # the correction restates it word for word
            pairs.append((old.content, new.content))
            result.superseded.append(
                memory_supersede(
                    actor=actor,
                    old=old,
                    new=new,
                    change=MemoryVersion.Change.CORRECTION,
                    reason=f"corrected by feedback (memory {new.pk}): {text[:1000]}",
                    audit_reason="feedback correction",
                )
            )
    result.outcome = "updated_memory" if result.superseded else "nothing_changed"
    result.message = feedback_message(text, pairs)
    return result
