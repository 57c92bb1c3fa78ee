"""Deletion is complete (search, get, list, vectors, context assembly), purge removes content
and is audited with ids only, and the retention sweep purges what expired."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from cadre.errors import InvalidInput, NotFound
from cadre.governance.models import AuditEvent
from cadre.memory import selectors, services, tasks
from cadre.memory.models import (
    ContextRecordItem,
    Memory,
    MemoryEmbedding,
    MemoryTask,
    MemoryVersion,
)
from tests.memory.conftest import actor


def add(member, content, **fields):
    fields.setdefault("scope", "user")
    fields.setdefault("kind", "fact")
    fields.setdefault("source_kind", "user_statement")
    return services.memory_add(actor=actor(member), content=content, **fields)


def test_a_deleted_memory_is_gone_from_every_read_path(bob, client_for, run_async):
    with run_async():
        memory = add(bob, "My passport number is E12345678, expires 2031")
        keep = add(bob, "My passport photo is in the HR folder")
    assert MemoryEmbedding.objects.filter(memory=memory).exists()  # enrichment ran
    query = "passport number"
    assert memory.pk in [
        h.memory.pk for h in selectors.memory_search(actor=actor(bob), query=query).hits
    ]

    with run_async():
        services.memory_delete(actor=actor(bob), memory=memory)

    hits = selectors.memory_search(actor=actor(bob), query=query).hits
    assert memory.pk not in [hit.memory.pk for hit in hits]
    assert keep.pk in [hit.memory.pk for hit in hits]
    with pytest.raises(NotFound):
        selectors.memory_get(actor(bob), memory.pk)
    assert (
        not selectors.memory_list(
            actor(bob), statuses=["active", "superseded", "archived", "deleted"]
        )
        .filter(pk=memory.pk)
        .exists()
    )
    assert not MemoryEmbedding.objects.filter(memory=memory).exists()
    # Context assembly for a model call (search on behalf of a run) does not include it.
    context = selectors.memory_search(
        actor=actor(bob), query=query, on_behalf_of={"run_id": "r1", "step_id": "s1"}
    )
    assert not ContextRecordItem.objects.filter(
        context=context.context_record, memory=memory
    ).exists()
    # Time travel does not bring it back either.
    assert memory.pk not in [
        h.memory.pk
        for h in selectors.memory_search(
            actor=actor(bob), query=query, as_of=timezone.now() - timedelta(seconds=1)
        ).hits
    ]
    client = client_for(bob)
    assert client.get(f"/api/v1/memories/{memory.pk}/").status_code == 404
    assert client.get(f"/api/v1/memories/{memory.pk}/history/").status_code == 404
    listed = [row["id"] for row in client.get("/api/v1/memories/").json()["results"]]
    assert memory.pk not in listed and keep.pk in listed

    # The purge task ran on commit: content, history text and hash are gone; row stays.
    memory.refresh_from_db()
    assert memory.purged_at is not None
    assert (memory.content, memory.search_text, memory.content_hash) == ("", "", "")
    assert not MemoryVersion.objects.filter(memory=memory, new_content__contains="E123").exists()
    purge = AuditEvent.objects.get(action="memory.purge")
    assert purge.changes["memory_ids"] == [memory.pk]
    assert "E12345678" not in json.dumps(purge.changes) + purge.target_label + purge.reason
    assert MemoryTask.objects.get(kind="purge", memory=memory).status == "completed"


def test_delete_by_filter_removes_matching_memories_and_audits_their_ids(bob, run_async):
    old = add(bob, "Project Falcon kickoff notes", tags=["falcon"])
    other = add(bob, "Project Falcon budget", tags=["falcon", "budget"])
    untouched = add(bob, "Project Heron notes", tags=["heron"])
    with run_async():
        result = services.memory_delete_by_filter(actor=actor(bob), tags=["falcon"])
    assert sorted(result.deleted) == sorted([old.pk, other.pk])
    event = AuditEvent.objects.get(action="memory.delete_by_filter")
    assert sorted(event.changes["memory_ids"]) == sorted([old.pk, other.pk])
    assert "Falcon" not in json.dumps(event.changes)
    assert set(Memory.objects.filter(purged_at__isnull=False).values_list("pk", flat=True)) == {
        old.pk,
        other.pk,
    }
    assert Memory.objects.get(pk=untouched.pk).status == "active"


def test_delete_by_filter_needs_a_filter(bob):
    with pytest.raises(InvalidInput):
        services.memory_delete_by_filter(actor=actor(bob))


def test_delete_by_filter_cannot_reach_a_colleagues_memory(chart):
    theirs = add(chart["bob"], "Bob's notes", tags=["notes"])
    result = services.memory_delete_by_filter(
        actor=actor(chart["dave"]), tags=["notes"], scope_keys=[f"user:{chart['bob'].pk}"]
    )
    assert result.deleted == []
    assert Memory.objects.get(pk=theirs.pk).status == "active"


def test_retention_sweep_purges_expired_memories_and_audits_ids(bob, charlie, run_async):
    past = timezone.now() - timedelta(minutes=1)
    with run_async():
        expired = add(bob, "Temporary door code 4821", expires_at=past)
        expired_b = add(charlie, "Globex temporary code 9932", expires_at=past)
        alive = add(
            bob, "Door code policy: ask reception", expires_at=timezone.now() + timedelta(days=1)
        )
    assert MemoryEmbedding.objects.filter(memory=expired).exists()
    # Expired items are already hidden from search before the sweep runs.
    assert selectors.memory_search(actor=actor(bob), query="door code").hits[0].memory.pk == (
        alive.pk
    )

    result = tasks.memory_retention_sweep.apply().get()

    assert result["purged"] == 2
    for memory in (expired, expired_b):
        memory.refresh_from_db()
        assert memory.status == "deleted" and memory.purged_at is not None
        assert memory.content == ""
        assert not MemoryEmbedding.objects.filter(memory=memory).exists()
    alive.refresh_from_db()
    assert alive.status == "active" and alive.content
    events = AuditEvent.objects.filter(action="memory.purge", reason="retention: expired")
    assert sorted(i for e in events for i in e.changes["memory_ids"]) == sorted(
        [expired.pk, expired_b.pk]
    )
    assert "4821" not in json.dumps([e.changes for e in events])
    assert MemoryTask.objects.filter(kind="purge", params__origin="retention").count() == 2
    # Idempotent: a second sweep finds nothing.
    assert tasks.memory_retention_sweep.apply().get()["purged"] == 0
