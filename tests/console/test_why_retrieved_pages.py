# ruff: noqa: F811 - the fixtures imported from tests.console.agents_setup are parameters here
"""Why retrieved in the console: a transcript's model call shows each memory's score
components as bars and the candidates diversity passed over (or "not recorded" on a record
written before they were kept); the memory search page does the same for a query."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from cadre.agents.models import TemplateVersion
from cadre.agents.runtime.lifecycle import execution as engine
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.memory import embeddings, search, selectors, services
from cadre.memory.models import ContextRecord, MemoryEmbedding
from cadre.tenancy.actors import member_actor
from tests.console.agents_setup import (  # noqa: F401 - fixtures
    bob_agent,
    client,
    deployment,
    owner,
    published,
    sales,
    template,
)

pytestmark = pytest.mark.django_db

TEAS = [
    "Bob prefers green tea in the afternoon",
    "Bob likes a cup of green tea after lunch",
    "Green tea is served in the kitchen every afternoon",
    "The Shanghai office is on the twelfth floor",
]
QUERY = "green tea in the afternoon"


@pytest.fixture
def teas(bob, monkeypatch):
    """Bob's tea memories; the second is given the first's vector (it says the same to the
    embedder), and diversity is weighted up (MMR lambda 0.5): of the top 3 by relevance,
    diversity passes the second over for the office."""
    monkeypatch.setattr(search, "DEFAULT_SETTINGS", search.with_settings(mmr_lambda=0.5))
    actor = member_actor(bob)
    memories = [
        services.memory_add(
            actor=actor, scope="user", kind="preference", content=text, source_kind="user_statement"
        )
        for text in TEAS
    ]
    embeddings.embed_memories(memories, embeddings.active_model())
    # The second says what the first says: the same vector, so diversity sees them as one.
    rows = MemoryEmbedding.objects.filter(model=embeddings.active_model())
    vector = rows.get(memory=memories[0]).embedding
    rows.filter(memory=memories[1]).update(embedding=vector)
    return memories


def _ids(html: str, marker: str) -> list[int]:
    block = html.split(marker, 1)[1].split("</ol>", 1)[0].split("</ul>", 1)[0]
    return [int(pk) for pk in re.findall(r'<li data-memory="(\d+)"', block)]


def test_a_transcript_shows_components_and_passed_over_or_not_recorded(alice, bob, bob_agent, teas):
    TemplateVersion.objects.filter(pk=bob_agent.version_id).update(
        hooks={"assemble_context": [{"name": "memory_retrieval", "config": {"top_k": 3}}]}
    )
    run = runtime.run_start(actor=member_actor(bob), agent=bob_agent, text=QUERY)
    engine.run_execute(run.pk)
    record = ContextRecord.objects.filter(
        run_id=str(run.pk), kind=ContextRecord.Kind.MODEL_CALL
    ).first()
    assert [entry["id"] for entry in record.passed_over] == [teas[1].pk]
    assert record.passed_over[0]["components"]["mmr_redundancy"] == pytest.approx(1.0, abs=1e-4)
    sent = list(record.items.filter(status="sent"))
    assert sent and all(item.components.get("vector_similarity") is not None for item in sent)
    old = ContextRecord.objects.create(
        organization=bob.organization, run_id=str(run.pk), step_id="9", query="older call"
    )
    assert old.passed_over is None
    page = client(alice).get(reverse("console:session", args=[run.session_id])).content.decode()
    new_block = page.split(f'data-passed-over="{record.pk}"', 1)[1].split("</div>", 1)[0]
    old_block = page.split(f'data-passed-over="{old.pk}"', 1)[1].split("</div>", 1)[0]
    assert "not recorded" in old_block
    assert "not recorded" not in new_block and "1" in new_block
    assert page.count("data-why-decision>passed over by diversity (MMR)") == 1
    shown = page.split(f'data-context-record="{record.pk}"', 1)[1].split("</ul>", 1)[0]
    assert shown.count('data-why-bar="vector"') == record.items.exclude(components={}).count()
    assert 'data-why-bar="lexical"' in shown and 'data-why-bar="recency"' in shown


def test_memory_search_page_lists_hits_with_bars_and_what_diversity_passed_over(bob, teas):
    expected = selectors.memory_search(
        actor=member_actor(bob), query=QUERY, top_k=3, force=True, passed_over=True
    )
    assert [hit.memory.pk for hit in expected.passed_over] == [teas[1].pk]
    response = client(bob).get(reverse("console:memory_search"), {"q": QUERY, "top_k": 3})
    assert response.status_code == 200
    page = response.content.decode()
    assert _ids(page, "data-search-hits") == [hit.memory.pk for hit in expected.hits]
    assert _ids(page, "data-search-passed-over") == [h.memory.pk for h in expected.passed_over]
    assert page.count('data-why-bar="vector"') == 3 + 1
    decisions = page.count("data-why-decision>passed over by diversity (MMR)")
    assert decisions == len(expected.passed_over)
    assert (
        "Considered but passed over by diversity (MMR): " + str(len(expected.passed_over)) in page
    )


def test_memory_search_page_sees_only_readable_scopes(bob, teas, make_member):
    dana = make_member(display_name="Dana")
    page = client(dana).get(reverse("console:memory_search"), {"q": QUERY}).content.decode()
    assert _ids(page, "data-search-hits") == []  # Bob's own memories are his
    assert "0 hits" in page
