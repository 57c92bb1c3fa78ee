"""Hybrid memory search: tokenization, recall gating, filters, time travel, isolation, and the
pgvector iterative scan (real PostgreSQL, real local embedding model, no mocks)."""

from __future__ import annotations

import hashlib
import random
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from cadre.memory import embeddings, search
from cadre.memory.models import Memory, MemoryEmbedding
from cadre.memory.text import lexical_document, match_length
from tests.factories import OrganizationFactory


def remember(org, content: str, *, scope_key: str = "agent:1", **fields) -> Memory:
    attributes = fields.pop("attributes", {})
    scope, _, scope_id = scope_key.partition(":")
    return Memory.objects.create(
        organization=org,
        scope=scope,
        scope_id=int(scope_id) if scope_id else None,
        scope_key=scope_key,
        content=content,
        attributes=attributes,
        search_text=lexical_document(content, attributes),
        content_hash=hashlib.sha256(content.encode()).hexdigest(),
        **fields,
    )


def contents(hits) -> list[str]:
    return [hit.memory.content for hit in hits]


def find(org, query: str, *, mode: str = "lexical", scope_keys=("agent:1",), **kwargs):
    # The engine itself (only the gate calls it in the code): its ranking and filters.
    return search._search(
        organization=org, scope_keys=list(scope_keys), query=query, mode=mode, **kwargs
    )


# --- tokenization and recall gating -------------------------------------------------------


def test_lexical_document_segments_chinese_and_keeps_english_tokens():
    document = lexical_document("每周一把周报发给李伟, Q3预算 Review!", {"speaker": "Zhang San"})
    tokens = document.split()
    for token in ("周报", "发给", "李伟", "q3", "预算", "review", "zhang", "san"):
        assert token in tokens
    assert document == document.lower()


def test_a_phrase_says_about_as_much_in_chinese_as_in_english():
    assert match_length("I like green tea") == 16
    assert match_length("我喜欢绿茶") == 15  # five ideographs
    assert match_length("我的工号是SZ20931") == 22  # mixed
    assert match_length("谢谢你") == 9 < match_length("thank you!!!")


def test_lexical_document_adds_date_words_from_attributes():
    document = lexical_document("Went hiking", {"session_date": "2023-05-08T13:56:00"})
    assert {"may", "2023", "8"} <= set(document.split())


@pytest.mark.parametrize(
    "query",
    [
        "ok",
        "OK!",
        "好的",
        "thanks",
        "Thank you!",
        "嗯",
        "谢谢\uff01",
        "👍🎉",
        "  ",
        "?",
        "收到",
        "hi",
    ],
)
def test_contentless_queries_do_not_trigger_recall(query):
    assert search.should_recall(query) is False


@pytest.mark.parametrize(
    "query", ["周报发给谁", "budget review Q3", "Who is Li Wei?", "Q3?", "我的咖啡偏好"]
)
def test_questions_trigger_recall(query):
    assert search.should_recall(query) is True


# --- lexical side ------------------------------------------------------------------------


@pytest.mark.django_db
def test_chinese_question_finds_chinese_memory(org_a):
    remember(org_a, "下午三点开会讨论招聘计划")
    remember(org_a, "每周一把周报发给李伟")
    remember(org_a, "报销单需要财务审批")
    hits = find(org_a, "周报发给谁")
    assert contents(hits)[0] == "每周一把周报发给李伟"
    assert hits[0].components["lexical_rank"] == 1


@pytest.mark.django_db
def test_mixed_language_memory_found_by_shared_english_tokens(org_a):
    remember(org_a, "Q3预算 review 周五截止")
    remember(org_a, "Team offsite planning in Hangzhou")
    # "budget" and "预算" are different words: lexically only q3/review connect them.
    hits = find(org_a, "budget review Q3")
    assert contents(hits) == ["Q3预算 review 周五截止"]


@pytest.mark.django_db
def test_rare_terms_outrank_common_ones(org_a):
    for index in range(8):
        remember(org_a, f"Meeting notes number {index} about the project")
    remember(org_a, "The project password rotation happens quarterly")
    hits = find(org_a, "project password rotation")
    assert contents(hits)[0] == "The project password rotation happens quarterly"


# --- isolation, statuses, time travel, filters ---------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("mode", ["lexical", "hybrid"])
def test_memories_outside_scope_keys_or_organization_never_appear(org_a, org_b, mode):
    mine = remember(org_a, "The deploy key lives in the vault", scope_key="user:1")
    remember(org_a, "The deploy key lives in the vault", scope_key="user:2")
    remember(org_b, "The deploy key lives in the vault", scope_key="user:1")
    if mode == "hybrid":
        embeddings.embed_memories(Memory.objects.all())
    hits = find(org_a, "where is the deploy key", mode=mode, scope_keys=["user:1"])
    assert [hit.memory.pk for hit in hits] == [mine.pk]
    assert find(org_a, "deploy key", mode=mode, scope_keys=["user:3"]) == []


@pytest.mark.django_db
def test_only_active_unexpired_unpurged_memories_by_default(org_a):
    now = timezone.now()
    remember(org_a, "parking spot is B12 active")
    remember(org_a, "parking spot is B12 archived", status=Memory.Status.ARCHIVED)
    remember(org_a, "parking spot is B12 superseded", status=Memory.Status.SUPERSEDED)
    remember(org_a, "parking spot is B12 deleted", status=Memory.Status.DELETED, deleted_at=now)
    remember(org_a, "parking spot is B12 expired", expires_at=now - timedelta(minutes=1))
    remember(org_a, "parking spot is B12 expiring", expires_at=now + timedelta(days=1))
    remember(org_a, "parking spot is B12 purged", purged_at=now)
    assert sorted(contents(find(org_a, "parking spot"))) == [
        "parking spot is B12 active",
        "parking spot is B12 expiring",
    ]
    with_archived = find(org_a, "parking spot", include_statuses=["active", "archived"])
    assert "parking spot is B12 archived" in contents(with_archived)
    assert "parking spot is B12 deleted" not in contents(with_archived)


@pytest.mark.django_db
def test_as_of_returns_what_was_valid_then(org_a):
    t0 = timezone.now() - timedelta(days=30)
    t1 = timezone.now() - timedelta(days=10)
    old = remember(
        org_a,
        "Manager of the Shanghai office is Wang",
        valid_from=t0,
        valid_to=t1,
        created_at=t0,
        status=Memory.Status.SUPERSEDED,
    )
    new = remember(org_a, "Manager of the Shanghai office is Chen", valid_from=t1, created_at=t1)
    remember(
        org_a,
        "Manager of the Shanghai office is Liu (draft)",
        status=Memory.Status.DELETED,
        valid_from=t0,
        created_at=t0,
        deleted_at=t1,
    )
    between = find(org_a, "Shanghai office manager", as_of=t0 + timedelta(days=5))
    assert [hit.memory.pk for hit in between] == [old.pk]
    assert [hit.memory.pk for hit in find(org_a, "Shanghai office manager")] == [new.pk]
    later = find(org_a, "Shanghai office manager", as_of=t1 + timedelta(days=1))
    assert [hit.memory.pk for hit in later] == [new.pk]
    before_anything = find(org_a, "Shanghai office manager", as_of=t0 - timedelta(days=1))
    assert before_anything == []


@pytest.mark.django_db
def test_optional_filters(org_a):
    now = timezone.now()
    a = remember(
        org_a,
        "invoice rule alpha",
        kind="requirement",
        tags=["finance", "eu"],
        source_kind="tool_result",
        attributes={"region": "eu", "team": "ap"},
        observed_at=now - timedelta(days=40),
    )
    b = remember(
        org_a,
        "invoice rule beta",
        kind="fact",
        tags=["finance"],
        attributes={"region": "us"},
        observed_at=now - timedelta(days=2),
    )

    def ids(**kwargs):
        return {hit.memory.pk for hit in find(org_a, "invoice rule", **kwargs)}

    assert ids() == {a.pk, b.pk}
    assert ids(kinds=["requirement"]) == {a.pk}
    assert ids(tags=["finance", "eu"]) == {a.pk}
    assert ids(tags=["finance"]) == {a.pk, b.pk}
    assert ids(source_kinds=["user_statement"]) == {b.pk}
    assert ids(attributes={"region": "eu"}) == {a.pk}
    assert ids(since=now - timedelta(days=7)) == {b.pk}
    assert ids(until=now - timedelta(days=7)) == {a.pk}


# --- hybrid ----------------------------------------------------------------------------


@pytest.mark.django_db
def test_vector_side_finds_a_paraphrase_lexical_cannot(org_a):
    remember(org_a, "Bob's flight to Berlin departs on Friday morning")
    remember(org_a, "The quarterly report is due next week")
    remember(org_a, "The coffee machine on floor 3 is broken")
    embeddings.embed_memories(Memory.objects.all())
    query = "When does the plane leave for Germany?"
    assert find(org_a, query, mode="lexical") == []
    hits = find(org_a, query, mode="hybrid", top_k=3)
    assert contents(hits)[0] == "Bob's flight to Berlin departs on Friday morning"
    components = hits[0].components
    assert components["vector_rank"] == 1
    assert {"rrf", "recency", "vector_similarity", "score_before_mmr"} <= set(components)


@pytest.mark.django_db
def test_hybrid_hit_explains_both_sides(org_a):
    remember(org_a, "Alice prefers window seats on long flights")
    remember(org_a, "Alice's team ships the mobile app on Tuesdays")
    embeddings.embed_memories(Memory.objects.all())
    hit = find(org_a, "Which seat does Alice prefer on flights?", mode="hybrid")[0]
    assert hit.memory.content == "Alice prefers window seats on long flights"
    assert hit.components["lexical_rank"] == 1 and hit.components["vector_rank"] == 1
    assert hit.score > 0


@pytest.mark.django_db
def test_conversation_boost_breaks_a_tie(org_a):
    first = remember(org_a, "Standup moved to 10:30", conversation_id="c-1")
    second = remember(org_a, "Standup moved to 10:30", conversation_id="c-2")
    embeddings.embed_memories(Memory.objects.all())
    for wanted in (first, second):
        hits = find(org_a, "when is standup", mode="hybrid", conversation_id=wanted.conversation_id)
        assert hits[0].memory.pk == wanted.pk
        assert "conversation_boost" in hits[0].components


@pytest.mark.django_db
def test_neighbouring_turn_lends_score_to_the_answer(org_a):
    question = remember(
        org_a,
        "Alice: what time is the dentist appointment tomorrow?",
        conversation_id="s1",
        attributes={"turn": 4},
    )
    answer = remember(
        org_a, "Bob: 9 in the morning, don't be late", conversation_id="s1", attributes={"turn": 5}
    )
    remember(
        org_a,
        "Bob: the weather was lovely in the morning",
        conversation_id="s1",
        attributes={"turn": 9},
    )
    embeddings.embed_memories(Memory.objects.all())
    hits = find(org_a, "dentist appointment time", mode="hybrid")
    by_pk = {hit.memory.pk: hit for hit in hits}
    assert hits[0].memory.pk == question.pk
    assert by_pk[answer.pk].components.get("neighbour_bonus", 0) > 0


@pytest.mark.django_db
def test_empty_query_or_scope_returns_nothing(org_a):
    remember(org_a, "anything at all")
    assert find(org_a, "   ") == []
    assert find(org_a, "anything", scope_keys=[]) == []


# --- the vector side through the partial HNSW index --------------------------------------


def _unit(rng: random.Random, dimension: int) -> list[float]:
    vector = [rng.gauss(0, 1) for _ in range(dimension)]
    norm = sum(x * x for x in vector) ** 0.5
    return [x / norm for x in vector]


@pytest.mark.django_db
def test_iterative_scan_returns_k_rows_under_a_selective_filter(org_a):
    """Without iterative scan, HNSW returns ef_search candidates and the filter then drops
    most of them; with it, the scan continues until k rows pass the filter."""
    model = embeddings.register_model("test/random-16", "test", "random-16", 16)
    rng = random.Random(7)
    organization = OrganizationFactory()
    rows = []
    for index in range(3000):
        memory = Memory(
            organization=org_a,
            scope="agent",
            scope_id=1,
            scope_key="agent:1",
            content=f"row {index}",
            attributes={"rare": index % 100 == 0},  # 1 % of the rows
            content_hash=str(index),
        )
        rows.append(memory)
    Memory.objects.bulk_create(rows)
    Memory.objects.create(
        organization=organization,
        scope="agent",
        scope_id=1,
        scope_key="agent:1",
        content="other org",
        content_hash="x",
    )
    MemoryEmbedding.objects.bulk_create(
        [MemoryEmbedding(memory=m, model=model, embedding=_unit(rng, 16)) for m in rows]
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memory_memory")
        cursor.execute("ANALYZE memory_memoryembedding")
    query = _unit(rng, 16)
    where, params = search._filter_sql(
        organization=org_a, scope_keys=["agent:1"], attributes={"rare": True}, now=timezone.now()
    )
    settings = search.with_settings(ef_search=10)
    kind = embeddings.vector_type(model)
    plan_sql = (
        f"SELECT e.memory_id FROM memory_memoryembedding e JOIN memory_memory m "
        f"ON m.id = e.memory_id WHERE e.model_id = %s AND {where} "
        f"ORDER BY (e.embedding::{kind}) <#> %s::{kind} LIMIT 10"
    )
    plan_params = [model.pk, *params, search._vector_literal(query)]

    def run(iterative: bool) -> tuple[list, str]:
        with transaction.atomic(), connection.cursor() as cursor:
            # This table is small enough for an exact scan + sort; make the planner use HNSW.
            cursor.execute("SET LOCAL enable_sort = off")
            cursor.execute("EXPLAIN " + plan_sql, plan_params)
            plan = "\n".join(row[0] for row in cursor.fetchall())
            print(plan)
            assert "memory_embedding_hnsw_" in plan
            if not iterative:
                cursor.execute("SET LOCAL hnsw.iterative_scan = off")
                cursor.execute("SET LOCAL hnsw.ef_search = 10")
                cursor.execute(plan_sql, plan_params)
                return cursor.fetchall(), ""
        return search.vector_candidates(
            query, model, where, params, limit=10, settings=settings
        ), ""

    plain, _ = run(iterative=False)
    found, _ = run(iterative=True)
    assert len(plain) < 10
    assert len(found) == 10
    exact = search.vector_candidates(
        query, model, where, params, limit=10, settings=settings, exact=True
    )
    assert len(exact) == 10
    assert [pk for pk, _ in found] == [pk for pk, _ in exact]


def test_english_words_are_stemmed_on_both_sides():
    assert search.tokenize("Painted paintings, hiking and hiked") == [
        "paint",
        "paint",
        "hik",
        "and",
        "hik",
    ]
    assert search.tokenize("studies studied studying") == ["study"] * 3


@pytest.mark.django_db
def test_inflected_forms_match(org_a):
    remember(org_a, "Melanie painted a lake sunrise last year")
    remember(org_a, "Caroline went to a support group")
    hits = find(org_a, "When did Melanie paint a sunrise?")
    assert contents(hits)[0] == "Melanie painted a lake sunrise last year"


@pytest.mark.django_db
def test_hits_carry_complete_rows(org_a, django_assert_num_queries):
    remember(org_a, "Quarterly planning happens in March", tags=["planning"])
    embeddings.embed_memories(Memory.objects.all())
    hit = find(org_a, "quarterly planning", mode="hybrid")[0]
    with django_assert_num_queries(0):
        assert (hit.memory.tags, hit.memory.version) == (["planning"], 1)
        assert hit.memory.content_hash and hit.memory.source_kind


@pytest.mark.django_db
def test_small_filtered_sets_are_searched_exactly(org_a):
    model = embeddings.register_model("test/random-8", "test", "random-8", 8)
    rng = random.Random(3)
    rows = Memory.objects.bulk_create(
        [
            Memory(
                organization=org_a,
                scope="agent",
                scope_id=1,
                scope_key="agent:1",
                content=f"row {i}",
                content_hash=str(i),
            )
            for i in range(300)
        ]
    )
    MemoryEmbedding.objects.bulk_create(
        [MemoryEmbedding(memory=m, model=model, embedding=_unit(rng, 8)) for m in rows]
    )
    where, params = search._filter_sql(
        organization=org_a, scope_keys=["agent:1"], now=timezone.now()
    )
    settings = search.DEFAULT_SETTINGS
    filtered = search.count_filtered(where, params)
    assert filtered == 300 and search.prefer_brute_force(filtered, 50, settings)
    assert not search.prefer_brute_force(50_000, 50, settings)
    query = _unit(rng, 8)
    chosen = search.vector_candidates(
        query, model, where, params, limit=20, settings=settings, filtered=filtered
    )
    exact = search.vector_candidates(
        query, model, where, params, limit=20, settings=settings, exact=True
    )
    assert [pk for pk, _ in chosen] == [pk for pk, _ in exact]
    assert chosen[0][1] >= chosen[-1][1]


@pytest.mark.django_db
def test_other_turns_of_the_same_session_lend_a_little_score(org_a):
    remember(
        org_a,
        "Bob: we should book the Lisbon hotel",
        conversation_id="trip",
        attributes={"turn": 1},
    )
    remember(
        org_a,
        "Alice: the Lisbon flights are cheap in May",
        conversation_id="trip",
        attributes={"turn": 7},
    )
    embeddings.embed_memories(Memory.objects.all())
    hits = find(org_a, "Lisbon hotel booking", mode="hybrid")
    assert all("session_bonus" in hit.components for hit in hits)


@pytest.mark.django_db
def test_hnsw_settings_do_not_leak_into_the_callers_transaction(org_a):
    model = embeddings.register_model("test/random-4", "test", "random-4", 4)
    memory = remember(org_a, "one row")
    MemoryEmbedding.objects.create(memory=memory, model=model, embedding=[1, 0, 0, 0])
    where, params = search._filter_sql(
        organization=org_a, scope_keys=["agent:1"], now=timezone.now()
    )
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config('hnsw.ef_search', '33', true)")
    found = search.vector_candidates(
        [1, 0, 0, 0], model, where, params, limit=5, settings=search.with_settings(ef_search=77)
    )
    assert found == [(memory.pk, pytest.approx(1.0))]
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('hnsw.ef_search')")
        assert cursor.fetchone()[0] == "33"


@pytest.mark.django_db
def test_candidate_ids_rank_only_the_pool_with_the_same_filters(org_a):
    now = timezone.now()
    pool = [
        remember(org_a, "parking spot is B12 for visitors"),
        remember(org_a, "the parking garage closes at ten"),
        remember(org_a, "parking spot B12 superseded", status=Memory.Status.SUPERSEDED),
        remember(org_a, "parking spot B12 expired", expires_at=now - timedelta(minutes=1)),
        remember(org_a, "parking spot B12 of another scope", scope_key="agent:2"),
    ]
    outside = remember(org_a, "parking spot B12 is reserved on Mondays")
    embeddings.embed_memories(Memory.objects.all())
    ids = [memory.pk for memory in pool]
    hits = find(org_a, "where is parking spot B12?", mode="hybrid", candidate_ids=ids)
    assert [hit.memory.pk for hit in hits] == [pool[0].pk, pool[1].pk]
    assert outside.pk in {hit.memory.pk for hit in find(org_a, "parking spot B12", mode="hybrid")}
    # The same ranking as the whole scope's when the pool holds every candidate.
    everything = list(Memory.objects.values_list("pk", flat=True))
    full = find(org_a, "where is parking spot B12?", mode="hybrid")
    restricted = find(org_a, "where is parking spot B12?", mode="hybrid", candidate_ids=everything)
    assert [(h.memory.pk, h.score, h.components) for h in restricted] == [
        (h.memory.pk, h.score, h.components) for h in full
    ]
    assert find(org_a, "parking spot", mode="hybrid", candidate_ids=[]) == []
