"""Optimistic concurrency: a writer holding a stale version gets 409 and nothing is lost."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from cadre.errors import Conflict
from cadre.memory import services
from cadre.memory.models import Memory, MemoryVersion
from tests.memory.conftest import actor


def add(member, content):
    return services.memory_add(
        actor=actor(member),
        scope="user",
        kind="fact",
        content=content,
        source_kind="user_statement",
    )


def test_update_with_a_stale_version_is_a_conflict_and_changes_nothing(bob):
    memory = add(bob, "Standup is at 9:30")
    services.memory_update(
        actor=actor(bob), memory=memory, expected_version=1, content="Standup is at 9:45"
    )
    with pytest.raises(Conflict) as caught:
        services.memory_update(
            actor=actor(bob), memory=memory, expected_version=1, content="Standup is at 10:00"
        )
    assert caught.value.code == "version_conflict"
    assert caught.value.details == {"current_version": 2, "expected_version": 1}
    memory.refresh_from_db()
    assert (memory.content, memory.version) == ("Standup is at 9:45", 2)
    assert [v.new_content for v in MemoryVersion.objects.filter(memory=memory)] == [
        "Standup is at 9:30",
        "Standup is at 9:45",
    ]


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_writers_with_the_same_version_one_wins_one_gets_409(org_a, bob):
    memory = add(bob, "Budget owner is Chen")
    barrier = threading.Barrier(2)
    outcomes: dict[str, str] = {}

    def write(name: str) -> None:
        try:
            barrier.wait()
            services.memory_update(
                actor=actor(bob),
                memory=memory,
                expected_version=1,
                content=f"Budget owner is {name}",
            )
            outcomes[name] = "ok"
        except Conflict:
            outcomes[name] = "conflict"
        finally:
            connection.close()

    threads = [threading.Thread(target=write, args=(name,)) for name in ("Li", "Wu")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    assert sorted(outcomes.values()) == ["conflict", "ok"]
    winner = next(name for name, outcome in outcomes.items() if outcome == "ok")
    memory.refresh_from_db()
    assert memory.content == f"Budget owner is {winner}" and memory.version == 2
    assert MemoryVersion.objects.filter(memory=memory).count() == 2
    assert Memory.objects.count() == 1


def test_api_update_uses_the_etag_and_answers_409_on_conflict(bob, client_for):
    client = client_for(bob)
    created = client.post(
        "/api/v1/memories/", {"content": "Report due Friday", "kind": "fact"}, format="json"
    )
    assert created.status_code == 201
    url = f"/api/v1/memories/{created.json()['id']}/"
    etag = client.get(url)["ETag"]
    assert etag == f'"{created.json()["id"]}.1"'

    first = client.patch(url, {"content": "Report due Thursday"}, format="json", HTTP_IF_MATCH=etag)
    assert first.status_code == 200 and first["ETag"].endswith('.2"')
    second = client.patch(url, {"content": "Report due Monday"}, format="json", HTTP_IF_MATCH=etag)
    assert second.status_code == 409
    assert second.json()["error"]["code"] == "version_conflict"
    assert client.get(url).json()["content"] == "Report due Thursday"

    missing = client.patch(url, {"content": "x"}, format="json")
    assert missing.status_code == 400
    assert missing.json()["error"]["code"] == "version_required"
    by_body = client.patch(url, {"content": "Report due Monday", "version": 2}, format="json")
    assert by_body.status_code == 200 and by_body.json()["version"] == 3
