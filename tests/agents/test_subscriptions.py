"""Subscriptions between agents: a publish reaches the subscribers' runs with a structured
message and only explicitly shared (never personal) memories, under one trace id, every hop
audited; cycles and fan-out are bounded; a replayed publish delivers once; consent and
tenancy hold."""

from __future__ import annotations

import json

import pytest

from cadre.agents import services, subscriptions
from cadre.agents.models import AgentSubscription, Run, Step
from cadre.agents.runtime.lifecycle import execution as engine
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.agents.runtime.records import crashpoints
from cadre.errors import NotPermitted
from cadre.governance.models import AuditEvent
from cadre.tenancy.actors import member_actor
from tests.agents.conftest import publish as publish_version
from tests.factories import MemberFactory, PositionFactory

pytestmark = pytest.mark.django_db

PUBLISHING_TOOLS = {"notify_subscribers": {"risk": "medium", "confirmation": "never"}}


def deploy(owner, code: str, members: list) -> list:
    """A published role template (offline model, `notify_subscribers` allowed) deployed to a
    position held by `members`; their agents, in order."""
    organization = members[0].organization
    position = PositionFactory(organization=organization, name=code.title(), code=code)
    for member in members:
        member.positions.add(position)
    template = services.template_create(
        actor=owner,
        name=f"{code.title()} agent",
        code=f"{code}-agent",
        agent_md=f"# Persona\nYou are the {code} agent.",
        tool_permissions=PUBLISHING_TOOLS,
        model_settings={"provider": "offline", "model": "offline-1"},
        memory_policy={"read_scopes": ["agent", "user"], "write_scopes": ["agent"]},
        hooks={"assemble_context": [{"name": "memory_retrieval", "enabled": False}]},
    )
    publish_version(owner, template.versions.get())
    deployment = services.deployment_create(
        actor=owner, name=f"{code} agents", template=template, positions=[position]
    )
    return [deployment.agents.get(member=member) for member in members]


def member(org, name: str):
    return MemberFactory(
        organization=org, display_name=name, email=f"{name.lower()}@acme.test", roles=["employee"]
    )


def memory(org, scope_key: str, content: str):
    from cadre.memory.dedup import content_hash
    from cadre.memory.models import Memory

    scope, _, scope_id = scope_key.partition(":")
    return Memory.objects.create(
        organization=org,
        scope=scope,
        scope_id=int(scope_id),
        scope_key=scope_key,
        content=content,
        search_text=content,
        content_hash=content_hash(content),
    )


def drain(limit: int = 50) -> list[int]:
    """Execute queued runs until none is left (what the workers do)."""
    done = []
    for _ in range(limit):
        run = Run.objects.filter(status=Run.Status.QUEUED).order_by("id").first()
        if run is None:
            return done
        engine.run_execute(run.pk)
        done.append(run.pk)
    raise AssertionError("runs keep coming")


def model_input(run: Run) -> str:
    steps = run.steps.filter(kind=Step.Kind.MODEL_CALL).order_by("index")
    return json.dumps([step.input for step in steps], ensure_ascii=False)


def publish_output(run: Run) -> dict:
    return run.steps.get(kind=Step.Kind.TOOL_CALL, name="notify_subscribers").output


@pytest.fixture
def cast(org_a, alice, bob):
    """Bob's hot-topic tracker → Dave's market analyst → Erin's product manager agent."""
    owner = member_actor(alice)
    dave, erin = member(org_a, "Dave"), member(org_a, "Erin")
    (tracker,) = deploy(owner, "tracker", [bob])
    (analyst,) = deploy(owner, "analyst", [dave])
    (pm,) = deploy(owner, "product", [erin])
    return {
        "owner": owner,
        "dave": dave,
        "erin": erin,
        "tracker": tracker,
        "analyst": analyst,
        "pm": pm,
    }


def test_publications_flow_down_a_three_agent_chain_under_one_trace(cast, org_a, bob):
    owner, tracker, analyst, pm = cast["owner"], cast["tracker"], cast["analyst"], cast["pm"]
    subscriptions.subscription_create(actor=owner, subscriber=analyst, publisher=tracker)
    subscriptions.subscription_create(
        actor=owner, subscriber=pm, publisher=analyst, topics=["market"]
    )
    finding = memory(org_a, f"agent:{tracker.pk}", "Chip lead times grew to 26 weeks")
    private = memory(org_a, f"user:{bob.pk}", "Bob's salary review is next Tuesday")
    run = runtime.run_start(
        actor=member_actor(bob),
        agent=tracker,
        text=f"publish chips: publish market: chip demand up 30% "
        f"sharing memories {finding.pk}, {private.pk}",
    )
    drain()

    first = Run.objects.get(agent=analyst)
    second = Run.objects.get(agent=pm)
    for hop in (run, first, second):
        hop.refresh_from_db()
        assert hop.status == Run.Status.COMPLETED
    assert run.trace_id and first.trace_id == second.trace_id == run.trace_id
    assert first.trigger == second.trigger == "subscription"
    assert first.session.channel == "subscription"
    assert first.member_id == cast["dave"].pk and second.member_id == cast["erin"].pk
    assert first.input["publication"] == {
        "topic": "chips",
        "summary": "publish market: chip demand up 30%",
        "data": {},
    }
    assert first.input["from"]["agent"] == tracker.pk
    assert first.input["subscription"]["hop"] == 1
    assert second.input["publication"]["summary"] == "chip demand up 30%"
    assert second.input["subscription"]["hop"] == 2
    assert second.input["subscription"]["chain"] == [tracker.pk, analyst.pk]
    assert "Published on chips to 1 subscriber(s)" in run.output["text"]

    # Only the explicitly shared agent memory passed; the member's personal one never did.
    shared = publish_output(run)
    assert shared["shared_memories"] == [finding.pk]
    assert shared["withheld_memories"] == [private.pk]
    seen_by_analyst = model_input(first)
    assert "Chip lead times grew to 26 weeks" in seen_by_analyst
    assert "salary review" not in seen_by_analyst
    # The analyst shared nothing onwards.
    assert "Chip lead times" not in model_input(second)

    hops = list(AuditEvent.objects.filter(action="agent.subscription.deliver").order_by("id"))
    assert [(h.changes["from_agent"], h.changes["to_agent"]) for h in hops] == [
        (tracker.pk, analyst.pk),
        (analyst.pk, pm.pk),
    ]
    assert {h.trace_id for h in hops} == {run.trace_id}
    assert all(h.actor_type == "agent" for h in hops)


def test_a_cycle_between_two_agents_stops_at_the_hop_bound(cast, bob, settings):
    settings.CADRE_SUBSCRIPTION_MAX_HOPS = 3
    owner, tracker, analyst = cast["owner"], cast["tracker"], cast["analyst"]
    subscriptions.subscription_create(actor=owner, subscriber=analyst, publisher=tracker)
    subscriptions.subscription_create(actor=owner, subscriber=tracker, publisher=analyst)
    run = runtime.run_start(
        actor=member_actor(bob), agent=tracker, text="publish loop: " * 8 + "round and round"
    )
    drain()

    runs = list(Run.objects.order_by("id"))
    assert [r.agent_id for r in runs] == [tracker.pk, analyst.pk, tracker.pk, analyst.pk]
    assert all(r.status == Run.Status.COMPLETED for r in runs)
    assert {r.trace_id for r in runs} == {run.trace_id}
    assert publish_output(runs[-1])["delivered"] == []
    assert publish_output(runs[-1])["skipped"][0]["reason"] == "too_many_hops"
    assert AuditEvent.objects.filter(action="agent.subscription.deliver").count() == 3


def test_fan_out_per_publish_is_bounded(owner, org_a, alice, bob, settings):
    settings.CADRE_SUBSCRIPTION_MAX_FANOUT = 2
    (tracker,) = deploy(owner, "tracker", [bob])
    followers = deploy(owner, "analyst", [member(org_a, n) for n in ("Dave", "Erin", "Fay")])
    for follower in followers:
        subscriptions.subscription_create(actor=owner, subscriber=follower, publisher=tracker)
    run = runtime.run_start(actor=member_actor(bob), agent=tracker, text="publish chips: news")
    engine.run_execute(run.pk)

    output = publish_output(run)
    assert [d["agent"] for d in output["delivered"]] == [f.pk for f in followers[:2]]
    assert output["skipped"] == [
        {
            "subscription": output["skipped"][0]["subscription"],
            "agent": followers[2].pk,
            "reason": "fan_out",
        }
    ]
    assert Run.objects.filter(trigger="subscription").count() == 2


def test_deliveries_over_the_hourly_limit_are_skipped(cast, bob):
    owner, tracker, analyst = cast["owner"], cast["tracker"], cast["analyst"]
    subscriptions.subscription_create(
        actor=owner, subscriber=analyst, publisher=tracker, max_per_hour=1
    )
    outputs = []
    for text in ("publish chips: first", "publish chips: second"):
        run = runtime.run_start(actor=member_actor(bob), agent=tracker, text=text)
        engine.run_execute(run.pk)
        outputs.append(publish_output(run))
    assert len(outputs[0]["delivered"]) == 1
    assert outputs[1]["delivered"] == [] and outputs[1]["skipped"][0]["reason"] == "rate_limited"
    assert Run.objects.filter(agent=analyst).count() == 1


def test_topics_filter_what_a_subscription_receives(cast, bob):
    owner, tracker, analyst = cast["owner"], cast["tracker"], cast["analyst"]
    subscriptions.subscription_create(
        actor=owner, subscriber=analyst, publisher=tracker, topics=["Chips"]
    )
    for text in ("publish weather: rain", "publish chips: shortage"):
        engine.run_execute(runtime.run_start(actor=member_actor(bob), agent=tracker, text=text).pk)
    (delivered,) = Run.objects.filter(agent=analyst)
    assert delivered.input["publication"]["topic"] == "chips"


def test_a_replayed_publish_step_delivers_once(cast, bob):
    owner, tracker, analyst = cast["owner"], cast["tracker"], cast["analyst"]
    subscriptions.subscription_create(actor=owner, subscriber=analyst, publisher=tracker)
    run = runtime.run_start(actor=member_actor(bob), agent=tracker, text="publish chips: news")
    with (
        crashpoints.crash_after("tool_call", "notify_subscribers"),
        pytest.raises(crashpoints.SimulatedCrash),
    ):
        engine.run_execute(run.pk)
    assert Run.objects.filter(trigger="subscription").count() == 1  # delivered before the crash

    assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    assert Run.objects.filter(trigger="subscription").count() == 1
    assert AuditEvent.objects.filter(action="agent.subscription.deliver").count() == 1
    output = publish_output(run)
    assert output["replayed"] is True and len(output["delivered"]) == 1


def test_following_a_colleagues_agent_waits_for_their_consent(cast, bob):
    tracker, analyst, dave, erin = cast["tracker"], cast["analyst"], cast["dave"], cast["erin"]
    bob_actor, dave_actor = member_actor(bob), member_actor(dave)
    # Bob's own agent follows Dave's analyst: pending until Dave agrees.
    subscription = subscriptions.subscription_create(
        actor=bob_actor, subscriber=tracker, publisher=analyst
    )
    assert subscription.status == AgentSubscription.Status.PENDING
    run = runtime.run_start(actor=dave_actor, agent=analyst, text="publish market: quiet week")
    engine.run_execute(run.pk)
    assert publish_output(run)["delivered"] == []
    assert not Run.objects.filter(agent=tracker).exists()

    with pytest.raises(NotPermitted):
        subscriptions.subscription_approve(actor=bob_actor, subscription=subscription)
    with pytest.raises(NotPermitted):  # Bob cannot make Dave's agent follow anything
        subscriptions.subscription_create(actor=bob_actor, subscriber=analyst, publisher=cast["pm"])
    with pytest.raises(NotPermitted):  # Erin is no party to it
        subscriptions.subscription_pause(actor=member_actor(erin), subscription=subscription)

    subscription = subscriptions.subscription_approve(actor=dave_actor, subscription=subscription)
    assert subscription.status == AgentSubscription.Status.ACTIVE
    assert subscription.approved_by_id == dave.pk
    run = runtime.run_start(actor=dave_actor, agent=analyst, text="publish market: busy week")
    engine.run_execute(run.pk)
    assert len(publish_output(run)["delivered"]) == 1

    # Dave withdraws: Bob cannot lift Dave's pause.
    subscriptions.subscription_pause(actor=dave_actor, subscription=subscription)
    with pytest.raises(NotPermitted):
        subscriptions.subscription_resume(actor=bob_actor, subscription=subscription)
    run = runtime.run_start(actor=dave_actor, agent=analyst, text="publish market: more news")
    engine.run_execute(run.pk)
    assert publish_output(run)["delivered"] == []
    subscriptions.subscription_delete(actor=bob_actor, subscription=subscription)
    actions = list(
        AuditEvent.objects.filter(action__startswith="agent.subscription.")
        .exclude(action="agent.subscription.deliver")
        .order_by("id")
        .values_list("action", flat=True)
    )
    assert actions == [
        "agent.subscription.create",
        "agent.subscription.approve",
        "agent.subscription.pause",
        "agent.subscription.delete",
    ]


def test_subscription_api_lifecycle_and_consent(cast, client_for, alice, bob):
    tracker, analyst, pm, dave, erin = (
        cast["tracker"],
        cast["analyst"],
        cast["pm"],
        cast["dave"],
        cast["erin"],
    )
    url = "/api/v1/agent-subscriptions/"
    admin = client_for(alice)
    created = admin.post(url, {"subscriber": pm.pk, "publisher": analyst.pk, "topics": ["Market"]})
    assert created.status_code == 201, created.content
    assert created.json()["status"] == "active" and created.json()["topics"] == ["market"]
    detail = f"{url}{created.json()['id']}/"
    assert admin.post(f"{detail}pause/").json()["status"] == "paused"
    assert admin.post(f"{detail}resume/").json()["status"] == "active"

    bobs = client_for(bob)
    asked = bobs.post(url, {"subscriber": tracker.pk, "publisher": analyst.pk})
    assert asked.status_code == 201 and asked.json()["status"] == "pending"
    pending = f"{url}{asked.json()['id']}/"
    assert bobs.post(f"{pending}approve/").status_code == 403
    refused = bobs.post(url, {"subscriber": analyst.pk, "publisher": tracker.pk})
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "permission_denied"
    assert client_for(dave).post(f"{pending}approve/").json()["status"] == "active"
    assert client_for(dave).post(f"{pending}approve/").status_code == 409
    again = bobs.post(url, {"subscriber": tracker.pk, "publisher": analyst.pk})
    assert again.status_code == 409 and again.json()["error"]["code"] == "already_subscribed"
    itself = admin.post(url, {"subscriber": pm.pk, "publisher": pm.pk})
    assert itself.status_code == 400 and itself.json()["error"]["code"] == "self_subscription"

    # Bob sees only subscriptions on his agents' side; Erin's agent is in the first one only.
    assert [row["id"] for row in bobs.get(url).json()["results"]] == [asked.json()["id"]]
    erins = client_for(erin)
    assert erins.get(pending).status_code == 404
    assert erins.delete(pending).status_code == 404
    assert admin.delete(detail).status_code == 204
    assert not AgentSubscription.objects.filter(pk=created.json()["id"]).exists()


def test_outsiders_neither_see_nor_wire_another_organizations_agents(cast, client_for, charlie):
    subscription = subscriptions.subscription_create(
        actor=cast["owner"], subscriber=cast["analyst"], publisher=cast["tracker"]
    )
    outsider = client_for(charlie)
    url = "/api/v1/agent-subscriptions/"
    assert outsider.get(f"{url}{subscription.pk}/").status_code == 404
    assert outsider.post(f"{url}{subscription.pk}/pause/").status_code == 404
    assert outsider.get(url).json()["results"] == []
    response = outsider.post(
        url, {"subscriber": cast["analyst"].pk, "publisher": cast["tracker"].pk}
    )
    assert response.status_code == 400
    assert set(response.json()["error"]["details"]) == {"subscriber", "publisher"}
