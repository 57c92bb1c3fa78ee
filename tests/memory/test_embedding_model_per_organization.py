"""The embedding model is each organization's: one organization's re-embed or switch (by its
re-embed, its admin, the console or the API) changes its own search only. Another
organization's active model, search results, vectors, audit trail and model listing stay as
they were; a key with `memory:write` switches nothing (`model.manage` does it); and the
migration gives every existing organization the model that was active for the installation."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import Client
from django.urls import reverse

from cadre.governance.models import AuditEvent
from cadre.memory import embeddings, selectors, services
from cadre.memory.models import MemoryEmbedding, OrganizationEmbeddingModel
from cadre.memory.reembed import reembed_start
from tests.factories import OrganizationFactory
from tests.memory.conftest import actor
from tests.memory.test_reembed import DIMENSION, embedding_server  # noqa: F401 (a fixture)
from tests.refusals import nothing_changes

pytestmark = pytest.mark.django_db

NEW_MODEL = "openai/fake-embed-16"
LIST_URL = "/api/v1/embedding-models/"
ACTIVATE_URL = "/api/v1/embedding-models/activate/"


def _remember(member, texts):
    return [
        services.memory_add(
            actor=actor(member),
            scope="user",
            kind="fact",
            content=text,
            source_kind="user_statement",
        )
        for text in texts
    ]


def _ranked(member, query):
    hits = selectors.memory_search(actor=actor(member), query=query).hits
    return [(hit.memory.pk, round(float(hit.score), 6)) for hit in hits]


def _vectors(organization):
    return sorted(
        MemoryEmbedding.objects.filter(memory__organization=organization).values_list(
            "pk", "memory_id", "model_id"
        )
    )


@pytest.fixture
def dana(make_member, org_b):
    return make_member(organization=org_b, display_name="Dana", email="dana@globex.test")


@pytest.fixture
def tenants(bob, dana, charlie, run_async, request, monkeypatch):
    """Acme (bob's memories) and Globex (dana's), both searching under the local model; then
    the installation configures NEW_MODEL (a loopback OpenAI-compatible endpoint), which a
    re-embed of either organization fills."""
    server = request.getfixturevalue("embedding_server")
    with run_async():
        acme = _remember(bob, ["The warehouse is in Ningbo", "The CFO is Liu Yang"])
        globex = _remember(dana, ["The warehouse is in Rotterdam", "Payroll runs on the 25th"])
    local = embeddings.active_model(bob.organization)
    assert embeddings.active_model(dana.organization) == local
    monkeypatch.setenv("CADRE_EMBEDDING_PROVIDER", "openai")
    monkeypatch.setenv("CADRE_EMBEDDING_MODEL", "fake-embed-16")
    monkeypatch.setenv("CADRE_EMBEDDING_DIMENSION", str(DIMENSION))
    return {"local": local, "acme": acme, "globex": globex, "server": server}


def test_one_organizations_reembed_leaves_anothers_search_vectors_audit_and_listing(
    tenants, alice, bob, charlie, dana, org_a, org_b, run_async, client_for
):
    local, server = tenants["local"], tenants["server"]
    globex_ranked = _ranked(dana, "where is the warehouse")
    assert globex_ranked and globex_ranked[0][0] == tenants["globex"][0].pk
    globex_vectors = _vectors(org_b)
    globex_audit = AuditEvent.objects.filter(organization=org_b).count()

    # Acme's re-embed: its gate is off and it has no rated turns, so it switches on its own.
    with run_async():
        task = reembed_start(actor=actor(alice))
    task.refresh_from_db()
    assert task.status == "completed", task.error
    assert task.result["activated"] is True
    assert embeddings.active_model(org_a).pk == NEW_MODEL
    switched = AuditEvent.objects.get(organization=org_a, action="memory.embedding_activate")
    assert switched.actor_type == "system"
    assert switched.changes == {"before": {"active": local.pk}, "after": {"active": NEW_MODEL}}
    # Only Acme's memories were sent to the new model.
    assert sorted(server) == sorted(m.content for m in tenants["acme"])

    # Globex: the same model, the same vectors, the same answers, nothing in its audit trail.
    assert embeddings.active_model(org_b) == local
    assert _vectors(org_b) == globex_vectors
    assert not MemoryEmbedding.objects.filter(memory__organization=org_b, model=NEW_MODEL).exists()
    server.clear()
    assert _ranked(dana, "where is the warehouse") == globex_ranked
    assert server == []  # Globex's query was embedded by its own (local) model
    assert AuditEvent.objects.filter(organization=org_b).count() == globex_audit
    # Acme's search runs under the new model.
    assert _ranked(bob, "where is the warehouse")[0][0] == tenants["acme"][0].pk
    assert server == ["where is the warehouse"]

    # Each listing shows its own organization's models and states, nothing of the other's.
    globex_listing = client_for(charlie).get(LIST_URL)
    assert globex_listing.status_code == 200, globex_listing.content
    assert globex_listing.json() == [
        {
            "id": local.pk,
            "provider": local.provider,
            "name": local.name,
            "dimension": local.dimension,
            "status": "active",
            "activated_at": globex_listing.json()[0]["activated_at"],
        }
    ]
    acme_listing = {row["id"]: row["status"] for row in client_for(alice).get(LIST_URL).json()}
    assert acme_listing == {NEW_MODEL: "active", local.pk: "retired"}
    console = Client()
    console.force_login(charlie.user)
    card = console.get(reverse("console:embeddings")).content.decode()
    assert f'id="embedding-active">{local.pk}<' in card
    assert "Before the switch" not in card and "Switch search to" not in card


def test_an_admins_switch_changes_only_their_organization_and_another_cannot_use_it(
    tenants, alice, charlie, dana, org_a, org_b, run_async, client_for
):
    from cadre.agents.evaluation.gates import evaluation_gates_set

    local = tenants["local"]
    # Acme holds the switch for a person: its re-embed fills the vectors only.
    evaluation_gates_set(actor=actor(alice), gates={"embedding_activate": True})
    with run_async():
        task = reembed_start(actor=actor(alice))
    task.refresh_from_db()
    assert task.result["held"] is True and task.result["remaining"] == 0
    assert embeddings.active_model(org_a) == local
    globex_ranked = _ranked(dana, "where is the warehouse")
    globex_audit = AuditEvent.objects.filter(organization=org_b).count()

    # Globex never re-embedded under NEW_MODEL: to it the model is unknown, and nothing moves.
    with nothing_changes(OrganizationEmbeddingModel):
        refused = client_for(charlie).post(ACTIVATE_URL, {"model": NEW_MODEL}, format="json")
    assert refused.status_code == 404, refused.content
    assert refused.json()["error"]["code"] == "not_found"

    switched = client_for(alice).post(
        ACTIVATE_URL,
        {"model": NEW_MODEL, "override_gate": "the old endpoint retires"},
        format="json",
    )
    assert switched.status_code == 200, switched.content
    assert (switched.json()["id"], switched.json()["status"]) == (NEW_MODEL, "active")
    assert embeddings.active_model(org_a).pk == NEW_MODEL
    assert embeddings.active_model(org_b) == local
    assert _ranked(dana, "where is the warehouse") == globex_ranked
    assert AuditEvent.objects.filter(organization=org_b).count() == globex_audit
    assert AuditEvent.objects.filter(
        organization=org_a, action="memory.embedding_activate", actor_type="member"
    ).exists()
    assert [row["id"] for row in client_for(charlie).get(LIST_URL).json()] == [local.pk]


def test_a_memory_write_key_switches_no_model_and_a_models_write_key_does(
    tenants, alice, org_a, run_async, key_client
):
    from cadre.agents.evaluation.gates import evaluation_gates_set

    evaluation_gates_set(actor=actor(alice), gates={"embedding_activate": True})
    with run_async():
        reembed_start(actor=actor(alice))
    memory_key = key_client(alice, ["memory:write", "memory:read"])
    with nothing_changes(OrganizationEmbeddingModel, MemoryEmbedding):
        refused = memory_key.post(
            ACTIVATE_URL, {"model": NEW_MODEL, "override_gate": "because"}, format="json"
        )
        listing = memory_key.get(LIST_URL)
    assert refused.status_code == 403, refused.content
    assert refused.json()["error"]["code"] == "permission_denied"
    assert listing.status_code == 403
    assert embeddings.active_model(org_a) == tenants["local"]

    models_key = key_client(alice, ["models:write"])
    switched = models_key.post(
        ACTIVATE_URL, {"model": NEW_MODEL, "override_gate": "because"}, format="json"
    )
    assert switched.status_code == 200, switched.content
    assert embeddings.active_model(org_a).pk == NEW_MODEL


def test_a_reembed_is_started_with_model_manage_not_memory_manage(tenants, alice, org_a):
    from cadre.errors import NotPermitted
    from cadre.memory.models import MemoryTask
    from cadre.tenancy.actors import Actor

    memory_admin = Actor(
        kind="api_key",
        organization=org_a,
        permissions=frozenset({"memory.manage", "memory.view"}),
        label="memory key",
    )
    with nothing_changes(MemoryTask, OrganizationEmbeddingModel), pytest.raises(NotPermitted):
        reembed_start(actor=memory_admin)


BEFORE = [("memory", "0015_memory_verification")]
AFTER = [("memory", "0017_embedding_model_status_per_organization")]


@pytest.mark.django_db(transaction=True)
def test_the_migration_gives_every_organization_the_installations_active_model():
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    old = executor.loader.project_state(BEFORE).apps
    # Organizations as tenancy stores them now (its migrations are not rolled back here).
    acme, globex = OrganizationFactory(slug="acme"), OrganizationFactory(slug="globex")
    Model = old.get_model("memory", "EmbeddingModel")
    Model.objects.create(
        id="local/old", provider="local", name="old", dimension=8, status="retired"
    )
    active = Model.objects.create(
        id="local/current", provider="local", name="current", dimension=8, status="active"
    )
    Model.objects.create(id="openai/next", provider="openai", name="next", dimension=8)

    executor = MigrationExecutor(connection)
    executor.migrate(AFTER)
    new = executor.loader.project_state(AFTER).apps
    Use = new.get_model("memory", "OrganizationEmbeddingModel")
    for organization in (acme, globex):
        states = dict(
            Use.objects.filter(organization_id=organization.pk).values_list("model_id", "status")
        )
        assert states == {
            "local/old": "retired",
            active.pk: "active",
            "openai/next": "building",
        }

    MigrationExecutor(connection).migrate(executor.loader.graph.leaf_nodes())
