"""Why a memory was retrieved: a hit's ranking components (cadre.memory.search) as a few
labelled bars, for a model call's context record and the console's memory search.

Each bar is a fraction in [0, 1] with its figure beside it:
- lexical: the hit's lexical score over the best lexical score among the memories shown
  together (its lexical rank beside it);
- vector: the similarity of the query and the memory (the cosine; for a conversation turn the
  mean of its views' cosines, memory/turns.py) with its vector rank beside it;
- recency: the recency factor the fused score was multiplied by (1 = written just now);
- neighbour / session: the bonus from an adjacent turn / the same conversation, as a share of
  the score before diversity;
- diversity (MMR): the similarity to the closest memory already chosen (0 = nothing alike).
A component the ranking did not use is left out; an item with no components at all was
recorded before components were kept (or came from a path that has none): "not recorded".
"""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext as _

from cadre.identifiers import parse_pks
from cadre.memory import selectors
from cadre.memory.models import ContextRecordItem, Memory


def _number(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _fraction(value: float | None) -> float:
    if value is None:
        return 0.0
    return round(min(max(value, 0.0), 1.0), 4)


def _bar(key: str, label: str, fraction: float, figure: str) -> dict:
    return {
        "key": key,
        "label": label,
        "fraction": _fraction(fraction),
        "percent": round(_fraction(fraction) * 100, 1),
        "figure": figure,
    }


def explain(components: dict | None, *, best_lexical: float | None = None, kept=None) -> dict:
    """Bars and the diversity decision for one item's components.

    `best_lexical`: the highest lexical score among the items shown together (scales the
    lexical bar). `kept`: True for a hit that was returned or sent, False for a candidate
    diversity passed over, None when unknown.
    """
    parts = components or {}
    if not parts:
        return {"recorded": False, "bars": [], "decision": _("not recorded"), "boosts": []}
    bars = []
    lexical = _number(parts.get("lexical_score"))
    if lexical is not None:
        scale = best_lexical if best_lexical and best_lexical > 0 else lexical or 1.0
        bars.append(
            _bar(
                "lexical",
                _("Lexical"),
                lexical / scale if scale else 0.0,
                _("rank %(rank)s, score %(score)s")
                % {"rank": parts.get("lexical_rank", "—"), "score": f"{lexical:.3g}"},
            )
        )
    similarity = _number(parts.get("vector_similarity"))
    if similarity is not None:
        bars.append(
            _bar(
                "vector",
                _("Vector"),
                similarity,
                _("rank %(rank)s, similarity %(similarity)s")
                % {"rank": parts.get("vector_rank", "—"), "similarity": f"{similarity:.3f}"},
            )
        )
    recency = _number(parts.get("recency"))
    if recency is not None:
        bars.append(_bar("recency", _("Recency"), recency, f"x{recency:.3f}"))
    before = _number(parts.get("score_before_mmr"))
    for key, label in (
        ("neighbour_bonus", _("Neighbour turn")),
        ("session_bonus", _("Same session")),
    ):
        bonus = _number(parts.get(key))
        if bonus is not None:
            share = bonus / before if before else 0.0
            bars.append(_bar(key.split("_")[0], label, share, f"+{bonus:.3g}"))
    redundancy = _number(parts.get("mmr_redundancy"))
    if redundancy is not None:
        bars.append(
            _bar(
                "mmr", _("Diversity (MMR): alike a chosen memory"), redundancy, f"{redundancy:.3f}"
            )
        )
    boosts = [
        f"{label} +{float(parts[key]) * 100:.0f}%"
        for key, label in (
            ("conversation_boost", _("same conversation")),
            ("speaker_boost", _("speaker named")),
        )
        if _number(parts.get(key)) is not None
    ]
    if kept is False:
        decision = _("passed over by diversity (MMR)")
    elif "mmr" in parts:
        decision = _("kept by diversity (MMR value %(value)s)") % {
            "value": f"{float(parts['mmr']):.3f}"
        }
    elif kept:
        decision = _("kept (no diversity step)")
    else:
        decision = "—"
    return {"recorded": True, "bars": bars, "decision": decision, "boosts": boosts}


def best_lexical(items) -> float | None:
    """The highest lexical score among `items` (each with `components`), or None."""
    scores = [_number((item or {}).get("lexical_score")) for item in items]
    scores = [score for score in scores if score is not None]
    return max(scores) if scores else None


def annotate_records(actor, records) -> None:
    """Give each ContextRecord (its items prefetched) `why_items` — [{"item", "why"}] — and
    `passed_over_rows` — [{"memory" (or None when gone or not the actor's to read), "id",
    "version", "score", "reason", "why"}], or None when the record predates keeping them.
    The passed-over memories are read through the memory gate as `actor` (the reader of the
    page): a colleague's personal memory the search passed over shows as its id only.
    One query for every record."""
    records = list(records)
    ids = parse_pks(
        entry.get("id")
        for record in records
        for entry in (record.passed_over or [])
        if isinstance(entry, dict)
    )
    memories = (
        selectors.memory_queryset(actor, with_deleted=True).filter(pk__in=ids).in_bulk()
        if ids
        else {}
    )
    for record in records:
        items = list(record.items.all())
        entries = [e for e in (record.passed_over or []) if isinstance(e, dict)]
        best = best_lexical(
            [item.components for item in items] + [e.get("components") for e in entries]
        )
        record.why_items = [
            {
                "item": item,
                "why": explain(
                    item.components,
                    best_lexical=best,
                    kept=True if item.status == ContextRecordItem.Status.SENT else None,
                ),
            }
            for item in items
        ]
        if record.passed_over is None:
            record.passed_over_rows = None
            continue
        rows = []
        for entry in entries:
            memory = memories.get(entry.get("id"))
            if memory is not None and memory.status == Memory.Status.DELETED:
                memory = None
            rows.append(
                {
                    "memory": memory,
                    "id": entry.get("id"),
                    "version": entry.get("version"),
                    "score": entry.get("score"),
                    "reason": entry.get("reason", ""),
                    "why": explain(entry.get("components"), best_lexical=best, kept=False),
                }
            )
        record.passed_over_rows = rows
