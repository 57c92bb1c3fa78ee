"""Natural-language corrections: find the memories a correction contradicts and supersede them."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from django.db import transaction
from opentelemetry import trace

from cadre.llm import ProviderError, chat_json
from cadre.memory import dedup, embeddings, selectors
from cadre.memory.extraction import charged, memory_model
from cadre.memory.models import (
    Kind,
    Memory,
    MemoryVersion,
    Scope,
    SourceKind,
)
from cadre.memory.services.common import (
    clean_content,
    require_write,
)
from cadre.memory.services.writes import memory_add, memory_supersede

# --- feedback ------------------------------------------------------------------------------

_CORRECTION_PREFIX = re.compile(
    r"^\s*(?:(?:no|nope|wrong|incorrect|not quite|actually|correction|update)\b[\s,.:;!—–-]*|"  # noqa: RUF001
    r"(?:that(?:'s| is) (?:wrong|not right|incorrect|outdated|out of date)|"
    r"this is (?:wrong|outdated))[\s,.:;!—–-]*|"  # noqa: RUF001
    r"(?:不对|错了|不是的|更正|纠正|说错了|有误|其实|实际上)[\s，,。.：:；;！!—-]*)+",  # noqa: RUF001
    re.I,
)
FEEDBACK_MIN_SIMILARITY = 0.45
FEEDBACK_MIN_OVERLAP = 0.34

tracer = trace.get_tracer(__name__)


def correction_statement(text: str) -> str:
    """The corrected fact in a feedback message, without "that's wrong —" and the like."""
    cleaned = _CORRECTION_PREFIX.sub("", text or "").strip()
    return cleaned or (text or "").strip()


@dataclass
class FeedbackResult:
    statement: str
    created: list[Memory] = field(default_factory=list)
    superseded: list[Memory] = field(default_factory=list)
    judge: str = "rules"
    considered: list[dict] = field(default_factory=list)


FEEDBACK_PROMPT = """A user corrects what an assistant remembers. Given the CORRECTION and
numbered stored MEMORIES, answer with a JSON object {"affected": [ids of memories the
correction contradicts or updates], "content": one self-contained sentence stating the
corrected fact in the user's language}. Use an empty list when none is affected."""


def _feedback_affected(statement: str, hits: list, actor=None) -> tuple[list, str, str]:
    """(affected hits, new content, judge name) — by the model if configured, else by rules."""
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
    return _rule_affected(statement, hits), statement, "rules"


def _rule_affected(statement: str, hits: list) -> list:
    if not hits:
        return []

    model = embeddings.active_model()
    vectors = embeddings.provider_for(model).embed(
        [statement, *[hit.memory.content for hit in hits]]
    )
    query = vectors[0]
    affected = []
    for hit, vector in zip(hits, vectors[1:], strict=True):
        similarity = sum(a * b for a, b in zip(query, vector, strict=True))
        hit.components = {**(hit.components or {}), "feedback_similarity": round(similarity, 4)}
        if similarity >= FEEDBACK_MIN_SIMILARITY or (
            dedup.overlap(statement, hit.memory.content) >= FEEDBACK_MIN_OVERLAP
            and similarity >= FEEDBACK_MIN_SIMILARITY - 0.1
        ):
            affected.append(hit)
    return affected


@transaction.atomic
@tracer.start_as_current_span("memory.feedback")
def memory_feedback(
    *, actor, text: str, scope_keys: list[str] | None = None, conversation_id: str | None = None
) -> FeedbackResult:
    """Apply a natural-language correction: find the memories it contradicts (among those the
    actor may change), write the corrected statement in each affected scope, and supersede the
    old items with a recorded `correction`. With nothing affected, the statement is stored as a
    new personal memory. The next search returns the new state; history keeps the old."""
    require_write(actor)
    text = clean_content(text)
    statement = correction_statement(text)
    found = selectors.memory_search(
        actor=actor,
        query=statement,
        top_k=5,
        scope_keys=scope_keys,
        conversation_id=conversation_id,
        force=True,
    )
    hits = [
        hit
        for hit in found.hits
        if hit.memory.status == Memory.Status.ACTIVE and selectors.can_modify(actor, hit.memory)
    ]
    affected, content, judge_name = _feedback_affected(statement, hits, actor)
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
    for hit in affected:
        by_scope.setdefault(hit.memory.scope_key, []).append(hit.memory)
    if not by_scope:
        default_scope = Scope.AGENT if getattr(actor, "agent", None) is not None else Scope.USER
        result.created.append(
            memory_add(
                actor=actor,
                scope=default_scope,
                kind=Kind.FACT,
                content=content,
                source_kind=SourceKind.USER_STATEMENT,
                conversation_id=conversation_id or "",
                attributes={"feedback": True},
            )
        )
        return result
    for key, olds in by_scope.items():
        scope_name, _, raw_id = key.partition(":")
        new = memory_add(
            actor=actor,
            scope=scope_name,
            scope_id=int(raw_id) if raw_id else None,
            kind=olds[0].kind,
            content=content,
            source_kind=SourceKind.USER_STATEMENT,
            conversation_id=conversation_id or "",
            attributes={"feedback": True, "correction_of": [old.pk for old in olds]},
            tags=list(dict.fromkeys(tag for old in olds for tag in old.tags)),
        )
        result.created.append(new)
        for old in olds:
            if old.pk == new.pk:
                continue  # the correction restates it word for word
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
    return result
