"""High-risk confirmations: risk classification, deciders, races, expiry, exactly-once resume."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from cadre.errors import Conflict, NotPermitted
from cadre.governance import confirmations, policy
from cadre.governance.models import AuditEvent, Confirmation, ConfirmationVote
from cadre.governance.risk import classify
from cadre.tenancy.actors import member_actor
from tests.refusals import nothing_changes


@pytest.fixture(autouse=True)
def eager_celery():
    from cadre.celery import app

    previous = (app.conf.task_always_eager, app.conf.task_eager_propagates)
    app.conf.task_always_eager, app.conf.task_eager_propagates = True, False
    yield
    app.conf.task_always_eager, app.conf.task_eager_propagates = previous


def _confirm(requester, *, tool="im_send", arguments=None, declared="high", key=None, **kw):
    arguments = arguments if arguments is not None else {"recipients": ["a", "b"], "text": "hi"}
    assessment = classify(tool=tool, arguments=arguments, declared=declared)
    return confirmations.confirmation_create(
        organization=requester.organization,
        tool=tool,
        arguments=arguments,
        assessment=assessment,
        idempotency_key=key or f"test:{tool}:{timezone.now().timestamp()}",
        requester=requester,
        **kw,
    )


# --- risk -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "tool, arguments, declared, level",
    [
        ("task_create", {"title": "x"}, "low", "low"),
        ("im_send", {"recipients": list(range(25))}, "medium", "high"),
        ("im_send", {"recipients": list(range(500))}, "medium", "critical"),
        ("crm_update", {"ids": list(range(60))}, "low", "high"),
        ("crm_delete", {"id": 7}, "low", "high"),
        ("crm_delete", {"ids": list(range(80))}, "low", "critical"),
        ("report_export", {"range": "2025"}, "low", "high"),
        ("payment_create", {"amount": "120.50"}, "low", "high"),
        ("payment_create", {"amount": 25000}, "low", "critical"),
        ("send_email", {"to": ["x@acme.test"]}, "low", "high"),
    ],
)
def test_risk_classification(tool, arguments, declared, level):
    assert classify(tool=tool, arguments=arguments, declared=declared).level == level


def test_external_recipients_are_high_risk_with_internal_domains():
    internal = classify(
        tool="send_email", arguments={"to": ["x@acme.test"]}, internal_domains=["acme.test"]
    )
    external = classify(
        tool="send_email",
        arguments={"to": ["x@acme.test", "y@rival.test"]},
        internal_domains=["acme.test"],
    )
    assert internal.level == "low"
    assert external.level == "high" and external.blast_radius["external_domains"] == ["rival.test"]


def test_policy_require_confirmation_raises_risk(alice):
    from cadre.governance.policy.services import policy_chain_set

    policy_chain_set(
        actor=member_actor(alice),
        plugins=[{"plugin": "tool_access", "config": {"confirm": ["crm_*"]}}],
    )
    result = policy.evaluate(
        organization=alice.organization,
        stage="tool_call",
        payload={"tool": "crm_note", "arguments": {}},
    )
    assessment = classify(tool="crm_note", arguments={}, policy_result=result)
    assert assessment.level == "high" and assessment.needs_confirmation


# --- creation -------------------------------------------------------------------------------


def test_create_masks_arguments_summarizes_and_routes(alice, bob):
    bob.manager = alice
    bob.save(update_fields=["manager"])
    confirmation = _confirm(bob, arguments={"recipients": ["13812345678"], "text": "call me"})
    assert confirmation.status == "pending" and confirmation.risk_level == "high"
    assert "13812345678" not in str(confirmation.arguments) + confirmation.summary
    assert confirmation.decider_ids == [bob.pk, alice.pk]  # requester and manager
    assert confirmation.blast_radius == {"recipients": 1}
    assert "Bob's agent wants to run im_send" in confirmation.summary
    assert (confirmation.expires_at - timezone.now()) > timedelta(minutes=29)
    event = AuditEvent.objects.get(action="confirmation.request")
    assert event.changes["deciders"] == [bob.pk, alice.pk]


def test_create_is_idempotent_per_key(bob):
    first = _confirm(bob, key="run:1:step:3")
    again = _confirm(bob, key="run:1:step:3")
    assert first.pk == again.pk and Confirmation.objects.count() == 1


def test_critical_never_routes_to_requester_alone(bob, make_member):
    admin = make_member(roles=["it_admin"])
    confirmation = _confirm(bob, arguments={"recipients": list(range(300))}, declared="medium")
    assert confirmation.risk_level == "critical"
    assert bob.pk not in confirmation.decider_ids and admin.pk in confirmation.decider_ids


def test_no_manager_falls_back_to_it_admins_and_owners(alice, bob):
    confirmation = _confirm(bob, arguments={"recipients": list(range(300))}, declared="medium")
    assert confirmation.decider_ids == [alice.pk]  # alice owns the organization


# --- deciding -------------------------------------------------------------------------------


def test_requester_approves_high_risk_via_console(bob):
    confirmation = _confirm(bob)
    decided = confirmations.confirmation_decide(
        confirmation=confirmation, actor=member_actor(bob), decision="approve", via="console"
    )
    assert decided.status == "approved" and decided.decided_via == "console"
    assert decided.decided_by_id == bob.pk
    assert AuditEvent.objects.filter(action="confirmation.approve").count() == 1


def test_unauthorized_decider_is_refused(bob, make_member, charlie):
    confirmation = _confirm(bob)
    stranger = make_member(roles=["employee"])
    with pytest.raises(NotPermitted):
        confirmations.confirmation_decide(
            confirmation=confirmation, decider=stranger, decision="approve", via="api"
        )
    from cadre.errors import NotFound

    with pytest.raises(NotFound):  # another organization's member cannot even find it
        confirmations.confirmation_decide(
            confirmation_id=confirmation.pk, decider=charlie, decision="approve", via="api"
        )
    confirmation.refresh_from_db()
    assert confirmation.status == "pending" and not ConfirmationVote.objects.exists()


def test_second_decision_is_a_conflict(bob):
    confirmation = _confirm(bob)
    confirmations.confirmation_decide(
        confirmation=confirmation, decider=bob, decision="reject", via="feishu"
    )
    with pytest.raises(Conflict) as raised:
        confirmations.confirmation_decide(
            confirmation=confirmation, decider=bob, decision="approve", via="console"
        )
    assert raised.value.code == "already_rejected"
    confirmation.refresh_from_db()
    assert confirmation.decided_via == "im:feishu"


def test_n_of_m_needs_two_approvals_and_one_not_the_requester(alice, bob, make_member):
    admin = make_member(roles=["it_admin"])
    bob.manager = alice
    bob.save(update_fields=["manager"])
    org = bob.organization
    org.settings = {
        "confirmation_rules": {
            "critical": {"deciders": ["requester", "manager", "role:it_admin"], "approvals": 2}
        }
    }
    org.save(update_fields=["settings"])
    bob.organization.refresh_from_db()
    confirmation = _confirm(bob, tool="crm_delete", arguments={"ids": list(range(2000))})
    assert confirmation.risk_level == "critical" and confirmation.required_approvals == 2
    assert set(confirmation.decider_ids) == {bob.pk, alice.pk, admin.pk}
    first = confirmations.confirmation_decide(
        confirmation=confirmation, decider=bob, decision="approve", via="console"
    )
    assert first.status == "pending"
    with pytest.raises(Conflict):
        confirmations.confirmation_decide(
            confirmation=confirmation, decider=bob, decision="approve", via="api"
        )
    final = confirmations.confirmation_decide(
        confirmation=confirmation, decider=admin, decision="approve", via="api"
    )
    assert final.status == "approved" and final.decided_by_id == admin.pk


def test_requester_alone_is_never_enough_for_critical(bob, alice):
    org = bob.organization
    org.settings = {"confirmation_rules": {"critical": {"deciders": ["requester"], "approvals": 1}}}
    org.save(update_fields=["settings"])
    confirmation = _confirm(bob, tool="crm_delete", arguments={"ids": list(range(2000))})
    assert confirmation.decider_ids == [bob.pk, alice.pk]  # the owner was added
    decided = confirmations.confirmation_decide(
        confirmation=confirmation, decider=bob, decision="approve", via="console"
    )
    assert decided.status == "pending"  # bob's approval alone does not do it
    decided = confirmations.confirmation_decide(
        confirmation=confirmation, decider=alice, decision="approve", via="console"
    )
    assert decided.status == "approved"


def test_expired_confirmation_is_rejected_never_executed(bob):
    confirmation = _confirm(bob)
    Confirmation.objects.filter(pk=confirmation.pk).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    with pytest.raises(Conflict) as raised:
        confirmations.confirmation_decide(
            confirmation=confirmation, decider=bob, decision="approve", via="console"
        )
    assert raised.value.code == "expired"
    assert confirmations.confirmations_expire() == 1
    confirmation.refresh_from_db()
    assert confirmation.status == "expired"
    assert confirmations.confirmations_expire() == 0
    assert AuditEvent.objects.filter(action="confirmation.expire").count() == 1


def test_cancel_by_requester(bob, alice):
    confirmation = _confirm(bob)
    confirmations.confirmation_cancel(
        actor=member_actor(bob), confirmation=confirmation, reason="not needed"
    )
    confirmation.refresh_from_db()
    assert confirmation.status == "cancelled"


@pytest.mark.django_db(transaction=True)
def test_two_deciders_at_once_make_exactly_one_decision(alice, bob):
    bob.manager = alice
    bob.save(update_fields=["manager"])
    confirmation = _confirm(bob)
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def decide(member, decision):
        try:
            barrier.wait(timeout=10)
            confirmations.confirmation_decide(
                confirmation_id=confirmation.pk, decider=member, decision=decision, via="api"
            )
            outcomes.append(f"decided:{decision}")
        except Conflict as conflict:
            outcomes.append(conflict.code)
        finally:
            connection.close()

    threads = [
        threading.Thread(target=decide, args=(bob, "approve")),
        threading.Thread(target=decide, args=(alice, "reject")),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    confirmation.refresh_from_db()
    assert sorted(o.split(":")[0] for o in outcomes) == [
        "already_" + confirmation.status,
        "decided",
    ]
    assert (
        AuditEvent.objects.filter(
            action__in=["confirmation.approve", "confirmation.reject"]
        ).count()
        == 1
    )


# --- with the agent runtime: approve resumes the run; the call executes exactly once ---------

from tests.agents import conftest as _agents  # noqa: E402  (their fixtures, used below)

owner, sales, template = _agents.owner, _agents.sales, _agents.template
published, deployment, bob_agent = _agents.published, _agents.deployment, _agents.bob_agent


def _paused_run(bob, bob_agent, org_a, text):
    from cadre.agents.models import Run, Wait
    from cadre.agents.runtime.lifecycle import execution as engine
    from cadre.agents.runtime.lifecycle import services as runtime

    run = runtime.run_start(actor=member_actor(bob), agent=bob_agent, text=text)
    assert engine.run_execute(run.pk) == Run.Status.WAITING
    wait = Wait.objects.get(run=run)
    # What the runtime does at a high-risk call (see the report): one confirmation per wait.
    confirmation = _confirm(
        bob,
        tool=wait.details["tool"],
        arguments=wait.details["arguments"],
        declared=wait.details["risk"],
        key=wait.key,
        run_id=run.pk,
        wait_key=wait.key,
        agent_id=bob_agent.pk,
    )
    return run, confirmation


def test_approval_resumes_the_run_and_the_call_runs_once_despite_a_crash(bob, bob_agent, org_a):
    from cadre.agents.models import AgentMessage, Run
    from cadre.agents.runtime.lifecycle import execution as engine
    from cadre.agents.runtime.records import crashpoints
    from tests.factories import MemberFactory

    names = [
        MemberFactory(organization=org_a, display_name=f"Rep {i}").display_name for i in range(6)
    ]
    run, confirmation = _paused_run(bob, bob_agent, org_a, f"send price list to {', '.join(names)}")
    confirmations.confirmation_decide(
        confirmation=confirmation, decider=bob, decision="approve", via="console"
    )
    with crashpoints.crash_after("tool_call"), pytest.raises(crashpoints.SimulatedCrash):
        engine.run_execute(run.pk)  # the worker dies right after the send
    assert engine.run_execute(run.pk) == Run.Status.COMPLETED  # the redelivered task
    assert AgentMessage.objects.count() == 1
    assert len(AgentMessage.objects.get().recipients) == 6


def test_rejection_resumes_the_run_with_a_refusal_the_model_sees(bob, bob_agent, org_a):
    from cadre.agents.models import AgentMessage, Run
    from cadre.agents.runtime.lifecycle import execution as engine

    run, confirmation = _paused_run(bob, bob_agent, org_a, "send hello to group:all-staff")
    confirmations.confirmation_decide(
        confirmation=confirmation, decider=bob, decision="reject", via="api", reason="too broad"
    )
    assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    assert not AgentMessage.objects.exists()
    run.refresh_from_db()
    assert "too broad" in run.output["text"]


def test_expiry_resumes_the_run_as_rejected(bob, bob_agent, org_a):
    from cadre.agents.models import AgentMessage, Run
    from cadre.agents.runtime.lifecycle import execution as engine

    run, confirmation = _paused_run(bob, bob_agent, org_a, "send hello to group:all-staff")
    Confirmation.objects.filter(pk=confirmation.pk).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert confirmations.confirmations_expire() == 1
    assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    assert not AgentMessage.objects.exists()


# --- API ----------------------------------------------------------------------------------


def test_api_queue_and_decision(alice, bob, make_member, client_for):
    bob.manager = alice
    bob.save(update_fields=["manager"])
    confirmation = _confirm(bob)
    mine = client_for(alice).get("/api/v1/confirmations/?mine=true&status=pending")
    assert mine.status_code == 200
    assert [item["id"] for item in mine.json()["results"]] == [confirmation.pk]
    assert mine.json()["results"][0]["may_decide"] is True
    response = client_for(alice).post(
        f"/api/v1/confirmations/{confirmation.pk}/approve/",
        {"reason": "ok for this quarter"},
        format="json",
    )
    assert response.status_code == 200, response.json()
    assert response.json()["status"] == "approved" and response.json()["decided_via"] == "console"
    with nothing_changes(confirmation, ConfirmationVote):
        again = client_for(bob).post(
            f"/api/v1/confirmations/{confirmation.pk}/reject/", {}, format="json"
        )
    assert again.status_code == 409 and again.json()["error"]["code"] == "already_approved"


def test_api_visibility_and_unauthorized_decider(alice, bob, charlie, make_member, client_for):
    confirmation = _confirm(bob)
    colleague = make_member(roles=["employee"])
    assert client_for(colleague).get(f"/api/v1/confirmations/{confirmation.pk}/").status_code == 404
    assert client_for(colleague).get("/api/v1/confirmations/").json()["results"] == []
    assert client_for(charlie).get(f"/api/v1/confirmations/{confirmation.pk}/").status_code == 404
    # alice (owner) sees it but is not a decider of this one
    assert client_for(alice).get(f"/api/v1/confirmations/{confirmation.pk}/").status_code == 200
    refused = client_for(alice).post(
        f"/api/v1/confirmations/{confirmation.pk}/approve/", {}, format="json"
    )
    assert refused.status_code == 403
    assert client_for(bob).get(f"/api/v1/confirmations/{confirmation.pk}/").status_code == 200


def test_card_content_carries_a_single_use_token_per_decider(bob):
    from connectors.cards.decisions import confirmation_card, read_decision_token

    confirmation = _confirm(bob)
    card = confirmation_card(confirmation, bob)
    assert card["title"] == "Confirm: im_send (high risk)"
    assert {a["id"] for a in card["actions"]} == {"approve", "reject"}

    claim = read_decision_token(card["actions"][0]["value"]["cadre_token"])
    assert claim.confirmation_ref == str(confirmation.pk) and claim.decider_id == bob.pk


# --- live queue (Channels) ------------------------------------------------------------------


class WebsocketCommunicator:
    """channels.testing.WebsocketCommunicator without importing channels.testing (whose
    package __init__ needs daphne, not installed): the same connect/receive/send calls."""

    def __init__(self, application, path: str, *, user):
        from asgiref.testing import ApplicationCommunicator

        scope = {
            "type": "websocket",
            "path": path,
            "headers": [],
            "subprotocols": [],
            "user": user,
            "session": {},
        }
        self.inner = ApplicationCommunicator(application, scope)

    async def connect(self, timeout: float = 10):
        await self.inner.send_input({"type": "websocket.connect"})
        response = await self.inner.receive_output(timeout)
        return response["type"] == "websocket.accept", response.get("code")

    async def receive_json_from(self, timeout: float = 10):
        import json

        response = await self.inner.receive_output(timeout)
        assert response["type"] == "websocket.send", response
        return json.loads(response["text"])

    async def receive_nothing(self, timeout: float = 1):
        return await self.inner.receive_nothing(timeout)

    async def disconnect(self, code: int = 1000):
        await self.inner.send_input({"type": "websocket.disconnect", "code": code})
        await self.inner.wait(1)


@pytest.mark.django_db(transaction=True)
def test_websocket_streams_the_queue_to_deciders_only(alice, bob, make_member):
    from asgiref.sync import async_to_sync, sync_to_async

    from cadre.governance.consumers import ConfirmationQueueConsumer

    bob.manager = alice
    bob.save(update_fields=["manager"])
    outsider = make_member(roles=["employee"])
    existing = _confirm(bob, key="ws:1")

    async def connect(member):
        communicator = WebsocketCommunicator(
            ConfirmationQueueConsumer.as_asgi(), "/ws/confirmations/", user=member.user
        )
        connected, _ = await communicator.connect()
        assert connected
        return communicator

    async def scenario():
        deciding = await connect(alice)
        first = await deciding.receive_json_from(timeout=10)
        assert first["type"] == "queue"
        assert [item["id"] for item in first["confirmations"]] == [existing.pk]
        watching = await connect(outsider)
        assert (await watching.receive_json_from(timeout=10))["confirmations"] == []
        created = await sync_to_async(_confirm)(bob, key="ws:2")
        pushed = await deciding.receive_json_from(timeout=10)
        assert pushed["type"] == "created" and pushed["confirmation"]["id"] == created.pk
        assert await watching.receive_nothing(timeout=1)
        from django.contrib.auth.models import AnonymousUser

        anonymous = WebsocketCommunicator(
            ConfirmationQueueConsumer.as_asgi(), "/ws/confirmations/", user=AnonymousUser()
        )
        connected, _ = await anonymous.connect()
        assert not connected
        await deciding.disconnect()
        await watching.disconnect()

    async_to_sync(scenario)()


# --- the call chain ------------------------------------------------------------------------


def test_run_call_chain_links_policy_steps_and_confirmation(bob, bob_agent, org_a, alice, charlie):
    from cadre.agents.call_chain import run_call_chain
    from cadre.agents.runtime.lifecycle import execution as engine

    run, confirmation = _paused_run(bob, bob_agent, org_a, "send hello to group:all-staff")
    policy.evaluate(
        organization=org_a, stage="input", payload="mail x@acme.test", run_id=run.pk, step_index=0
    )
    confirmations.confirmation_decide(
        confirmation=confirmation, decider=bob, decision="approve", via="console"
    )
    engine.run_execute(run.pk)
    run.refresh_from_db()
    chain = run_call_chain(member_actor(alice), run)
    kinds = [event["kind"] for event in chain["events"]]
    assert kinds[0] == "inbound" and kinds[-1] == "reply"
    assert {"policy", "hook", "model_call", "wait", "tool_call", "confirmation"} <= set(kinds)
    confirmation_event = next(e for e in chain["events"] if e["kind"] == "confirmation")
    assert confirmation_event["status"] == "approved" and confirmation_event["duration_ms"] >= 0
    assert chain["run"]["audit_events"] >= 1
    assert run_call_chain(member_actor(bob), run)["run"]["id"] == run.pk  # their own agent
    from cadre.errors import NotFound

    with pytest.raises(NotFound):
        run_call_chain(member_actor(charlie), run)


# --- the gate the runtime calls -------------------------------------------------------------


def test_tool_call_gate_allows_denies_and_confirms(alice, bob):
    from cadre.governance.policy.services import policy_chain_set

    policy_chain_set(
        actor=member_actor(alice),
        plugins=[{"plugin": "tool_access", "config": {"deny": ["shell"]}}],
    )
    common = {"organization": bob.organization, "requester": bob, "run_id": 5}
    low = confirmations.tool_call_gate(
        tool="task_create", arguments={"title": "x"}, idempotency_key="run:5:step:1", **common
    )
    assert low.action == "allow" and low.confirmation is None
    denied = confirmations.tool_call_gate(
        tool="shell", arguments={"cmd": "ls"}, idempotency_key="run:5:step:2", **common
    )
    assert denied.action == "deny" and "denied by policy" in denied.reason
    risky = confirmations.tool_call_gate(
        tool="crm_delete", arguments={"id": 3}, idempotency_key="run:5:step:3", **common
    )
    assert risky.action == "confirm" and risky.confirmation.wait_key == "run:5:step:3"
    replay = confirmations.tool_call_gate(
        tool="crm_delete", arguments={"id": 3}, idempotency_key="run:5:step:3", **common
    )
    assert replay.confirmation.pk == risky.confirmation.pk
    forced = confirmations.tool_call_gate(
        tool="task_create",
        arguments={},
        idempotency_key="run:5:step:4",
        always_confirm=True,
        **common,
    )
    assert forced.action == "confirm" and forced.confirmation.risk_level == "medium"
