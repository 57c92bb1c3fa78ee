"""The retrieval suite built from context records (rated turns: the query and the memories it
was sent), and the recall check a held re-embed runs old model against new: recall@10 of both
on the eval run's summary and the re-embed task's result, before anyone switches."""

from __future__ import annotations

import pytest

from cadre.agents.evaluation import recall
from cadre.agents.evaluation.models import EvalCase, EvalRun
from cadre.agents.ratings import RUN_OUTCOMES
from cadre.agents.runtime.lifecycle import execution as engine
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.errors import InvalidInput
from cadre.governance.models import AuditEvent
from cadre.tenancy.actors import member_actor
from tests.memory.conftest import eager_celery  # noqa: F401 (an autouse fixture)
from tests.memory.test_reembed import DIMENSION, embedding_server  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db

NEW_MODEL = "openai/fake-embed-16"
FACTS = (
    "The warehouse is in Ningbo",
    "Invoices go to finance@acme.test",
    "The CFO is Liu Yang",
)


@pytest.fixture
def turns(bob, bob_agent, django_capture_on_commit_callbacks):
    """Bob's memories and two completed turns whose model calls were sent one of them each;
    the first turn was rated a success, the second a failure."""
    from cadre.memory import services as memory_services
    from cadre.memory.services.context import context_record_for_model_call

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
            for text in FACTS
        ]
    runs = []
    for text, memory in (("where is the warehouse", memories[0]), ("who is the CFO", memories[2])):
        run = runtime.run_start(actor=member_actor(bob), agent=bob_agent, text=text)
        engine.run_execute(run.pk)
        context_record_for_model_call(
            actor=member_actor(bob),
            run_id=run.pk,
            step_index=1,
            query=text,
            memories=[
                {"id": memory.pk, "rank": 1, "score": 0.9, "status": "sent", "source": "retrieval"}
            ],
            skills=[],
        )
        runs.append(run)
    ratings = {str(runs[0].pk): "success", str(runs[1].pk): "failure"}
    with RUN_OUTCOMES.overridden(
        {"test": lambda organization_id, ids: {r: ratings[r] for r in ids if r in ratings}}
    ):
        yield {"memories": memories, "runs": runs}


def test_the_retrieval_suite_holds_the_rated_successes_once(owner, turns, bob):
    suite, added = recall.retrieval_suite_refresh(actor=owner)
    assert (suite.kind, added) == ("retrieval", 1)
    case = EvalCase.objects.get(suite=suite)
    assert case.source_run_id == turns["runs"][0].pk
    assert case.input_text == "where is the warehouse"
    assert case.expectations == {"expected_memories": [turns["memories"][0].pk]}
    assert turns["memories"][0].scope_key in case.scopes and case.member_id == bob.pk
    assert recall.retrieval_suite_refresh(actor=owner) == (suite, 0)  # not added twice


def test_a_held_reembed_replays_the_suite_and_reports_recall_at_10(
    owner, alice, client_for, turns, request, monkeypatch, django_capture_on_commit_callbacks
):
    from cadre.agents.evaluation.gates import evaluation_gates_set
    from cadre.memory import embeddings
    from cadre.memory.reembed import embedding_activate

    local = embeddings.active_model(owner.organization)
    evaluation_gates_set(actor=owner, gates={"embedding_activate": True})
    task = _reembed_to_the_new_model(
        owner, request, monkeypatch, django_capture_on_commit_callbacks
    )
    assert embeddings.active_model(owner.organization).pk == local.pk  # held: nothing switched yet
    (check,) = task.result["checks"]
    run = EvalRun.objects.get(pk=check["evaluation_run"])
    assert run.baseline == {"kind": "embedding", "embedding_model": local.pk}
    assert run.candidate == {"kind": "embedding", "embedding_model": NEW_MODEL}
    assert run.status == "completed", run.error
    figures = run.summary["recall_at_k"]
    assert (figures["k"], figures["cases"]) == (10, 1)
    assert figures["baseline"] == 1.0 and figures["candidate"] == 1.0
    # The system read people's turns to build the cases: audited, with its job and reason.
    reads = AuditEvent.objects.filter(action="memory.system_read")
    assert reads.exists()
    assert {(event.actor_label, event.reason) for event in reads} == {
        (
            "re-embed recall check",
            "build the retrieval suite from rated turns to replay a re-embed",
        )
    }
    # where the re-embed is shown: the task's result names the run, the run's summary recall
    client = client_for(alice)
    shown = client.get(f"/api/v1/memory-tasks/{task.pk}/").json()
    assert shown["result"]["checks"][0]["evaluation_run"] == run.pk
    summary = client.get(f"/api/v1/evaluation/runs/{run.pk}/").json()["summary"]
    assert summary["recall_at_k"]["candidate"] == 1.0
    results = client.get(f"/api/v1/evaluation/runs/{run.pk}/results/").json()["results"]
    assert results[0]["comparison"]["recall_at_k"] == {"k": 10, "baseline": 1.0, "candidate": 1.0}
    # the console's embeddings card shows both figures before it offers the switch
    from django.test import Client
    from django.urls import reverse

    console = Client()
    console.force_login(alice.user)
    card = console.get(reverse("console:embeddings")).content.decode()
    assert 'data-recall="active">1.00' in card and 'data-recall="new">1.00' in card
    assert f"Switch search to {NEW_MODEL}" in card and 'name="override"' not in card
    # the passing check opens the gate
    console.post(reverse("console:embeddings_activate"), {"model": NEW_MODEL})
    assert embeddings.active_model(owner.organization).pk == NEW_MODEL
    assert AuditEvent.objects.filter(action="memory.embedding_activate").count() == 1
    with pytest.raises(InvalidInput):
        embedding_activate(actor=owner, model_id=NEW_MODEL)  # already active


def test_a_recall_drop_beyond_the_threshold_is_a_regression():
    from cadre.agents.evaluation.compare import aggregate

    side = {"passed": True, "cost": "0", "latency_ms": 1}
    comparison = {
        "tokens": {"baseline": 1, "candidate": 1},
        "retrieval": {"overlap": 1.0, "recall_of_baseline": 1.0, "mean_rank_change": 0.0},
        "tools": {"same_arguments": True},
        "policy": {"same": True},
    }
    rows = [
        {
            "baseline": side,
            "candidate": side,
            "comparison": {
                **comparison,
                "recall_at_k": {"k": 10, "baseline": 1.0, "candidate": 0.5 if n < 2 else 1.0},
            },
        }
        for n in range(10)
    ]
    summary = aggregate(rows, 0.05)
    assert summary["recall_at_k"] == {
        "k": 10,
        "cases": 10,
        "baseline": 1.0,
        "candidate": 0.9,
        "difference": -0.1,
    }
    assert summary["difference"] == 0.0 and summary["verdict"] == "regression"
    assert aggregate(rows, 0.2)["verdict"] == "pass"


def _reembed_to_the_new_model(owner, request, monkeypatch, capture):
    from cadre.memory.reembed import reembed_start

    request.getfixturevalue("embedding_server")
    monkeypatch.setenv("CADRE_EMBEDDING_PROVIDER", "openai")
    monkeypatch.setenv("CADRE_EMBEDDING_MODEL", "fake-embed-16")
    monkeypatch.setenv("CADRE_EMBEDDING_DIMENSION", str(DIMENSION))
    with capture(execute=True):
        task = reembed_start(actor=owner)
    task.refresh_from_db()
    assert task.status == "completed", task.error
    return task


def test_with_the_gate_off_a_suite_with_cases_still_shows_recall_before_the_switch(
    owner, turns, request, monkeypatch, django_capture_on_commit_callbacks
):
    from cadre.memory import embeddings
    from cadre.memory.reembed import embedding_activate

    local = embeddings.active_model(owner.organization)
    recall.retrieval_suite_refresh(actor=owner)  # one case: the rated turn
    task = _reembed_to_the_new_model(
        owner, request, monkeypatch, django_capture_on_commit_callbacks
    )
    assert embeddings.active_model(owner.organization).pk == local.pk  # held for a person
    (check,) = task.result["checks"]
    run = EvalRun.objects.get(pk=check["evaluation_run"])
    assert run.summary["recall_at_k"]["candidate"] == 1.0
    # The gate is off: switching needs no passing check and no override.
    embedding_activate(actor=owner, model_id=NEW_MODEL)
    assert embeddings.active_model(owner.organization).pk == NEW_MODEL


def test_with_the_gate_off_and_no_cases_a_reembed_switches_on_its_own(
    owner, request, monkeypatch, django_capture_on_commit_callbacks
):
    from cadre.memory import embeddings

    task = _reembed_to_the_new_model(
        owner, request, monkeypatch, django_capture_on_commit_callbacks
    )
    assert embeddings.active_model(owner.organization).pk == NEW_MODEL
    assert not task.result.get("checks")
    assert not EvalRun.objects.exists()
