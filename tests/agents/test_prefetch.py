"""Prefetch of the next turn's memories (agents/runtime/lifecycle/prefetch.py), through real runs
with the offline provider, the local embedding model and the real Redis cache: a topic shift queues
and fills a prefetch, a turn on the same topic does not; the next turn on the new topic is served
from it (the search is not run again) and its ContextRecord says so; a memory deleted in between is
not sent; another member's session never reads it."""

from __future__ import annotations

import pytest
from django.core.cache import cache

from cadre.agents import services
from cadre.agents import tasks as agent_tasks
from cadre.agents.models import Run
from cadre.agents.runtime.lifecycle import execution as engine
from cadre.agents.runtime.lifecycle import prefetch
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.memory import selectors
from cadre.memory import services as memory_services
from cadre.memory.models import ContextRecordItem
from cadre.tenancy.actors import member_actor
from tests.agents.conftest import publish

pytestmark = pytest.mark.django_db

LUNCH = "What is on the canteen lunch menu today?"
TRAVEL = "How do I book a business trip flight and hotel to Shanghai?"
TRAVEL_AGAIN = "How should I book the flight and hotel for my Shanghai business trip?"
TRAVEL_MEMORY = "Business trip flights and hotels are booked through the Ctrip corporate portal."


@pytest.fixture(autouse=True)
def _clear_cache():
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def agents(owner, alice, bob, sales):
    alice.positions.add(sales)
    bob.positions.add(sales)
    template = services.template_create(
        actor=owner,
        name="Prefetching assistant",
        code="prefetching",
        agent_md="# Persona\nYou help {{member.display_name}}.",
        model_settings={"provider": "offline", "model": "offline-1"},
        memory_policy={"read_scopes": ["user"], "write_scopes": ["user"]},
        hooks={
            "assemble_context": [{"name": "memory_retrieval", "config": {"top_k": 3}}],
            "process_memory": [],
        },
    )
    publish(owner, template.versions.get())
    deployment = services.deployment_create(
        actor=owner, name="prefetching", template=template, positions=[sales]
    )
    return deployment.agents.get(member=alice), deployment.agents.get(member=bob)


def _remember(member, content):
    return memory_services.memory_add(
        actor=member_actor(member),
        scope="user",
        scope_id=member.pk,
        kind="fact",
        content=content,
        source_kind="user_statement",
    )


def _entry(session_id, member):
    from cadre.memory.embeddings import active_model

    return cache.get(prefetch.cache_key(session_id, [f"user:{member.pk}"], active_model().pk))


def _run(member, agent, text, session=None) -> Run:
    run = runtime.run_start(actor=member_actor(member), agent=agent, text=text, session=session)
    assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    run.refresh_from_db()
    return run


def _sent(run) -> list[ContextRecordItem]:
    return list(
        ContextRecordItem.objects.filter(
            context__run_id=str(run.pk), status=ContextRecordItem.Status.SENT
        )
    )


@pytest.fixture
def bob_memories(bob):
    return (
        _remember(bob, TRAVEL_MEMORY),
        _remember(bob, "Hotel stays on business trips are capped at 600 yuan a night."),
        _remember(bob, "The canteen serves noodles on Wednesdays."),
    )


def test_a_reply_queues_the_prefetch_on_commit(
    agents, bob, bob_memories, monkeypatch, django_capture_on_commit_callbacks
):
    queued = []
    monkeypatch.setattr(agent_tasks.run_after, "apply_async", lambda *a, **k: None)
    monkeypatch.setattr(
        agent_tasks.prefetch_next_turn, "apply_async", lambda args, **k: queued.append(args)
    )
    with django_capture_on_commit_callbacks(execute=True):
        run = _run(bob, agents[1], LUNCH)
    assert queued == [(run.pk,)]


def test_a_topic_shift_prefetches_and_the_same_topic_does_not(agents, bob, bob_memories):
    bob_agent = agents[1]
    first = _run(bob, bob_agent, LUNCH)
    assert prefetch.prefetch_next_turn(first.pk) == "first_turn"
    same = _run(bob, bob_agent, "And what is on the canteen lunch menu tomorrow?", first.session)
    assert prefetch.prefetch_next_turn(same.pk) == "same_topic"
    assert _entry(first.session_id, bob) is None

    shifted = _run(bob, bob_agent, TRAVEL, first.session)
    assert prefetch.prefetch_next_turn(shifted.pk) == "prefetched"
    entry = _entry(first.session_id, bob)
    assert entry["member_id"] == bob.pk and entry["run_id"] == shifted.pk
    assert bob_memories[0].pk in entry["ids"]


def _prefetched_session(bob, bob_agent):
    first = _run(bob, bob_agent, LUNCH)
    shifted = _run(bob, bob_agent, TRAVEL, first.session)
    assert prefetch.prefetch_next_turn(shifted.pk) == "prefetched"
    return first.session


def _no_search(monkeypatch, pooled=None):
    """The queries the full search (the whole scope) runs for; `pooled` gets (query, ids) of
    the searches restricted to a prefetched pool."""
    calls = []
    real = selectors.memory_search

    def counted(**kwargs):
        if kwargs.get("candidate_ids") is None:
            calls.append(kwargs["query"])
        elif pooled is not None:
            pooled.append((kwargs["query"], list(kwargs["candidate_ids"])))
        return real(**kwargs)

    monkeypatch.setattr(selectors, "memory_search", counted)
    return calls


def test_the_next_turn_on_the_new_topic_is_served_from_the_prefetch(
    agents, bob, bob_memories, monkeypatch
):
    session = _prefetched_session(bob, agents[1])
    pooled = []
    searches = _no_search(monkeypatch, pooled)
    nxt = _run(bob, agents[1], TRAVEL_AGAIN, session)
    assert searches == [], "the prefetched pool must replace the search"
    assert pooled == [(TRAVEL_AGAIN, _entry(session.pk, bob)["ids"])]
    sent = _sent(nxt)
    assert bob_memories[0].pk in {item.memory_id for item in sent}
    assert all(item.components.get("prefetched") is True for item in sent)

    # Back on another topic: the full search runs again.
    other = _run(bob, agents[1], "Which printer on the third floor works?", session)
    assert searches == ["Which printer on the third floor works?"]
    assert not any(item.components.get("prefetched") for item in _sent(other))


def test_a_memory_deleted_after_the_prefetch_is_not_sent(agents, bob, bob_memories):
    session = _prefetched_session(bob, agents[1])
    memory_services.memory_delete(actor=member_actor(bob), memory=bob_memories[0])
    nxt = _run(bob, agents[1], TRAVEL_AGAIN, session)
    sent = {item.memory_id for item in _sent(nxt)}
    assert bob_memories[0].pk not in sent
    assert bob_memories[1].pk in sent
    assert TRAVEL_MEMORY not in str(nxt.steps.values_list("output", flat=True))


def test_another_members_session_never_reads_the_prefetch(
    agents, alice, bob, bob_memories, monkeypatch
):
    session = _prefetched_session(bob, agents[1])
    _remember(alice, "My business trips go through the travel desk on floor 2.")
    searches = _no_search(monkeypatch)
    theirs = _run(alice, agents[0], TRAVEL_AGAIN)
    assert searches == [TRAVEL_AGAIN]
    sent = _sent(theirs)
    assert not any(item.components.get("prefetched") for item in sent)
    assert not {item.memory_id for item in sent} & {m.pk for m in bob_memories}

    # Even an entry planted under her session's key with bob's ids is refused (not hers).
    entry = _entry(session.pk, bob)
    planted = prefetch.cache_key(theirs.session_id, [f"user:{alice.pk}"], entry["model_id"])
    cache.set(planted, entry, 60)
    again = _run(alice, agents[0], TRAVEL_AGAIN, theirs.session)
    assert not {item.memory_id for item in _sent(again)} & {m.pk for m in bob_memories}
    assert not any(item.components.get("prefetched") for item in _sent(again))


def test_a_template_without_retrieval_queues_no_prefetch(
    bob, bob_agent, monkeypatch, django_capture_on_commit_callbacks
):
    queued = []
    monkeypatch.setattr(agent_tasks.run_after, "apply_async", lambda *a, **k: None)
    monkeypatch.setattr(
        agent_tasks.prefetch_next_turn, "apply_async", lambda args, **k: queued.append(args)
    )
    with django_capture_on_commit_callbacks(execute=True):
        _run(bob, bob_agent, LUNCH)
    assert queued == []


SHANGHAI_NOODLES = "A Shanghai noodle recipe needs five spices."


@pytest.fixture
def travel_memories(bob, bob_memories):
    """Paraphrases of the travel question with no word of it, and one memory that names the
    question's rarest word (Shanghai) but is about something else: nearest by vector are the
    paraphrases, the hybrid ranking puts the exact word ahead of them."""
    from cadre.memory.embeddings import embed_memories
    from cadre.memory.models import Memory

    memories = (
        *bob_memories,
        _remember(bob, "Work travel to China: airline seats and rooms are reserved via the desk."),
        _remember(bob, "Reservations of airfare and lodging for work travel go through the desk."),
        _remember(bob, "Travel arrangements for work journeys need the manager's sign-off."),
        _remember(bob, SHANGHAI_NOODLES),
    )
    embed_memories(Memory.objects.filter(pk__in=[memory.pk for memory in memories]))
    return memories


def _full_search(agent, bob, text):
    from cadre.agents.runtime.records.grants import agent_actor

    return selectors.memory_search(
        actor=agent_actor(agent), query=text, top_k=3, scope_keys=[f"user:{bob.pk}"]
    )


def test_a_served_turn_sends_what_the_full_search_would(agents, bob, travel_memories):
    from cadre.agents.runtime.records.grants import agent_actor

    session = _prefetched_session(bob, agents[1])
    nxt = _run(bob, agents[1], TRAVEL_AGAIN, session)
    sent = sorted(_sent(nxt), key=lambda item: item.rank)
    assert all(item.components.get("prefetched") is True for item in sent)

    full = _full_search(agents[1], bob, TRAVEL_AGAIN)
    assert [item.memory_id for item in sent] == [hit.memory.pk for hit in full]
    assert [item.score for item in sent] == pytest.approx([hit.score for hit in full], abs=1e-4)
    # The fixture is one where similarity alone would send something else.
    nearest = selectors.memory_search(
        actor=agent_actor(agents[1]),
        scope_keys=[f"user:{bob.pk}"],
        query=TRAVEL_AGAIN,
        top_k=3,
        mode="vector",
    )
    shanghai = next(m.pk for m in travel_memories if m.content == SHANGHAI_NOODLES)
    assert shanghai in {item.memory_id for item in sent}
    assert shanghai not in {hit.memory.pk for hit in nearest}


def test_a_served_turn_records_the_ranking_components(agents, bob, travel_memories):
    session = _prefetched_session(bob, agents[1])
    nxt = _run(bob, agents[1], TRAVEL_AGAIN, session)
    sent = _sent(nxt)
    assert len(sent) == 3
    for item in sent:
        parts = item.components
        assert parts["prefetched"] is True and parts["prefetch_match"] >= 0.65
        assert {"vector_rank", "vector_similarity", "recency", "rrf", "score_before_mmr"} <= set(
            parts
        )
        assert {"mmr", "mmr_redundancy"} <= set(parts)
    assert all("lexical_rank" in item.components for item in sent), "all share a query word"
    shanghai = next(item for item in sent if item.memory.content == SHANGHAI_NOODLES)
    assert shanghai.components["lexical_rank"] < shanghai.components["vector_rank"]
    # The record keeps what diversity passed over, flagged the same way.
    record = sent[0].context
    assert record.passed_over is not None
    assert all(entry["components"]["prefetched"] is True for entry in record.passed_over)


def test_a_served_turn_never_sends_a_memory_gone_from_the_pool(agents, bob, travel_memories):
    from datetime import timedelta

    from django.utils import timezone

    from cadre.memory.models import Memory

    session = _prefetched_session(bob, agents[1])
    shanghai = next(m for m in travel_memories if m.content == SHANGHAI_NOODLES)
    superseded, expired = travel_memories[0], travel_memories[1]
    Memory.objects.filter(pk=superseded.pk).update(status=Memory.Status.SUPERSEDED)
    Memory.objects.filter(pk=expired.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    Memory.objects.filter(pk=shanghai.pk).update(scope_key="user:0")  # out of bob's reach
    nxt = _run(bob, agents[1], TRAVEL_AGAIN, session)
    sent = _sent(nxt)
    assert sent and all(item.components.get("prefetched") for item in sent)
    assert not {item.memory_id for item in sent} & {superseded.pk, expired.pk, shanghai.pk}
    record = sent[0].context
    assert not {entry["id"] for entry in record.passed_over} & {
        superseded.pk,
        expired.pk,
        shanghai.pk,
    }
