"""A run's call chain over the API: GET /api/v1/runs/{id}/call-chain/ — who may read it, and
its content in order (input, policy, memories, model and tool calls, confirmations, reply),
with the delegated child run under the same trace id."""

from __future__ import annotations

import pytest

from cadre.agents.models import Run
from cadre.agents.runtime.lifecycle import execution as engine
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.governance import policy
from cadre.tenancy.actors import member_actor

pytestmark = pytest.mark.django_db


def drain(limit: int = 50) -> None:
    for _ in range(limit):
        run = Run.objects.filter(status=Run.Status.QUEUED).order_by("id").first()
        if run is None:
            return
        engine.run_execute(run.pk)
    raise AssertionError("runs keep coming")


@pytest.fixture
def delegated(bob, alice, deployment):
    """Bob's agent asks Alice's agent; both runs finish."""
    bob_agent = deployment.agents.get(member=bob)
    alice_agent = deployment.agents.get(member=alice)
    run = runtime.run_start(
        actor=member_actor(bob),
        agent=bob_agent,
        text=f"ask agent {alice_agent.pk}: what is the standard discount?",
    )
    policy.evaluate(
        organization=run.organization,
        stage="input",
        payload="mail x@acme.test",
        run_id=run.pk,
        step_index=0,
    )
    drain()
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED
    return run


def test_owner_reads_the_chain_in_order_with_the_delegated_run(alice, delegated, client_for):
    response = client_for(alice).get(f"/api/v1/runs/{delegated.pk}/call-chain/")
    assert response.status_code == 200, response.json()
    chain = response.json()
    assert chain["trace_id"] == delegated.trace_id and chain["run"]["id"] == delegated.pk
    kinds = [event["kind"] for event in chain["events"]]
    assert kinds[0] == "inbound" and kinds[-1] == "reply"
    assert {"policy", "model_call", "tool_call"} <= set(kinds)
    assert chain["events"][0]["input"]["text"].startswith("ask agent")
    timed = [event["at"] for event in chain["events"][1:-1]]
    assert timed == sorted(timed)
    tool_call = next(event for event in chain["events"] if event["kind"] == "tool_call")
    assert "output" in tool_call and tool_call["name"]
    policy_event = next(event for event in chain["events"] if event["kind"] == "policy")
    assert policy_event["plugin"] == "masking" and policy_event["stage"] == "input"
    [child] = chain["children"]
    assert child["run"]["parent"] == delegated.pk and child["run"]["depth"] == 1
    assert child["run"]["trace_id"] == delegated.trace_id
    assert child["events"][0]["input"]["text"] == "what is the standard discount?"
    assert "Standard discount is 5 percent" in child["events"][-1]["output"]["text"]
    assert chain["hidden_children"] == 0


def test_member_reads_their_own_run_but_not_the_colleagues_child(bob, delegated, client_for):
    chain = client_for(bob).get(f"/api/v1/runs/{delegated.pk}/call-chain/").json()
    assert chain["run"]["id"] == delegated.pk
    assert chain["children"] == [] and chain["hidden_children"] == 1
    child = Run.objects.get(parent=delegated)
    assert client_for(bob).get(f"/api/v1/runs/{child.pk}/call-chain/").status_code == 404


def test_employee_without_rights_and_outsider_get_404(delegated, charlie, make_member, client_for):
    colleague = make_member(roles=["employee"])
    url = f"/api/v1/runs/{delegated.pk}/call-chain/"
    assert client_for(colleague).get(url).status_code == 404
    assert client_for(charlie).get(url).status_code == 404


def test_the_call_chain_is_in_the_schema_with_its_types(db, client):
    schema = client.get("/api/schema/", {"format": "json"}).json()
    operation = schema["paths"]["/api/v1/runs/{id}/call-chain/"]["get"]
    ref = operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    component = schema["components"]["schemas"][ref.rsplit("/", 1)[1]]
    assert {"trace_id", "run", "events", "children", "hidden_children"} <= set(
        component["properties"]
    )
