"""Adding memories: read-your-writes, validation, exact dedup at write time, audit without
content, tool trajectories."""

from __future__ import annotations

import json

import pytest

from cadre.errors import InvalidInput, NotFound, NotPermitted
from cadre.governance.models import AuditEvent
from cadre.memory import selectors, services
from cadre.memory.models import Memory, MemoryEmbedding, MemoryTask, MemoryVersion
from tests.memory.conftest import actor


def add(member, content, **fields):
    fields.setdefault("scope", "user")
    fields.setdefault("kind", "preference")
    fields.setdefault("source_kind", "user_statement")
    return services.memory_add(actor=actor(member), content=content, **fields)


def test_added_memory_is_gettable_and_lexically_searchable_at_once(bob):
    memory = add(bob, "I prefer the quarterly report as a PDF, not a spreadsheet")

    assert selectors.memory_get(actor(bob), memory.pk).content.startswith("I prefer")
    # No Celery task has run (on_commit never fired): no vector exists, yet search finds it.
    assert not MemoryEmbedding.objects.filter(memory=memory).exists()
    hits = selectors.memory_search(actor=actor(bob), query="quarterly report format").hits
    assert [hit.memory.pk for hit in hits] == [memory.pk]
    assert memory.search_text  # the lexical document was stored on write
    assert MemoryTask.objects.get(memory=memory).status == "waiting"


def test_add_records_provenance_author_and_an_addition_version(bob):
    memory = add(
        bob, "Use the blue template", source_ref={"conversation_id": "c1", "message_id": "m7"}
    )
    assert memory.scope_key == f"user:{bob.pk}"
    assert (memory.author_type, memory.author_id) == ("member", str(bob.pk))
    assert memory.provenance[0]["source_ref"]["message_id"] == "m7"
    version = MemoryVersion.objects.get(memory=memory)
    assert (version.version, version.change, version.new_content) == (
        1,
        "addition",
        "Use the blue template",
    )


def test_audit_of_add_carries_hash_and_length_but_never_the_text(bob):
    secret = "My home address is 12 Elm Street, my ID is 110101199003074211"
    memory = add(bob, secret, kind="fact")
    event = AuditEvent.objects.get(action="memory.add", target_id=str(memory.pk))
    dumped = json.dumps(event.changes, ensure_ascii=False) + event.target_label + event.reason
    assert "Elm" not in dumped and "110101" not in dumped
    assert event.changes["after"]["content_sha256"] == memory.content_hash
    assert event.changes["after"]["content_length"] == len(secret)


def test_memory_str_is_not_used_as_audit_label_with_content(bob):
    memory = add(bob, "Salary expectations: 40k per month", kind="fact")
    event = AuditEvent.objects.get(action="memory.add", target_id=str(memory.pk))
    assert "40k" not in event.target_label


def test_exact_duplicate_in_the_same_scope_is_merged_not_stored_twice(bob):
    first = add(bob, "Always cc my manager on customer emails.", kind="requirement")
    again = add(
        bob,
        "  always CC my manager on customer emails ",
        kind="requirement",
        source_ref={"conversation_id": "c2"},
    )

    assert again.pk == first.pk
    assert again.dedup_decision == "exact_duplicate"
    assert Memory.objects.filter(scope_key=f"user:{bob.pk}").count() == 1
    first.refresh_from_db()
    assert len(first.provenance) == 2 and first.version == 2
    assert MemoryVersion.objects.filter(memory=first, change="merge").count() == 1
    assert AuditEvent.objects.filter(action="memory.merge", target_id=str(first.pk)).exists()


def test_same_content_in_another_scope_is_a_separate_memory(bob, chart):
    personal = add(bob, "Quotes are valid for 30 days", kind="fact")
    shared = add(
        bob,
        "Quotes are valid for 30 days",
        kind="fact",
        scope="department",
        scope_id=chart["sales"].pk,
    )
    assert personal.pk != shared.pk


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"content": "   "}, InvalidInput),
        ({"content": "x" * 9000}, InvalidInput),
        ({"content": "ok", "kind": "gossip"}, InvalidInput),
        ({"content": "ok", "source_kind": "rumour"}, InvalidInput),
        ({"content": "ok", "confidence": 1.5}, InvalidInput),
        ({"content": "ok", "tags": "not-a-list"}, InvalidInput),
        ({"content": "ok", "scope": "planet"}, InvalidInput),
    ],
)
def test_bad_input_is_a_clear_error_and_writes_nothing(bob, fields, error):
    with pytest.raises(error):
        add(bob, **fields)
    assert not Memory.objects.exists()


def test_an_employee_cannot_write_a_colleagues_personal_memory(bob, alice):
    with pytest.raises(NotFound):
        add(bob, "Alice likes tea", scope="user", scope_id=alice.pk)


def test_an_employee_cannot_write_another_departments_memory(chart):
    with pytest.raises(NotPermitted):
        add(
            chart["bob"],
            "Support closes at 6",
            scope="department",
            scope_id=chart["support"].pk,
            kind="fact",
        )


def test_writing_to_a_department_of_another_organization_is_404(chart, charlie, org_b):
    with pytest.raises(NotFound):
        add(charlie, "hello", scope="department", scope_id=chart["sales"].pk, kind="fact")


def test_tool_trajectory_is_written_with_its_call_and_found_by_kind(bob):
    memory = services.tool_trajectory_record(
        actor=actor(bob),
        tool="crm.search_accounts",
        parameters={"query": "Huawei", "limit": 5},
        result={"accounts": [{"id": 7, "name": "Huawei Cloud"}]},
        run_id="run-1",
        step_id="s2",
    )
    assert memory.kind == "tool_trajectory" and memory.source_kind == "tool_result"
    assert memory.attributes["tool"] == "crm.search_accounts"
    assert memory.attributes["parameters"] == {"query": "Huawei", "limit": 5}
    assert "Huawei Cloud" in memory.attributes["result"]
    assert memory.source_ref == {"run_id": "run-1", "step_id": "s2", "tool_call_id": ""}

    hits = selectors.memory_search(
        actor=actor(bob), query="search accounts Huawei", kinds=["tool_trajectory"]
    ).hits
    assert [hit.memory.pk for hit in hits] == [memory.pk]
    assert (
        selectors.memory_search(
            actor=actor(bob), query="search accounts Huawei", kinds=["preference"]
        ).hits
        == []
    )


def test_retention_policy_of_the_organization_sets_expiry(bob, org_a):
    org_a.settings = {"memory_retention_days": {"tool_trajectory": 30}}
    org_a.save(update_fields=["settings"])
    memory = services.tool_trajectory_record(
        actor=actor(bob), tool="t", parameters={}, result="ok", run_id="r"
    )
    assert memory.retention_policy == "days:30"
    assert (memory.expires_at - memory.observed_at).days == 30
    assert add(bob, "No expiry for preferences").expires_at is None
