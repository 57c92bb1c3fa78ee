"""The dedup funnel: exact (write time) -> near duplicate (cosine among top candidates) ->
judge (rules, or a model when configured), with the conflict rule deciding updates."""

from __future__ import annotations

import json

from cadre.governance.models import AuditEvent
from cadre.memory import dedup, selectors, services
from cadre.memory.models import Memory, MemoryTask, MemoryVersion
from tests.memory.conftest import actor


def add(member, content, **fields):
    fields.setdefault("scope", "user")
    fields.setdefault("kind", "preference")
    fields.setdefault("source_kind", "user_statement")
    return services.memory_add(actor=actor(member), content=content, **fields)


def dedup_result(memory) -> dict:
    return MemoryTask.objects.get(memory=memory, kind="dedup").result


def test_normalized_hash_ignores_case_spacing_and_trailing_punctuation():
    assert dedup.content_hash("Always CC my manager.") == dedup.content_hash(
        "  always cc   my manager "
    )
    assert dedup.content_hash("周报发给李伟。") == dedup.content_hash("周报发给李伟")
    assert dedup.content_hash("budget 2M") != dedup.content_hash("budget 3M")


def test_paraphrase_is_merged_keeping_both_provenances(bob, run_async):
    with run_async():
        first = add(
            bob, "I prefer the weekly report as a PDF", source_ref={"conversation_id": "c1"}
        )
    with run_async():
        second = add(
            bob,
            "I'd prefer to get the weekly report as a PDF",
            source_ref={"conversation_id": "c2"},
        )

    result = dedup_result(second)
    assert result["decision"] == "duplicate" and result["target_id"] == first.pk
    assert result["judge"] == "rules"
    first.refresh_from_db()
    second.refresh_from_db()
    assert second.status == "superseded" and second.superseded_by_id == first.pk
    assert first.status == "active"
    assert [p["source_ref"].get("conversation_id") for p in first.provenance] == ["c1", "c2"]
    assert MemoryVersion.objects.filter(memory=first, change="merge").exists()
    assert MemoryVersion.objects.filter(memory=second, change="merge").exists()
    merge = AuditEvent.objects.get(action="memory.merge")
    assert merge.changes["kept"] == first.pk and merge.changes["absorbed"] == second.pk
    assert "PDF" not in json.dumps(merge.changes)
    assert [
        h.memory.pk
        for h in selectors.memory_search(actor=actor(bob), query="weekly report PDF").hits
    ] == [first.pk]


def test_a_changed_value_is_an_update_not_a_duplicate(bob, run_async):
    # all-MiniLM-L6-v2 puts these at cosine 0.95: only the value words tell them apart.
    with run_async():
        old = add(bob, "The customer's budget is 2 million yuan", kind="fact")
    with run_async():
        new = add(bob, "The customer's budget is 3 million yuan", kind="fact")
    result = dedup_result(new)
    assert result["decision"] == "update" and result["target_id"] == old.pk
    old.refresh_from_db()
    assert old.status == "superseded" and old.superseded_by_id == new.pk
    assert "newer user_statement over older" in result["rule"]


def test_user_statement_outranks_an_earlier_model_inference(bob, run_async):
    with run_async():
        inferred = add(bob, "The client prefers calls on Tuesday", source_kind="model_inference")
    with run_async():
        stated = add(bob, "The client prefers calls on Thursday")
    assert dedup_result(stated)["rule"] == "user_statement over model_inference"
    inferred.refresh_from_db()
    assert inferred.status == "superseded" and inferred.superseded_by_id == stated.pk
    version = MemoryVersion.objects.filter(memory=inferred).last()
    assert "user_statement over model_inference" in version.reason


def test_a_newer_model_inference_does_not_override_a_user_statement(bob, run_async):
    with run_async():
        stated = add(bob, "The client prefers calls on Tuesday")
    with run_async():
        inferred = add(bob, "The client prefers calls on Thursday", source_kind="model_inference")
    stated.refresh_from_db()
    inferred.refresh_from_db()
    assert stated.status == "active"
    assert inferred.status == "archived" and inferred.superseded_by_id == stated.pk
    assert (
        "user_statement over model_inference"
        in MemoryVersion.objects.filter(memory=inferred).last().reason
    )


def test_unrelated_memory_is_new_and_dedup_stays_within_a_scope(chart, run_async):
    bob = chart["bob"]
    with run_async():
        personal = add(bob, "I prefer the weekly report as a PDF")
        other = add(bob, "Our office is in Shanghai", kind="fact")
        shared = add(
            bob,
            "I'd prefer to get the weekly report as a PDF",
            scope="department",
            scope_id=chart["sales"].pk,
        )
    assert dedup_result(other)["decision"] == "new"
    # Bob's department memory waits for review: dedup leaves it alone until it is accepted.
    assert dedup_result(shared)["decision"] == "skipped"
    shared = services.memory_verify(
        actor=actor(chart["alice"]), memory=shared, decision="accept", expected_version=1
    )
    assert services.memory_dedup(memory=shared)["decision"] == "new"  # other scope: none
    assert (
        Memory.objects.filter(pk__in=[personal.pk, other.pk, shared.pk], status="active").count()
        == 3
    )


def test_model_judge_decides_when_a_model_is_configured(bob, run_async, fake_model):
    with run_async():
        first = add(bob, "I prefer the weekly report as a PDF")
    server = fake_model(
        lambda body: {"decision": "new", "target_id": None, "reason": "different audience"}
    )
    with run_async():
        second = add(bob, "I'd prefer to get the weekly report as a PDF")
    result = dedup_result(second)
    assert result["decision"] == "new" and result["judge"] == "model:fake-memory-model"
    assert Memory.objects.get(pk=first.pk).status == "active"
    assert Memory.objects.get(pk=second.pk).status == "active"
    request = server.requests[-1]
    assert request["authorization"] == "Bearer sk-test-key"
    assert f"id {first.pk}" in request["body"]["messages"][1]["content"]


def test_model_judge_failure_falls_back_to_rules(bob, run_async, fake_model):
    with run_async():
        first = add(bob, "I prefer the weekly report as a PDF")
    fake_model(lambda body: {"decision": "maybe"})
    with run_async():
        second = add(bob, "I'd prefer to get the weekly report as a PDF")
    result = dedup_result(second)
    assert result["judge"] == "rules (model failed)"
    assert result["decision"] == "duplicate" and result["target_id"] == first.pk


def test_compression_rate_counts_exact_and_near_merges(bob, org_a, run_async):
    with run_async():
        add(bob, "I prefer the weekly report as a PDF")
        add(bob, "I prefer the weekly report as a PDF.")  # exact
        add(bob, "I'd prefer to get the weekly report as a PDF")  # near
        add(bob, "Our office is in Shanghai", kind="fact")  # new
    stats = selectors.memory_dedup_stats(org_a)
    assert stats == {
        "received": 4,
        "written": 3,
        "merged_exact": 1,
        "merged_near": 1,
        "compression_rate": 0.5,
    }


def judged(new_text, old_text, similarity, *, kind="preference"):
    new = Memory(pk=2, content=new_text, kind=kind)
    old = Memory(pk=1, content=old_text, kind=kind)
    return dedup.RuleJudge().judge(new, [dedup.Candidate(memory=old, similarity=similarity)])


def test_rule_judge_never_calls_a_changed_value_or_a_negation_a_duplicate():
    assert (
        judged("I like tea in the afternoon", "I don't like tea in the afternoon", 0.95).decision
        == "update"
    )
    assert (
        judged("Quotes are valid for 45 days", "Quotes are valid for 30 days", 0.96).decision
        == "update"
    )
    assert judged("My manager is Zhou Min", "My manager is Li Wei", 0.93).decision == "update"
    assert judged("客户预算是300万", "客户预算是200万", 0.97).decision == "update"
    assert (
        judged(
            "The account manager for Huawei is Wang Fang",
            "Huawei account manager is Wang Fang",
            0.976,
        ).decision
        == "duplicate"
    )
    assert (
        judged("Lunch is served at noon", "The VPN password rotates monthly", 0.76).decision
        == "new"
    )
