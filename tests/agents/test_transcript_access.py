"""Who reads a transcript (issue 29): a session, its runs, their events and call chain are
personal data — read by the session's member, the agent's owner and holders of
`memory.personal`; `agent.view` alone (an auditor, a business admin) gets 404 and lists none.
Also: callers who may not act are refused before their body is read (403, never 400), and a
context record quoting another member's personal memory is not found without
`memory.personal`."""

from __future__ import annotations

import pytest

from cadre.agents.evaluation import services as evaluation
from cadre.agents.models import Agent, AgentSubscription, ModelProviderConfig, Run
from cadre.agents.runtime.lifecycle import execution as engine
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.governance.models import Confirmation
from cadre.memory.models import ContextRecord, ContextRecordItem
from cadre.tenancy.actors import member_actor
from tests.refusals import nothing_changes

pytestmark = pytest.mark.django_db


@pytest.fixture
def bobs_run(bob, bob_agent):
    run = runtime.run_start(
        actor=member_actor(bob), agent=bob_agent, text="my locker code is 4417, remind me"
    )
    assert engine.run_execute(run.pk) == "completed"
    run.refresh_from_db()
    return run


@pytest.fixture(params=["auditor", "business_admin"])
def viewer(request, make_member):
    """A colleague holding `agent.view` but not `memory.personal`."""
    return make_member(roles=[request.param])


def _transcript_urls(run) -> list[str]:
    return [
        f"/api/v1/sessions/{run.session_id}/",
        f"/api/v1/runs/{run.pk}/",
        f"/api/v1/runs/{run.pk}/events/?timeout=0",
        f"/api/v1/runs/{run.pk}/call-chain/",
        f"/sessions/{run.session_id}/",
        f"/runs/{run.pk}/call-chain/",
    ]


def test_agent_view_does_not_read_a_colleagues_transcript(bobs_run, client_for, viewer):
    client = client_for(viewer)
    for url in _transcript_urls(bobs_run):
        assert client.get(url).status_code == 404, url
    sessions = client.get("/api/v1/sessions/").json()["results"]
    runs = client.get("/api/v1/runs/").json()["results"]
    assert bobs_run.session_id not in [row["id"] for row in sessions]
    assert bobs_run.pk not in [row["id"] for row in runs]
    # the agent page shows the session exists (a count), not its title (the first message)
    page = client.get(f"/agents/{bobs_run.agent_id}/")
    assert page.status_code == 200
    content = page.content.decode()
    assert "locker code" not in content and "1 session is private" in content
    # usage stays: counts and cost, no words
    assert client.get("/api/v1/runs/usage/").status_code == 200


def test_the_subject_and_memory_personal_read_the_transcript(alice, bob, bobs_run, client_for):
    for member in (bob, alice):  # bob's own; alice (owner) holds memory.personal
        client = client_for(member)
        for url in _transcript_urls(bobs_run):
            assert client.get(url).status_code == 200, (member, url)
        assert bobs_run.pk in [row["id"] for row in client.get("/api/v1/runs/").json()["results"]]
    # the subject (an employee, no agent.view) reads their own session page in the console
    page = client_for(bob).get(f"/sessions/{bobs_run.session_id}/")
    assert "locker code" in page.content.decode()


def test_a_deployment_manager_cancels_a_run_without_reading_it(
    bob, bob_agent, make_member, client_for
):
    run = runtime.run_start(actor=member_actor(bob), agent=bob_agent, text="my locker is 4417")
    manager = make_member(roles=["business_admin"])
    response = client_for(manager).post(f"/api/v1/runs/{run.pk}/cancel/", {}, format="json")
    assert response.status_code == 200
    assert response.json()["status"] == Run.Status.CANCELLED
    assert response.json()["input"] == {} and "4417" not in response.content.decode()


def test_an_auditor_rating_a_colleagues_run_is_refused_before_the_body(
    bobs_run, client_for, make_member
):
    auditor = make_member(roles=["auditor"])
    response = client_for(auditor).post(f"/api/v1/runs/{bobs_run.pk}/rating/", {}, format="json")
    assert response.status_code == 403
    bobs_run.refresh_from_db()
    assert bobs_run.rating == ""


def test_an_auditor_editing_a_colleagues_user_md_is_refused_before_the_body(
    bob_agent, client_for, make_member
):
    auditor = make_member(roles=["auditor"])
    with nothing_changes(Agent):
        response = client_for(auditor).patch(f"/api/v1/agents/{bob_agent.pk}/", {}, format="json")
    assert response.status_code == 403


def test_a_member_without_an_agent_may_not_subscribe_whatever_the_body(
    client_for, make_member, org_a
):
    employee = make_member()
    with nothing_changes(AgentSubscription):
        response = client_for(employee).post("/api/v1/agent-subscriptions/", {}, format="json")
    assert response.status_code == 403


def test_a_member_with_an_agent_is_told_what_the_body_lacks(bob, bob_agent, client_for):
    response = client_for(bob).post("/api/v1/agent-subscriptions/", {}, format="json")
    assert response.status_code == 400


def test_a_business_admin_may_not_add_a_model_provider_whatever_the_body(client_for, make_member):
    business_admin = make_member(roles=["business_admin"])
    with nothing_changes(ModelProviderConfig):
        response = client_for(business_admin).post("/api/v1/model-providers/", {}, format="json")
    assert response.status_code == 403


def test_a_case_from_a_colleagues_turn_is_404_to_employees_and_403_to_its_subject(
    bob, bobs_run, client_for, make_member, owner
):
    suite = evaluation.suite_create(actor=owner, name="Turns")
    case = evaluation.case_from_turn(actor=owner, suite=suite, run=bobs_run)
    url = f"/api/v1/evaluation/cases/{case.pk}/"
    for roles in (["employee"], ["skill_reviewer"]):
        assert client_for(make_member(roles=roles)).get(url).status_code == 404, roles
    # evaluation is an admin's tool: the subject is refused it, even for their own turn
    assert client_for(bob).get(url).status_code == 403
    assert client_for(owner.member).get(url).status_code == 200


def test_a_context_record_quoting_personal_memory_needs_memory_personal(
    alice, bob, bobs_run, client_for, viewer
):
    from cadre.memory import services as memory_services

    memory = memory_services.memory_add(
        actor=member_actor(bob),
        scope="user",
        scope_id=bob.pk,
        kind="fact",
        content="Bob's locker code is 4417",
        source_kind="user_statement",
    )
    record = ContextRecord.objects.create(
        organization=bob.organization,
        run_id=str(bobs_run.pk),
        actor_type="member",
        actor_id=str(bob.pk),
        query="locker code",
    )
    ContextRecordItem.objects.create(
        context=record, memory=memory, memory_version=1, rank=1, score=1.0
    )
    shared = ContextRecord.objects.create(organization=bob.organization, query="fiscal year")
    client = client_for(viewer)
    assert client.get(f"/api/v1/memory-context-records/{record.pk}/").status_code == 404
    assert client.get(f"/api/v1/memory-context-records/{shared.pk}/").status_code == 200
    listed = [row["id"] for row in client.get("/api/v1/memory-context-records/").json()["results"]]
    assert record.pk not in listed and shared.pk in listed
    assert client_for(alice).get(f"/api/v1/memory-context-records/{record.pk}/").status_code == 200


def test_an_auditor_and_an_it_admin_may_not_decide_a_confirmation_whatever_the_form(
    bob, bobs_run, client, make_member
):
    from datetime import timedelta

    from django.utils import timezone

    confirmation = Confirmation.objects.create(
        organization=bob.organization,
        idempotency_key="transcript-access",
        requester=bob,
        tool="im_send",
        summary="send it",
        risk_level="high",
        decider_ids=[bob.pk],
        expires_at=timezone.now() + timedelta(hours=1),
        run_id=bobs_run.pk,
    )
    for roles in (["auditor"], ["it_admin"]):
        client.force_login(make_member(roles=roles).user)
        with nothing_changes(Confirmation):
            response = client.post(f"/confirmations/{confirmation.pk}/decide/", {})
        assert response.status_code == 403, roles
        confirmation.refresh_from_db()
        assert confirmation.status == Confirmation.Status.PENDING
