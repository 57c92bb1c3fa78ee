"""A person rates an answer (POST /api/v1/runs/{id}/rating/): the run keeps the rating, it is
audited, the Memory Viewer's recall hit rate counts it (no skill needed), and who may rate is
the run's member or a deployment manager; refusals store nothing."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from cadre.agents.models import Run
from cadre.agents.runtime.lifecycle import execution as engine
from cadre.agents.selectors import rated_runs
from cadre.governance.models import AuditEvent
from cadre.memory import services as memory_services
from cadre.memory.services.context import context_record_for_model_call
from cadre.tenancy.actors import member_actor
from tests.refusals import nothing_changes

pytestmark = pytest.mark.django_db
QUALITY = "/api/v1/memory-viewer/quality/"


def _answered(api, agent, text="What is the standard discount?") -> int:
    run = api.post("/api/v1/runs/", {"agent": agent.pk, "text": text}, format="json").json()
    engine.run_execute(run["id"])
    return run["id"]


def _recall(api) -> dict:
    figures = api.get(QUALITY).json()["figures"]
    return next(f for f in figures if f["key"] == "recall_hit_rate")


def test_a_rated_answer_counts_in_the_recall_hit_rate(client_for, bob, bob_agent):
    api = client_for(bob)
    memory = memory_services.memory_add(
        actor=member_actor(bob),
        scope="user",
        kind="fact",
        content="Bob's customers get the standard discount of 5 percent",
        source_kind="user_statement",
    )
    run_id = _answered(api, bob_agent)
    # The model call's record, as the runtime writes it when retrieval sends that memory.
    context_record_for_model_call(
        actor=member_actor(bob),
        run_id=run_id,
        step_index=3,
        query="What is the standard discount?",
        memories=[{"id": memory.pk, "rank": 1, "score": 0.9, "status": "sent"}],
        skills=[],
    )
    before = _recall(api)
    assert before["signal"] is False and "of 1 model calls" in before["note"]  # not yet rated
    rated = api.post(
        f"/api/v1/runs/{run_id}/rating/", {"outcome": "success", "note": "exactly"}, format="json"
    )
    assert rated.status_code == 200, rated.json()
    assert (rated.json()["rating"], rated.json()["rating_note"]) == ("success", "exactly")
    assert rated.json()["rated_at"]
    event = AuditEvent.objects.get(action="run.rating")
    assert event.changes == {"before": {"rating": None}, "after": {"rating": "success"}}
    assert event.target_id == str(run_id) and event.reason == "exactly"
    recall = _recall(api)  # the cached figures give way to the rating at once
    assert (recall["signal"], recall["value"], recall["denominator"]) == (True, 1.0, 1)
    # A second rating replaces the first.
    api.post(f"/api/v1/runs/{run_id}/rating/", {"outcome": "failure"}, format="json")
    assert _recall(api)["value"] == 0.0
    assert Run.objects.get(pk=run_id).rating == "failure"


def test_rating_refused_for_bad_input_colleagues_and_outsiders(
    client_for, alice, bob, charlie, make_member, bob_agent
):
    run_id = _answered(client_for(bob), bob_agent)
    run = Run.objects.get(pk=run_id)
    url = f"/api/v1/runs/{run_id}/rating/"
    with nothing_changes(run):
        bad = client_for(bob).post(url, {"outcome": "great"}, format="json")
        assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid"
        long = client_for(bob).post(url, {"outcome": "success", "note": "x" * 501}, format="json")
        assert long.status_code == 400
        colleague = make_member(roles=["employee"])
        assert client_for(colleague).post(url, {"outcome": "failure"}).status_code == 404
        assert client_for(charlie).post(url, {"outcome": "failure"}).status_code == 404
    # The owner manages deployments: she may rate any run of the organization.
    assert client_for(alice).post(url, {"outcome": "success"}).status_code == 200


def test_rated_runs_answers_a_window_of_runs_in_one_statement(client_for, bob, charlie, bob_agent):
    api = client_for(bob)
    liked, disliked, unrated = (_answered(api, bob_agent) for _ in range(3))
    api.post(f"/api/v1/runs/{liked}/rating/", {"outcome": "success"})
    api.post(f"/api/v1/runs/{disliked}/rating/", {"outcome": "failure"})
    asked = [str(liked), str(disliked), str(unrated), "not-a-run", "99999999"]
    many = asked + [str(n) for n in range(10**8, 10**8 + 20_000)]
    with CaptureQueriesContext(connection) as queries:
        answer = rated_runs(bob.organization_id, many)
    assert answer == {str(liked): "success", str(disliked): "failure"}
    assert len(queries) == 1
    assert rated_runs(charlie.organization_id, asked) == {}
    assert rated_runs(bob.organization_id, []) == {}
