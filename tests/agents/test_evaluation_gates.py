"""Evaluation gates: the settings API, and the gates on publishing a template version,
changing a template's model and activating an embedding model — each blocks without a passing
replay of that change and audits an override with its reason."""

from __future__ import annotations

import dataclasses

import pytest

from cadre.governance.models import AuditEvent
from cadre.tenancy.models import Organization
from tests.memory.conftest import eager_celery  # noqa: F401 (an autouse fixture)
from tests.memory.test_reembed import DIMENSION, embedding_server  # noqa: F401 (a fixture)
from tests.refusals import nothing_changes

pytestmark = pytest.mark.django_db

GATES_URL = "/api/v1/evaluation/gates/"


def _settings(organization) -> dict:
    return Organization.objects.get(pk=organization.pk).settings


def test_gates_are_read_with_evaluation_view_and_set_with_organization_manage(
    alice, bob, charlie, client_for, make_member, org_a
):
    everything_off = {
        "template_publish": False,
        "template_model_change": False,
        "embedding_activate": False,
    }
    business_admin = make_member(roles=["business_admin"])
    assert client_for(business_admin).get(GATES_URL).json() == everything_off
    assert client_for(bob).get(GATES_URL).status_code == 403  # an employee reads no evaluation
    response = client_for(alice).put(GATES_URL, {"template_publish": True}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["template_publish"] is True
    assert _settings(org_a)["evaluation_gates"]["template_publish"] is True
    event = AuditEvent.objects.get(action="evaluation.gates.update")
    assert (event.actor_type, event.actor_id) == ("member", str(alice.pk))
    # another organization's setting is its own
    assert client_for(charlie).get(GATES_URL).json()["template_publish"] is False
    # an IT admin (no organization.manage) may read but not set them, an employee neither
    it_admin = make_member(roles=["it_admin"])
    for member in (bob, it_admin):
        with nothing_changes(Organization.objects.get(pk=org_a.pk)):
            refused = client_for(member).put(GATES_URL, {"template_publish": False}, format="json")
        assert refused.status_code == 403
        assert refused.json()["error"]["code"] == "permission_denied"
    assert client_for(it_admin).get(GATES_URL).json()["template_publish"] is True


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"template_publish": "maybe"}, "invalid"),
        ({"release_day": True}, "unknown_gate"),
        ({"template_publish": True, "release_day": True}, "unknown_gate"),
        (["template_publish"], "invalid_gates"),
    ],
)
def test_a_bad_gates_body_is_refused_and_nothing_changes(alice, client_for, org_a, body, code):
    before = _settings(org_a)
    with nothing_changes(Organization.objects.get(pk=org_a.pk)):
        response = client_for(alice).put(GATES_URL, body, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] == code
    assert _settings(org_a) == before


def test_the_gates_api_is_in_the_schema_with_its_serializer(client):
    schema = client.get("/api/schema/", {"format": "json"}).json()
    item = schema["paths"]["/api/v1/evaluation/gates/"]
    assert set(item) >= {"get", "put"}
    ref = item["put"]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    component = schema["components"]["schemas"][ref.rsplit("/", 1)[1]]
    assert "template_publish" in component["properties"]
    assert item["get"]["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]


# --- changing a template's model ------------------------------------------------------------


@pytest.fixture
def model_suite(owner, template, published):
    from cadre.agents.evaluation import services

    suite = services.suite_create(actor=owner, name="Sales turns", template=template)
    services.case_create(
        actor=owner,
        suite=suite,
        data={"input": "What is the standard discount?", "required_facts": ["5 percent"]},
    )
    return suite


def _draft(owner, template, **content):
    from cadre.agents import services as agents

    draft = agents.version_draft(actor=owner, template=template)
    if content:
        agents.version_update(actor=owner, version=draft, **content)
    return agents.version_submit(actor=owner, version=draft)


def _replay(owner, suite, candidate):
    from cadre.agents.evaluation import services

    run = services.eval_run_start(actor=owner, suite=suite, candidate=candidate)
    services.eval_run_execute(run.pk)
    run.refresh_from_db()
    return run


OFFLINE_2 = {"provider": "offline", "model": "offline-2", "budget": {"max_steps": 6}}


def test_a_model_change_is_blocked_without_a_replay_of_it(
    alice, client_for, owner, template, published, model_suite
):
    from cadre.agents import services as agents
    from cadre.agents.evaluation.gates import evaluation_gates_set
    from cadre.agents.models import TemplateVersion
    from cadre.errors import Conflict

    evaluation_gates_set(actor=owner, gates={"template_model_change": True})
    draft = _draft(owner, template, model_settings=OFFLINE_2)
    # a passing replay of another model does not open the gate for this one
    other = _replay(owner, model_suite, {"kind": "model", "model_settings": {"model": "offline-3"}})
    assert other.verdict == "pass"
    with (
        nothing_changes(TemplateVersion.objects.filter(status="published"), published),
        pytest.raises(Conflict) as blocked,
    ):
        agents.version_publish(actor=owner, version=draft, reason="cheaper model")
    assert blocked.value.code == "evaluation_gate"
    assert blocked.value.details == {"gate": "template_model_change", "replay": None}
    response = client_for(alice).post(f"/api/v1/template-versions/{draft.pk}/publish/", {})
    assert response.status_code == 409
    assert response.json()["error"]["details"]["gate"] == "template_model_change"
    draft.refresh_from_db()
    assert draft.status == "in_review"
    live = TemplateVersion.objects.get(template=template, status="published")
    assert live.model_settings["model"] == "offline-1"

    # a change that keeps the model is not gated by it
    agents.version_withdraw(actor=owner, version=draft)
    agents.version_update(
        actor=owner, version=draft, model_settings={**OFFLINE_2, "model": "offline-1"}
    )
    draft = agents.version_submit(actor=owner, version=draft)
    assert agents.version_publish(actor=owner, version=draft).status == "published"


def test_a_passing_replay_of_the_model_change_opens_the_gate(owner, template, model_suite):
    from cadre.agents import services as agents
    from cadre.agents.evaluation.gates import evaluation_gates_set

    evaluation_gates_set(actor=owner, gates={"template_model_change": True})
    draft = _draft(owner, template, model_settings=OFFLINE_2)
    run = _replay(owner, model_suite, {"kind": "model", "model_settings": {"model": "offline-2"}})
    assert run.verdict == "pass"
    published = agents.version_publish(actor=owner, version=draft, reason="cheaper")
    assert published.status == "published" and published.model_settings["model"] == "offline-2"
    assert not AuditEvent.objects.filter(action="evaluation.gate.override").exists()


def test_a_regressed_model_replay_blocks_and_an_override_is_audited(
    alice, client_for, owner, template, model_suite, monkeypatch
):
    from cadre.agents import services as agents
    from cadre.agents.evaluation.gates import evaluation_gates_set
    from cadre.errors import Conflict
    from cadre.llm.offline import OfflineProvider

    evaluation_gates_set(actor=owner, gates={"template_model_change": True})
    draft = _draft(owner, template, model_settings=OFFLINE_2)
    real_chat = OfflineProvider.chat

    def forgetful(self, messages, tools=None, **kwargs):
        result = real_chat(self, messages, tools, **kwargs)
        if self.model == "offline-2":  # the candidate model forgets the discount
            return dataclasses.replace(result, text="I do not know.")
        return result

    monkeypatch.setattr(OfflineProvider, "chat", forgetful)
    run = _replay(owner, model_suite, {"kind": "model", "model_settings": {"model": "offline-2"}})
    assert run.verdict == "regression"
    with pytest.raises(Conflict) as blocked:
        agents.version_publish(actor=owner, version=draft)
    assert blocked.value.details == {"gate": "template_model_change", "replay": run.pk}
    response = client_for(alice).post(
        f"/api/v1/template-versions/{draft.pk}/publish/",
        {"override_gate": "the vendor retires offline-1 on Friday"},
        format="json",
    )
    assert response.status_code == 200, response.content
    override = AuditEvent.objects.get(action="evaluation.gate.override")
    assert (override.actor_type, override.actor_id) == ("member", str(alice.pk))
    assert override.reason == "the vendor retires offline-1 on Friday"
    assert override.changes["after"]["gate"] == "template_model_change"
    assert override.changes["after"]["replay"] == run.pk
    assert override.changes["after"]["verdict"] == "regression"


# --- activating an embedding model ----------------------------------------------------------

NEW_MODEL = "openai/fake-embed-16"


@pytest.fixture
def filled(bob, owner, request, monkeypatch, django_capture_on_commit_callbacks):
    """Bob's memories under the local model, and a held re-embed that filled NEW_MODEL (its
    tasks run in this process: `eager_celery` is autouse here)."""
    request.getfixturevalue("embedding_server")
    from cadre.agents.evaluation.gates import evaluation_gates_set
    from cadre.memory import embeddings
    from cadre.memory import services as memory_services
    from cadre.memory.reembed import reembed_start
    from cadre.tenancy.actors import member_actor

    with django_capture_on_commit_callbacks(execute=True):
        memories = [
            memory_services.memory_add(
                actor=member_actor(bob),
                scope="user",
                scope_id=bob.pk,
                kind="fact",
                content=text,
                source_kind="user_statement",
            )
            for text in (
                "The warehouse is in Ningbo",
                "Invoices go to finance@acme.test",
                "The CFO is Liu Yang",
            )
        ]
    local = embeddings.active_model(bob.organization)
    evaluation_gates_set(actor=owner, gates={"embedding_activate": True})
    monkeypatch.setenv("CADRE_EMBEDDING_PROVIDER", "openai")
    monkeypatch.setenv("CADRE_EMBEDDING_MODEL", "fake-embed-16")
    monkeypatch.setenv("CADRE_EMBEDDING_DIMENSION", str(DIMENSION))
    with django_capture_on_commit_callbacks(execute=True):
        task = reembed_start(actor=owner)
    task.refresh_from_db()
    return {"memories": memories, "local": local, "task": task, "organization": bob.organization}


def test_a_held_reembed_fills_the_vectors_but_does_not_switch(filled):
    from cadre.memory import embeddings
    from cadre.memory.models import OrganizationEmbeddingModel

    task = filled["task"]
    assert task.status == "completed", task.error
    assert task.result["held"] is True and task.result["activated"] is False
    assert task.result["remaining"] == 0
    assert OrganizationEmbeddingModel.objects.get(model_id=NEW_MODEL).status == "building"
    assert embeddings.active_model(filled["organization"]).pk == filled["local"].pk


def test_activating_an_embedding_model_is_blocked_without_a_retrieval_replay(filled, owner, bob):
    from cadre.errors import Conflict, NotPermitted
    from cadre.memory.models import OrganizationEmbeddingModel
    from cadre.memory.reembed import embedding_activate
    from cadre.tenancy.actors import member_actor

    uses = OrganizationEmbeddingModel.objects.all()
    with (
        nothing_changes(*[OrganizationEmbeddingModel.objects.get(pk=use.pk) for use in uses]),
        pytest.raises(Conflict) as blocked,
    ):
        embedding_activate(actor=owner, model_id=NEW_MODEL)
    assert blocked.value.code == "evaluation_gate"
    assert blocked.value.details["gate"] == "embedding_activate"
    assert OrganizationEmbeddingModel.objects.get(status="active").model_id == filled["local"].pk
    with nothing_changes(OrganizationEmbeddingModel), pytest.raises(NotPermitted):
        embedding_activate(actor=member_actor(bob), model_id=NEW_MODEL, override_gate="x")


def test_an_override_switches_and_is_audited_with_its_reason(filled, owner, alice):
    from cadre.memory import embeddings
    from cadre.memory.reembed import embedding_activate

    model = embedding_activate(
        actor=owner, model_id=NEW_MODEL, override_gate="the old endpoint shuts down tonight"
    )
    assert model.status == "active"
    assert embeddings.active_model(filled["organization"]).pk == NEW_MODEL
    override = AuditEvent.objects.get(action="evaluation.gate.override")
    assert (override.actor_type, override.actor_id) == ("member", str(alice.pk))
    assert override.reason == "the old endpoint shuts down tonight"
    assert override.changes["after"]["gate"] == "embedding_activate"
    assert (override.target_type, override.target_id) == ("embedding_model", NEW_MODEL)
    switched = AuditEvent.objects.get(action="memory.embedding_activate")
    assert switched.changes == {
        "before": {"active": filled["local"].pk},
        "after": {"active": NEW_MODEL},
    }


def test_a_passing_retrieval_replay_opens_the_embedding_gate(filled, owner):
    from cadre.agents.evaluation import services
    from cadre.memory.reembed import embedding_activate

    warehouse = filled["memories"][0]
    suite = services.suite_create(actor=owner, name="Recall", kind="retrieval")
    services.case_create(
        actor=owner,
        suite=suite,
        data={
            "input": "where is the warehouse",
            "scopes": [warehouse.scope_key],
            "expected_memories": [warehouse.pk],
        },
    )
    run = _replay(owner, suite, {"kind": "embedding", "embedding_model": NEW_MODEL})
    assert run.verdict == "pass", run.summary
    assert embedding_activate(actor=owner, model_id=NEW_MODEL).status == "active"
    assert not AuditEvent.objects.filter(action="evaluation.gate.override").exists()


def test_the_console_switch_needs_a_reason_without_a_passing_check(filled, alice):
    from django.test import Client
    from django.urls import reverse

    from cadre.memory import embeddings

    console = Client()
    console.force_login(alice.user)
    card = console.get(reverse("console:embeddings")).content.decode()
    assert "No recall check yet" in card and 'name="override"' in card
    refused = console.post(
        reverse("console:embeddings_activate"), {"model": NEW_MODEL}, follow=True
    ).content.decode()
    assert "needs a passing evaluation suite (embedding_activate)" in refused
    assert embeddings.active_model(filled["organization"]).pk == filled["local"].pk
    console.post(
        reverse("console:embeddings_activate"), {"model": NEW_MODEL, "override": "vendor EOL"}
    )
    assert embeddings.active_model(filled["organization"]).pk == NEW_MODEL
    assert AuditEvent.objects.get(action="evaluation.gate.override").reason == "vendor EOL"


def test_the_api_switch_is_gated_and_takes_an_override(filled, alice, bob, client_for):
    from cadre.memory import embeddings
    from cadre.memory.models import OrganizationEmbeddingModel

    url = "/api/v1/embedding-models/activate/"
    client = client_for(alice)
    with nothing_changes(OrganizationEmbeddingModel.objects.get(model_id=NEW_MODEL)):
        refused = client.post(url, {"model": NEW_MODEL}, format="json")
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "evaluation_gate"
    assert client.post(url, {}, format="json").json()["error"]["code"] == "invalid"
    assert client.post(url, {"model": "nope/none"}, format="json").status_code == 404
    assert client_for(bob).post(url, {"model": NEW_MODEL}, format="json").status_code == 403
    switched = client.post(url, {"model": NEW_MODEL, "override_gate": "EOL"}, format="json")
    assert switched.status_code == 200, switched.content
    assert switched.json()["id"] == NEW_MODEL and switched.json()["status"] == "active"
    assert embeddings.active_model(filled["organization"]).pk == NEW_MODEL
    assert AuditEvent.objects.get(action="evaluation.gate.override").reason == "EOL"
