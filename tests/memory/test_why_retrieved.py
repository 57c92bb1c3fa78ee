"""Why a memory was retrieved: the candidates diversity (MMR) passed over — the ranking
reports them without changing its hits, the model call's context record keeps them (an old
record says "not recorded") — and the score components as bars."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest
from django.utils import timezone

from cadre.agents.runtime.steps.context import ContextPieces, context_manifest
from cadre.memory import search
from cadre.memory.models import ContextRecord, Memory
from cadre.memory.services.context import context_record_for_model_call
from cadre.viewer.why import explain
from tests.conftest import actor_for

NOW = timezone.now()


def _candidates() -> search.Candidates:
    """Three candidates, close together on both sides: 1 and 2 say the same thing (identical
    vectors), 3 something else; 4, far behind on both, sets the bottom of the scores' scale.
    Relevance alone returns 1, 2; diversity returns 1, 3."""
    memories = {
        pk: Memory(pk=pk, content=f"memory {pk}", observed_at=NOW, attributes={})
        for pk in (1, 2, 3, 4)
    }
    same = np.array([1.0, 0.0, 0.0], dtype=np.float32)
    other = np.array([0.0, 1.0, 0.0], dtype=np.float32)
    unrelated = np.array([0.0, 0.0, 1.0], dtype=np.float32)
    return search.Candidates(
        lexical=[(1, 3.0), (2, 2.9), (3, 2.8), (4, 1.0)],
        vector=[(1, 0.9), (2, 0.9), (3, 0.8), (4, 0.1)],
        memories=memories,
        vectors={1: same, 2: same.copy(), 3: other, 4: unrelated},
        query=np.array([0.7, 0.7, 0.0], dtype=np.float32),
    )


def _rank(passed_over=None):
    return search.rank(
        _candidates(),
        terms=["memory"],
        conversation_id=None,
        top_k=2,
        now=NOW,
        settings=search.DEFAULT_SETTINGS,
        passed_over=passed_over,
    )


def test_the_ranking_reports_what_diversity_passed_over_without_changing_its_hits():
    plain = _rank()
    passed: list = []
    hits = _rank(passed)
    assert [h.memory.pk for h in plain] == [h.memory.pk for h in hits] == [1, 3]
    assert [h.score for h in plain] == [h.score for h in hits]
    assert [h.memory.pk for h in passed] == [2]
    # Memory 2 is as alike memory 1 as can be: its redundancy is 1.
    assert passed[0].components["mmr_redundancy"] == 1.0
    assert passed[0].components["lexical_rank"] == 2
    assert "mmr" not in passed[0].components  # never chosen
    assert hits[1].components["mmr"] > 0


def test_explain_turns_components_into_bars_with_exact_fractions():
    components = {
        "lexical_rank": 2,
        "lexical_score": 1.5,
        "vector_rank": 1,
        "vector_similarity": 0.8,
        "rrf": 0.03,
        "recency": 0.9,
        "neighbour_bonus": 0.005,
        "score_before_mmr": 0.02,
        "mmr": 0.7,
        "mmr_redundancy": 0.25,
        "speaker_boost": 0.3,
    }
    why = explain(components, best_lexical=3.0, kept=True)
    bars = {bar["key"]: (bar["fraction"], bar["figure"]) for bar in why["bars"]}
    assert bars == {
        "lexical": (0.5, "rank 2, score 1.5"),
        "vector": (0.8, "rank 1, similarity 0.800"),
        "recency": (0.9, "x0.900"),
        "neighbour": (0.25, "+0.005"),
        "mmr": (0.25, "0.250"),
    }
    assert why["decision"] == "kept by diversity (MMR value 0.700)"
    assert why["boosts"] == ["speaker named +30%"]
    assert explain({"mmr_redundancy": 0.9}, kept=False)["decision"] == (
        "passed over by diversity (MMR)"
    )
    assert explain({}) == {"recorded": False, "bars": [], "decision": "not recorded", "boosts": []}


def test_the_manifest_carries_passed_over_and_none_when_no_hook_reported():
    report = {
        "sent": {"standing": [], "shared": [], "memories": [], "skills": [], "skill_bodies": []}
    }
    assert context_manifest(ContextPieces(), report)["passed_over"] is None
    entry = {"id": 7, "score": 0.1, "components": {"mmr_redundancy": 0.9}, "reason": "MMR"}
    pieces = ContextPieces(passed_over=[entry])
    assert context_manifest(pieces, report)["passed_over"] == [entry]


@pytest.mark.django_db
def test_the_context_record_keeps_passed_over_and_old_records_have_none(bob):
    from cadre.memory import services

    actor = actor_for(bob)
    kept, gone = (
        services.memory_add(
            actor=actor, scope="user", kind="fact", content=text, source_kind="user_statement"
        )
        for text in ("Bob's desk is by the window", "Bob's desk is near the window")
    )
    record = context_record_for_model_call(
        actor=actor,
        run_id=1,
        step_index=0,
        query="where is Bob's desk",
        memories=[{"id": kept.pk, "rank": 1, "score": 0.2, "status": "sent", "tokens": 5}],
        skills=[],
        passed_over=[
            {"id": gone.pk, "score": 0.19, "components": {"mmr_redundancy": 0.97}, "reason": "MMR"},
            {"id": 999999, "score": 0.1, "components": {}, "reason": "MMR"},  # no such memory
        ],
    )
    record.refresh_from_db()
    assert record.passed_over == [
        {
            "id": gone.pk,
            "version": 1,
            "score": 0.19,
            "components": {"mmr_redundancy": 0.97},
            "reason": "MMR",
        }
    ]
    old = ContextRecord.objects.create(
        organization=bob.organization, run_id="2", created_at=timezone.now() - timedelta(days=1)
    )
    assert old.passed_over is None
