"""The REST API under /api/v1/memories/, /memory-tasks/ and /memory-context-records/."""

from __future__ import annotations

import pytest

from cadre.memory import services
from cadre.memory.models import Memory, MemoryTask
from tests.memory.conftest import actor
from tests.refusals import nothing_changes


def test_create_get_search_history_delete_round_trip(bob, client_for, run_async):
    client = client_for(bob)
    with run_async():
        created = client.post(
            "/api/v1/memories/",
            {
                "content": "Send the monthly KPI deck to Zhou Min",
                "kind": "requirement",
                "tags": ["kpi"],
                "conversation_id": "c-1",
            },
            format="json",
        )
    assert created.status_code == 201, created.json()
    body = created.json()
    assert body["scope_key"] == f"user:{bob.pk}" and body["dedup"] == "stored"
    assert body["task"]["kind"] == "enrich"
    memory_id = body["id"]

    assert client.get(f"/api/v1/memories/{memory_id}/").json()["tags"] == ["kpi"]
    search = client.post(
        "/api/v1/memories/search/",
        {"query": "KPI deck", "kinds": ["requirement"], "tags": ["kpi"]},
        format="json",
    ).json()
    assert [hit["memory"]["id"] for hit in search["hits"]] == [memory_id]
    assert search["scope_keys"][0] == f"user:{bob.pk}"
    assert "rrf" in search["hits"][0]["components"]

    again = client.post(
        "/api/v1/memories/",
        {"content": "send the monthly KPI deck to Zhou Min.", "kind": "requirement"},
        format="json",
    )
    assert again.status_code == 200 and again.json()["dedup"] == "exact_duplicate"
    assert again.json()["id"] == memory_id

    history = client.get(f"/api/v1/memories/{memory_id}/history/").json()
    assert [row["change"] for row in history] == ["addition", "merge"]

    tasks = client.get("/api/v1/memory-tasks/", {"memory": memory_id}).json()["results"]
    assert {task["kind"]: task["status"] for task in tasks} == {
        "enrich": "completed",
        "dedup": "completed",
    }

    with run_async():
        deleted = client.delete(f"/api/v1/memories/{memory_id}/")
    assert deleted.status_code == 200
    assert deleted.json()["memory"] == memory_id  # the deletion report
    assert client.get(f"/api/v1/memories/{memory_id}/").status_code == 404
    assert (
        client.post("/api/v1/memories/search/", {"query": "KPI deck"}, format="json").json()["hits"]
        == []
    )


def test_create_from_messages(bob, client_for):
    response = client_for(bob).post(
        "/api/v1/memories/",
        {
            "messages": [
                {"role": "user", "content": "以后周报用英文写"},
                {"role": "assistant", "content": "好的"},
            ],
            "conversation_id": "c-2",
        },
        format="json",
    )
    assert response.status_code == 201
    body = response.json()
    assert body["extractor"] == "rules" and body["candidates"] == 1
    assert body["memories"][0]["content"] == "以后周报用英文写"


@pytest.mark.parametrize(
    "payload",
    [
        {},
        {"content": "x", "messages": [{"role": "user", "content": "y"}]},
        {"content": "x", "kind": "gossip"},
        {"content": "x", "scope": "department"},  # needs scope_id
        {"content": "x", "tags": "a"},
        {"content": "x", "confidence": 3},
        {"messages": "hello"},
    ],
)
def test_bad_create_requests_get_a_400_envelope(bob, client_for, payload):
    response = client_for(bob).post("/api/v1/memories/", payload, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid"
    assert not Memory.objects.exists()


def test_search_validates_its_input(bob, client_for):
    client = client_for(bob)
    assert client.post("/api/v1/memories/search/", {}, format="json").status_code == 400
    bad_scope = client.post(
        "/api/v1/memories/search/", {"query": "x", "scopes": ["planet:1"]}, format="json"
    )
    assert bad_scope.status_code == 400
    with nothing_changes(MemoryTask):
        assert (
            client.post(
                "/api/v1/memories/search/", {"query": "x", "top_k": 0}, format="json"
            ).status_code
            == 400
        )


def test_list_filters_and_never_shows_others_memories(chart, client_for):
    bob, dave = chart["bob"], chart["dave"]
    services.memory_add(
        actor=actor(bob),
        scope="user",
        kind="fact",
        content="Bob private",
        source_kind="user_statement",
        tags=["p"],
    )
    shared = services.memory_add(
        actor=actor(bob),
        scope="department",
        scope_id=chart["sales"].pk,
        kind="fact",
        content="Sales shared",
        source_kind="user_statement",
    )
    rows = client_for(bob).get("/api/v1/memories/", {"scope": f"department:{chart['sales'].pk}"})
    assert [row["id"] for row in rows.json()["results"]] == [shared.pk]
    assert client_for(bob).get("/api/v1/memories/", {"tag": "p"}).json()["count"] == 1
    assert client_for(dave).get("/api/v1/memories/").json()["count"] == 0
    assert (
        client_for(dave).get("/api/v1/memories/", {"scope": f"user:{bob.pk}"}).json()["count"] == 0
    )


def test_outsider_gets_404_for_other_org_memory(bob, charlie, client_for):
    memory = services.memory_add(
        actor=actor(bob),
        scope="organization",
        kind="fact",
        content="Acme internal",
        source_kind="user_statement",
    )
    client = client_for(charlie)
    assert client.get(f"/api/v1/memories/{memory.pk}/").status_code == 404
    assert (
        client.patch(
            f"/api/v1/memories/{memory.pk}/", {"content": "x", "version": 1}, format="json"
        ).status_code
        == 404
    )
    assert client.delete(f"/api/v1/memories/{memory.pk}/").status_code == 404
    assert client.get(f"/api/v1/memories/{memory.pk}/history/").status_code == 404


def test_feedback_endpoint_corrects_memory(bob, client_for):
    client = client_for(bob)
    client.post(
        "/api/v1/memories/",
        {"content": "The weekly report goes to Zhang San", "kind": "requirement"},
        format="json",
    )
    response = client.post(
        "/api/v1/memories/feedback/",
        {"text": "That's wrong — the weekly report now goes to Li Wei, in English"},
        format="json",
    )
    assert response.status_code == 201
    body = response.json()
    assert body["superseded"][0]["content"] == "The weekly report goes to Zhang San"
    assert body["created"][0]["content"] == "the weekly report now goes to Li Wei, in English"
    hits = client.post(
        "/api/v1/memories/search/", {"query": "weekly report recipient"}, format="json"
    ).json()["hits"]
    assert hits[0]["memory"]["content"] == "the weekly report now goes to Li Wei, in English"


def test_delete_by_filter_endpoint(bob, client_for, run_async):
    client = client_for(bob)
    for text in ("Falcon notes one", "Falcon notes two"):
        client.post("/api/v1/memories/", {"content": text, "tags": ["falcon"]}, format="json")
    assert client.post("/api/v1/memories/delete/", {}, format="json").status_code == 400
    with run_async():
        response = client.post("/api/v1/memories/delete/", {"tags": ["falcon"]}, format="json")
    assert response.status_code == 200
    assert len(response.json()["deleted"]) == 2
    assert MemoryTask.objects.get(pk=response.json()["task"]["id"]).status == "completed"


def test_stats_need_memory_view(bob, alice, client_for):
    assert client_for(bob).get("/api/v1/memories/stats/").status_code == 403
    stats = client_for(alice).get("/api/v1/memories/stats/").json()
    assert stats["compression_rate"] == 0.0


def test_memory_tasks_show_attempts_and_errors(bob, client_for, monkeypatch, run_async):
    from cadre.celery import app as celery_app
    from cadre.memory import embeddings

    # As a worker would: the failure is recorded on the task, not raised into the caller.
    celery_app.conf.task_eager_propagates = False  # restored by the eager_celery fixture

    def broken(*args, **kwargs):
        raise embeddings.EmbeddingError("embedding endpoint unreachable")

    monkeypatch.setattr(embeddings, "embed_memories", broken)
    with run_async():
        memory = services.memory_add(
            actor=actor(bob),
            scope="user",
            kind="fact",
            content="Cheque payments stopped in 2024",
            source_kind="user_statement",
        )
    [task] = client_for(bob).get("/api/v1/memory-tasks/", {"memory": memory.pk}).json()["results"]
    assert task["status"] == "failed" and task["attempts"] >= 1
    assert "unreachable" in task["error"]
    # The memory itself was not lost and is still lexically searchable.
    hits = (
        client_for(bob)
        .post("/api/v1/memories/search/", {"query": "cheque payments"}, format="json")
        .json()["hits"]
    )
    assert [hit["memory"]["id"] for hit in hits] == [memory.pk]


def test_openapi_schema_includes_memory_endpoints(alice, client_for):
    schema = client_for(alice).get("/api/schema/", {"format": "json"})
    assert schema.status_code == 200
    paths = schema.json()["paths"]
    for path in (
        "/api/v1/memories/",
        "/api/v1/memories/{id}/",
        "/api/v1/memories/search/",
        "/api/v1/memories/feedback/",
        "/api/v1/memories/delete/",
        "/api/v1/memories/{id}/history/",
        "/api/v1/memory-tasks/",
        "/api/v1/memory-context-records/",
    ):
        assert path in paths, path


def test_list_query_count_does_not_grow_with_rows(chart, client_for, django_assert_max_num_queries):
    bob = chart["bob"]
    for index in range(30):
        services.memory_add(
            actor=actor(bob),
            scope="user",
            kind="fact",
            content=f"Fact number {index}",
            source_kind="user_statement",
        )
    client = client_for(bob)
    client.get("/api/v1/memories/")  # warm the session/actor caches
    with django_assert_max_num_queries(12):
        response = client.get("/api/v1/memories/", {"page_size": 50})
    assert response.json()["count"] == 30
