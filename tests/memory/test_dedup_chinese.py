"""The dedup funnel on Chinese (and mixed) statements under the default embedding model, end to
end: memories written through the service as a member writes them, the dedup task run on
commit, real vectors (issue #34: 我的工位… was superseded by 我的工号… on a fresh install)."""

from __future__ import annotations

import pytest

from cadre.memory import dedup, embeddings, services
from cadre.memory.models import Memory, MemoryTask
from tests.memory.conftest import actor


def add(member, content, **fields):
    fields.setdefault("scope", "user")
    fields.setdefault("kind", "fact")
    fields.setdefault("source_kind", "user_statement")
    return services.memory_add(actor=actor(member), content=content, **fields)


def dedup_result(memory) -> dict:
    return MemoryTask.objects.get(memory=memory, kind="dedup").result


def written(member, run_async, first: str, second: str) -> tuple[Memory, Memory, dict]:
    with run_async():
        one = add(member, first)
    with run_async():
        two = add(member, second)
    one.refresh_from_db()
    two.refresh_from_db()
    return one, two, dedup_result(two)


@pytest.fixture(autouse=True)
def default_model(org_a):
    model = embeddings.active_model(org_a)
    assert (model.provider, model.name) == ("local", embeddings.LOCAL_MODEL_NAME)
    assert embeddings.LOCAL_MODEL_NAME == "multilingual-e5-small"
    return model


def test_desk_and_employee_number_are_two_facts(bob, run_async):
    desk, number, result = written(
        bob, run_async, "我的工位在 12 楼靠窗的位置", "我的工号是 SZ20931"
    )
    assert result["decision"] == "new"
    assert desk.status == number.status == Memory.Status.ACTIVE
    assert desk.superseded_by_id is None and number.superseded_by_id is None


def test_the_reverse_order_keeps_both_too(bob, run_async):
    number, desk, result = written(
        bob, run_async, "我的工号是 SZ20931", "我的工位在 12 楼靠窗的位置"
    )
    assert result["decision"] == "new"
    assert number.status == desk.status == Memory.Status.ACTIVE


def test_a_moved_desk_updates_the_old_one(bob, run_async):
    old, new, result = written(bob, run_async, "我的工位在12楼靠窗", "我的工位搬到了 15 楼")
    assert result["decision"] == "update" and result["target_id"] == old.pk
    assert old.status == Memory.Status.SUPERSEDED and old.superseded_by_id == new.pk
    assert new.status == Memory.Status.ACTIVE


def test_a_reworded_allergy_is_a_duplicate(bob, run_async):
    first, second, result = written(bob, run_async, "我对花生过敏", "我花生过敏")
    assert result["decision"] == "duplicate" and result["target_id"] == first.pk
    assert first.status == Memory.Status.ACTIVE
    assert second.status == Memory.Status.SUPERSEDED and second.superseded_by_id == first.pk


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("我对花生过敏", "我对青霉素过敏"),
        ("我的手机号是 13800138000", "我的备用手机号是 13912345678"),
        ("我的经理是李伟", "我的导师是李伟"),
        ("我对青霉素过敏", "我妈妈对青霉素过敏"),
        ("我的 manager 是 Li Wei", "我的 mentor 是 Li Wei"),
        ("My desk is on the 12th floor by the window", "My employee number is SZ20931"),
        ("I'm allergic to peanuts", "I'm allergic to penicillin"),
    ],
)
def test_different_facts_with_shared_words_both_stay(bob, run_async, first, second):
    one, two, result = written(bob, run_async, first, second)
    assert result["decision"] == "new", result
    assert one.status == two.status == Memory.Status.ACTIVE


def test_english_reword_and_new_value(bob, run_async):
    first, second, result = written(
        bob,
        run_async,
        "I prefer the weekly report as a PDF",
        "I'd prefer to get the weekly report as a PDF",
    )
    assert result["decision"] == "duplicate" and second.superseded_by_id == first.pk
    old, new, result = written(
        bob,
        run_async,
        "The customer's budget is 2 million yuan",
        "The customer's budget is 3 million yuan",
    )
    assert result["decision"] == "update" and old.superseded_by_id == new.pk


def judged(new_text: str, old_text: str) -> str:
    """The rule judge on two statements its vectors call near paraphrases (cosine 0.99)."""
    new = Memory(pk=2, content=new_text, kind="fact")
    old = Memory(pk=1, content=old_text, kind="fact")
    candidate = dedup.Candidate(memory=old, similarity=0.99)
    return dedup.RuleJudge().judge(new, [candidate]).decision


@pytest.mark.parametrize(
    ("new", "old", "decision"),
    [
        ("我的工号是 SZ20931", "我的工位在 12 楼靠窗的位置", "new"),
        ("我对青霉素过敏", "我对花生过敏", "new"),
        ("我的备用手机号是 13912345678", "我的手机号是 13800138000", "new"),
        ("我的手机号是 13800138000", "我的备用手机号是 13912345678", "new"),
        ("我经理的经理是周敏", "我的经理是李伟", "new"),
        ("我儿子今年 5 岁", "我女儿今年 8 岁", "new"),
        ("我妈妈对青霉素过敏", "我对青霉素过敏", "new"),
        ("我老婆的 PTO 是 12 月 20 日到 1 月 3 日", "我的 PTO 是 12 月 20 日到 1 月 3 日", "new"),
        ("我的 Jenkins 账号是 lw2931", "我的 VPN 账号是 lw2931", "new"),
        ("我的 personal email 是 liwei88@gmail.com", "我的 email 是 li.wei@acme.com", "new"),
        ("我的工位搬到了 15 楼", "我的工位在12楼靠窗", "update"),
        ("我的经理换成了周敏", "我的经理是李伟", "update"),
        ("我不再对芒果过敏了", "我对芒果过敏", "update"),
        ("我现在喝 coffee 了", "我不喝 coffee", "update"),
        ("我的 VPN 账号改成了 lw2940", "我的 VPN 账号是 lw2931", "update"),
        ("我花生过敏", "我对花生过敏", "duplicate"),
    ],
)
def test_rule_judge_on_chinese_and_mixed_statements(new, old, decision):
    assert judged(new, old) == decision
