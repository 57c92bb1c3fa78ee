"""The vector map: computed in the background (real local embeddings, PCA, KMeans), served
from its MemoryMap row, sampled, labelled by distinctive terms, with a query placed on it."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.fields import DateTimeField

from cadre.governance.audit_models import AuditEvent
from cadre.memory import embeddings, services
from cadre.memory.models import Memory, MemoryMap, MemoryTask
from cadre.tenancy.actors import Actor
from cadre.viewer import vector_map
from cadre.viewer.vector_map import cluster_terms, unpack_points
from tests.conftest import actor_for

MAP = "/api/v1/memory-viewer/map/"
TOPICS = {
    "tea": [
        "Bob drinks green tea every afternoon",
        "Bob likes green tea in the afternoon",
        "Bob orders jasmine tea at lunch",
        "Bob brews oolong tea at his desk",
    ],
    "office": [
        "The Shanghai office is on the twelfth floor of the tower",
        "Visitors to the Shanghai office sign in at the lobby desk",
        "The Shanghai office parking garage closes at ten",
        "The Shanghai office meeting rooms are booked through the portal",
    ],
    "expenses": [
        "Expense reports must be filed by Friday with receipts",
        "Expense reports above 5000 need a director's approval",
        "Expense reimbursements are paid with the monthly salary",
        "Expense receipts must be scanned as PDF files",
    ],
}


@pytest.fixture
def embedded(bob):
    actor = actor_for(bob)
    memories = {
        text: services.memory_add(
            actor=actor, scope="user", kind="fact", content=text, source_kind="user_statement"
        )
        for texts in TOPICS.values()
        for text in texts
    }
    embeddings.embed_memories(list(memories.values()), embeddings.active_model())
    return memories


def _computed(client, run_async, params):
    with run_async():
        pending = client.get(MAP, params)
    assert pending.status_code == 202 and pending.json()["status"] == "computing"
    ready = client.get(MAP, params)
    assert ready.status_code == 200, ready.content
    return ready.json()


def test_map_is_computed_in_the_background_then_served(bob, client_for, embedded, run_async):
    client = client_for(bob)
    body = _computed(client, run_async, {"clusters": 3})
    assert body["status"] == "ready"
    assert body["total"] == body["sample_size"] == 12
    assert body["params"] == {"method": "pca", "sample": 100000, "clusters": 3, "seed": 0}
    assert body["shown"] == 12
    assert len(body["points"]) == 12 and len(body["clusters"]) == 3
    task = MemoryTask.objects.get(kind=MemoryTask.Kind.MAP)
    assert task.status == MemoryTask.Status.COMPLETED
    # Each topic lands in one cluster, labelled by its own distinctive term.
    by_text = {memory.pk: text for text, memory in embedded.items()}
    clusters_of = {}
    for point in body["points"]:
        topic = next(t for t, texts in TOPICS.items() if by_text[point["id"]] in texts)
        clusters_of.setdefault(topic, set()).add(point["cluster"])
    assert all(len(found) == 1 for found in clusters_of.values())
    labels = {c["id"]: c["label"] for c in body["clusters"]}
    assert "tea" in labels[next(iter(clusters_of["tea"]))]
    assert "expense" in labels[next(iter(clusters_of["expenses"]))]
    assert 0 < body["association_strength"] <= 1
    # The two near-duplicates sit closer together than to any memory of another topic.
    position = {p["id"]: (p["x"], p["y"]) for p in body["points"]}
    first = position[embedded["Bob drinks green tea every afternoon"].pk]
    twin = position[embedded["Bob likes green tea in the afternoon"].pk]
    others = [position[embedded[t].pk] for t in TOPICS["office"] + TOPICS["expenses"]]
    assert math.dist(first, twin) < min(math.dist(first, other) for other in others)
    # Served again from the row: no second computation, and the rendered body from the
    # viewer cache (no memory read for its points).
    with CaptureQueriesContext(connection) as queries:
        again = client.get(MAP, {"clusters": 3})
    assert again.json() == body
    assert not [q for q in queries if "ANY(" in q["sql"]]
    assert MemoryMap.objects.count() == 1


def test_points_carry_each_memory_as_the_api_writes_it(bob, client_for, embedded, run_async):
    client = client_for(bob)
    # One memory written at a whole second, one with a long text: the time without
    # microseconds, the preview cut at 80 characters.
    whole = embedded["Bob drinks green tea every afternoon"]
    Memory.objects.filter(pk=whole.pk).update(created_at=datetime(2026, 3, 1, 8, 30, tzinfo=UTC))
    long = embedded["Visitors to the Shanghai office sign in at the lobby desk"]
    Memory.objects.filter(pk=long.pk).update(content=long.content + " and then" * 20)
    body = _computed(client, run_async, {"clusters": 3})
    memory_map = MemoryMap.objects.get(pk=body["map_id"])
    ids, xs, ys, clusters = unpack_points(memory_map)
    labels = {c["id"]: c["label"] for c in body["clusters"]}
    memories = Memory.objects.in_bulk(ids.tolist())
    assert body["points"] == [
        {
            "id": pk,
            "x": round(float(x), 4),
            "y": round(float(y), 4),
            "cluster": cluster,
            "label": labels[cluster],
            "kind": "fact",
            "scope_key": memories[pk].scope_key,
            "created_at": DateTimeField().to_representation(memories[pk].created_at),
            "preview": memories[pk].content[:80],
        }
        for pk, x, y, cluster in zip(ids.tolist(), xs, ys, clusters.tolist(), strict=True)
    ]
    assert next(p for p in body["points"] if p["id"] == whole.pk)["created_at"] == (
        "2026-03-01T08:30:00Z"
    )
    assert len(next(p for p in body["points"] if p["id"] == long.pk)["preview"]) == 80
    # The body with a query placed (built in Python, not kept rendered) holds the same points.
    placed = client.get(MAP, {"clusters": 3, "q": "tea"}).json()
    assert placed["points"] == body["points"]


def test_query_is_placed_near_its_hits(bob, client_for, embedded, run_async):
    client = client_for(bob)
    _computed(client, run_async, {"clusters": 3})
    body = client.get(MAP, {"clusters": 3, "q": "which tea does Bob drink"}).json()
    query = body["query"]
    assert query["x"] is not None and query["hits"]
    top = query["hits"][0]
    assert "tea" in next(t for t, m in embedded.items() if m.pk == top["id"])
    assert top["on_map"] is True


def test_large_scopes_are_sampled_and_deleted_memories_drop_out(
    bob, client_for, embedded, run_async
):
    client = client_for(bob)
    body = _computed(client, run_async, {"sample": 5})
    assert (body["total"], body["sample_size"], len(body["points"])) == (12, 5, 5)
    doomed = Memory.objects.get(pk=body["points"][0]["id"])
    services.memory_delete(actor=actor_for(bob), memory=doomed)
    after = client.get(MAP, {"sample": 5}).json()
    assert doomed.pk not in {p["id"] for p in after["points"]}
    assert len(after["points"]) == 4


def test_outsider_map_holds_nothing_of_another_org(charlie, client_for, embedded, run_async):
    client = client_for(charlie)
    with run_async():
        client.get(MAP)
    body = client.get(MAP).json()
    assert body["points"] == [] and body["total"] == 0
    assert "tea" not in str(body)


def test_cluster_terms_prefer_what_sets_a_cluster_apart():
    texts = ["tea tea office", "tea green", "office desk", "office floor desk", "the of 42"]
    # tf x log(1 + 5 words per cluster / frequency over all): office is in both, so it ranks
    # below the rarer green and desk; stop words and numbers never count.
    assert cluster_terms(texts, [0, 0, 1, 1, 1], 2) == [
        ["tea", "green", "office"],
        ["desk", "office", "floor"],
    ]


def test_an_admins_map_of_a_members_memories_is_a_read_they_see(
    alice, bob, client_for, embedded, run_async
):
    """The map previews each memory: an admin's map of Bob's personal scope is audited once
    (docs/memory.md, "Who looked at my personal memories"); Bob's own map is not."""
    reads = AuditEvent.objects.filter(action="memory.personal_read")
    _computed(client_for(bob), run_async, {"clusters": 3})
    assert not reads.exists()

    body = _computed(client_for(alice), run_async, {"clusters": 3, "scope": f"user:{bob.pk}"})
    assert len(body["points"]) == 12
    event = reads.get()
    assert event.target_id == str(bob.pk)
    assert event.changes["route"] == "memory-viewer-vector-map"
    assert event.changes["count"] == 12


def test_a_map_behind_its_memories_is_served_while_a_new_one_is_computed(
    bob, client_for, embedded, run_async
):
    """A ready map counts what it was computed over: once a memory is written since, the
    page is told a new one is computing (and then counts it), never "12 of 12" for good."""
    client = client_for(bob)
    assert _computed(client, run_async, {"clusters": 3})["total"] == 12
    assert client.get(MAP, {"clusters": 3}).json()["computing_id"] is None  # up to date
    added = services.memory_add(
        actor=actor_for(bob),
        scope="user",
        kind="fact",
        content="Bob takes the train to the Shanghai office",
        source_kind="user_statement",
    )
    embeddings.embed_memories([added], embeddings.active_model())
    with run_async():
        behind = client.get(MAP, {"clusters": 3})
    assert behind.status_code == 200
    body = behind.json()
    assert body["status"] == "ready" and body["total"] == 12 and body["computing_id"]
    fresh = client.get(MAP, {"clusters": 3}).json()
    assert (fresh["total"], len(fresh["points"]), fresh["computing_id"]) == (13, 13, None)


def test_an_admins_map_covers_the_agent_scopes_the_timeline_counts(
    alice, bob, client_for, embedded, run_async
):
    """The map's default selection is what the timeline counts for the same person: an
    admin's reach into every agent scope holding memory included."""
    agent = Actor(
        kind="agent",
        organization=bob.organization,
        agent=SimpleNamespace(pk=5),
        member=bob,
        label="agent 5",
    )
    noted = services.memory_add(
        actor=agent,
        scope="agent",
        kind="fact",
        content="The ERP export times out after 500 rows",
        source_kind="tool_result",
    )
    embeddings.embed_memories([noted], embeddings.active_model())
    admin = actor_for(alice)
    assert "agent:5" in vector_map.map_scope_keys(admin, None)
    assert "agent:5" not in vector_map.map_scope_keys(actor_for(bob), None)
    client = client_for(alice)
    mapped = _computed(client, run_async, {})
    counted = client.get("/api/v1/memory-viewer/timeline/").json()
    assert noted.pk in {point["id"] for point in mapped["points"]}
    assert mapped["total"] == counted["points_total"] == len(counted["points"])
