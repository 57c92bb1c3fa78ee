"""Chinese and mixed-language memory found through the scoped search, short queries skip
recall, and a search made for a model call leaves a ContextRecord that traces both ways."""

from __future__ import annotations

from cadre.llm import estimate_tokens
from cadre.memory import selectors, services
from cadre.memory.models import ContextRecord, ContextRecordItem
from tests.memory.conftest import actor


def add(member, content, **fields):
    fields.setdefault("scope", "user")
    fields.setdefault("kind", "fact")
    fields.setdefault("source_kind", "user_statement")
    return services.memory_add(actor=actor(member), content=content, **fields)


def top(member, query, **options):
    hits = selectors.memory_search(actor=actor(member), query=query, **options).hits
    return hits[0].memory.content if hits else None


def test_chinese_memory_is_found_by_a_chinese_question(bob, run_async):
    with run_async():
        add(bob, "客户华为的对接人是王芳，电话在CRM里")
        add(bob, "我更喜欢用表格展示季度数据", kind="preference")
        add(bob, "The Q3 offsite is in Hangzhou")
    assert top(bob, "华为的对接人是谁") == "客户华为的对接人是王芳，电话在CRM里"
    assert top(bob, "季度数据怎么展示") == "我更喜欢用表格展示季度数据"


def test_mixed_language_memory_is_found_from_either_language(bob, run_async):
    with run_async():
        add(bob, "下周三的 demo 要用 staging 环境，不要用 production")
        add(bob, "Lunch orders go through the Meituan group account")
    assert top(bob, "which environment for the demo") == (
        "下周三的 demo 要用 staging 环境，不要用 production"
    )
    assert top(bob, "demo 用哪个环境") == "下周三的 demo 要用 staging 环境，不要用 production"
    assert top(bob, "美团 lunch account") == "Lunch orders go through the Meituan group account"


def test_short_contentless_queries_skip_recall(bob):
    add(bob, "ok is the code name of project Okapi")
    for query in ("ok", "好的", "👍", "thanks!"):
        result = selectors.memory_search(actor=actor(bob), query=query)
        assert (result.recalled, result.hits) == (False, [])
    assert selectors.memory_search(actor=actor(bob), query="Okapi").recalled


def test_token_estimate_is_deterministic_and_counts_cjk_per_character():
    assert estimate_tokens("") == 0
    assert estimate_tokens("周报发给李伟") == 6
    assert estimate_tokens("send the weekly report") == 6  # 4 words * 4/3, rounded up
    assert estimate_tokens("demo 用 staging") == 4


def test_search_for_a_model_call_writes_a_context_record(bob, run_async):
    with run_async():
        first = add(
            bob,
            "Quotes to Huawei need director approval above 15 percent discount",
            kind="requirement",
        )
        add(bob, "Huawei procurement contact is Zhao Lei")
        add(bob, "My cat is called Mochi")
    result = selectors.memory_search(
        actor=actor(bob),
        query="Huawei quote discount approval",
        top_k=2,
        on_behalf_of={"run_id": "run-42", "step_id": "step-3", "trace_id": "ab" * 16},
    )
    record = result.context_record
    assert list(result) == result.hits  # the result is the list of hits
    assert (record.run_id, record.step_id, record.trace_id) == ("run-42", "step-3", "ab" * 16)
    assert (record.actor_type, record.actor_id) == ("member", str(bob.pk))
    items = list(record.items.order_by("rank"))
    assert [item.memory_id for item in items] == [hit.memory.pk for hit in result.hits]
    assert items[0].memory_id == first.pk and items[0].memory_version == first.version
    assert [item.score for item in items] == [hit.score for hit in result.hits]
    assert record.total_tokens == sum(item.tokens for item in items) > 0
    # A bad memory leads to every answer it influenced.
    influenced = selectors.memory_influence(actor(bob), first.pk)
    assert list(influenced) == [record]


def test_search_without_a_model_call_writes_no_context_record(bob):
    add(bob, "Huawei procurement contact is Zhao Lei")
    selectors.memory_search(actor=actor(bob), query="Huawei contact")
    assert not ContextRecord.objects.exists()
    assert not ContextRecordItem.objects.exists()


def test_context_records_api_lists_what_a_memory_was_sent_to(bob, client_for, run_async):
    with run_async():
        memory = add(bob, "Huawei procurement contact is Zhao Lei")
    client = client_for(bob)
    response = client.post(
        "/api/v1/memories/search/",
        {"query": "who is the Huawei contact", "run_id": "run-7", "step_id": "s1"},
        format="json",
    )
    assert response.status_code == 200
    record_id = response.json()["context_record_id"]
    assert record_id is not None
    listed = client.get(f"/api/v1/memories/{memory.pk}/context-records/").json()["results"]
    assert [row["id"] for row in listed] == [record_id]
    assert listed[0]["items"][0]["memory"] == memory.pk
    detail = client.get(f"/api/v1/memory-context-records/{record_id}/").json()
    assert detail["run_id"] == "run-7"
