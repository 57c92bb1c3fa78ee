# ruff: noqa: F811 - the fixtures imported from tests.agents.conftest are parameters here
"""Derived memories belong to the person whose words they are and stay out of the way: what a
run records (experience, tool trajectories) from a colleague's request to someone else's agent
is the colleague's to see and delete, never filed as the agent owner's own; a statement and a
derived record never merge, update or supersede each other; ordinary retrieval (the memory
gate's search, the REST search, the agent's retrieval and memory_search tool) leaves derived
records out unless the caller, or the template, asks for them by kind."""

from __future__ import annotations

import pytest

from cadre.agents import services as agent_services
from cadre.agents.models import Run, Step
from cadre.agents.runtime.lifecycle import execution as engine
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.agents.runtime.lifecycle.after import run_after_hooks
from cadre.agents.runtime.records.grants import agent_actor, grants_for_version
from cadre.errors import InvalidInput
from cadre.memory import selectors, services
from cadre.memory.models import Memory, MemoryTask, MemoryVersion
from cadre.tenancy.actors import member_actor
from tests.agents.conftest import (  # noqa: F401 - fixtures
    OFFLINE_TOOLS,
    bob_agent,
    deployment,
    owner,
    publish,
    published,
    sales,
    template,
)
from tests.memory.conftest import actor

pytestmark = pytest.mark.django_db

DERIVED = ("experience", "tool_trajectory")


def drain(limit: int = 20) -> None:
    """Execute queued runs until none is left, then their after-run hooks (the workers)."""
    for _ in range(limit):
        run = Run.objects.filter(status=Run.Status.QUEUED).order_by("id").first()
        if run is None:
            break
        engine.run_execute(run.pk)
    else:
        raise AssertionError("runs keep coming")
    for run_id in Run.objects.filter(status=Run.Status.COMPLETED).values_list("pk", flat=True):
        run_after_hooks(run_id)


@pytest.fixture
def dave_agent(make_member, sales, deployment, owner):
    """Dave: an employee (no memory.personal) whose agent a colleague's agent asks."""
    dave = make_member(display_name="Dave", email="dave@acme.test")
    dave.positions.add(sales)
    agent_services.deployment_sync(actor=owner, deployment=deployment)
    return deployment.agents.get(member=dave)


def ask(bob, bob_agent, agent, text: str) -> Run:
    """Bob asks his own agent to ask `agent`; returns the delegated (child) run, finished."""
    parent = runtime.run_start(
        actor=member_actor(bob), agent=bob_agent, text=f"ask agent {agent.pk}: {text}"
    )
    engine.run_execute(parent.pk)
    drain()
    child = Run.objects.get(parent=parent)
    assert child.status == Run.Status.COMPLETED and child.input["text"] == text
    return child


def recorded(run: Run, kind: str) -> Memory:
    return Memory.objects.get(kind=kind, source_ref__run_id=str(run.pk))


# --- whose they are -------------------------------------------------------------------------


def test_what_a_colleagues_request_recorded_is_the_colleagues(
    bob, bob_agent, dave_agent, client_for
):
    dave = dave_agent.member
    child = ask(bob, bob_agent, dave_agent, "Remind me to call Northwind about the renewal")
    assert child.agent_id == dave_agent.pk and child.member_id == dave.pk
    experience = recorded(child, "experience")
    trajectory = recorded(child, "tool_trajectory")
    for memory in (experience, trajectory):
        # Bob's words, recorded in Dave's agent's scope: about Bob, not Dave.
        assert memory.scope_key == dave_agent.memory_scope_key
        assert memory.subject_id == bob.pk
    assert "Northwind" in experience.content
    # Bob's own turn with his own agent (the delegating one) is about him as before.
    assert recorded(child.parent, "experience").subject_id == bob.pk
    assert recorded(child.parent, "experience").scope_key == bob_agent.memory_scope_key

    # Bob finds both in his memory list and may delete them (the memory gate, the REST API).
    api = client_for(bob)
    listed = api.get("/api/v1/memories/", {"kind": list(DERIVED)}).json()["results"]
    assert {row["id"] for row in listed} >= {experience.pk, trajectory.pk}
    assert all(row["subject"] == bob.pk for row in listed if row["id"] == experience.pk)
    assert selectors.can_modify(actor(bob), experience)
    assert api.delete(f"/api/v1/memories/{experience.pk}/").status_code == 200
    assert api.delete(f"/api/v1/memories/{trajectory.pk}/").status_code == 200
    statuses = set(
        Memory.objects.filter(pk__in=[experience.pk, trajectory.pk]).values_list(
            "status", flat=True
        )
    )
    assert statuses == {Memory.Status.DELETED}

    # Dave's own memory holds none of Bob's words: nothing about him, nothing personal.
    assert not Memory.objects.filter(subject=dave, source_ref__run_id=str(child.pk)).exists()
    assert not Memory.objects.filter(scope_key=f"user:{dave.pk}").exists()


def test_a_colleagues_statement_through_a_delegation_is_not_the_owners_personal_memory(
    bob, bob_agent, dave_agent
):
    dave = dave_agent.member
    child = ask(
        bob, bob_agent, dave_agent, "From now on, always write my weekly reports in bullet points"
    )
    written = list(Memory.objects.filter(source_ref__run_id=child.pk))
    assert written, "the statement was extracted from the delegated request"
    for memory in written:
        assert memory.scope_key == dave_agent.memory_scope_key  # not user:<dave>
        assert memory.subject_id == bob.pk
    assert not Memory.objects.filter(scope_key=f"user:{dave.pk}").exists()
    assert selectors.memory_queryset(actor(bob)).filter(pk=written[0].pk).exists()


# --- never merged with a statement ----------------------------------------------------------


def add(member, content, **fields):
    fields.setdefault("scope", "user")
    fields.setdefault("source_kind", "user_statement")
    return services.memory_add(actor=actor(member), content=content, **fields)


def test_a_statement_never_merges_into_a_derived_record_with_the_same_words(bob):
    derived = add(bob, "Weekly reports use bullet points", kind="experience", source_kind="system")
    statement = add(bob, "Weekly reports use bullet points.", kind="preference")
    assert statement.pk != derived.pk and statement.dedup_decision == "stored"
    assert statement.kind == "preference" and statement.status == Memory.Status.ACTIVE
    # …nor the reverse: a run's record of the same words is a record of its own.
    again = add(bob, "weekly reports use bullet points", kind="tool_trajectory")
    assert again.pk not in (derived.pk, statement.pk)
    derived.refresh_from_db()
    assert derived.version == 1 and len(derived.provenance) == 1


def test_near_dedup_never_pairs_a_statement_with_a_derived_record(bob, run_async):
    with run_async():
        derived = add(
            bob,
            "Task: weekly report for the Northwind account in bullet points",
            kind="experience",
            source_kind="system",
        )
    with run_async():
        statement = add(
            bob, "The weekly report for the Northwind account uses bullet points", kind="fact"
        )
    result = MemoryTask.objects.get(memory=statement, kind="dedup").result
    assert result["decision"] == "new", result
    assert derived.pk not in [candidate["id"] for candidate in result["candidates"]]
    for memory in (derived, statement):
        memory.refresh_from_db()
        assert memory.status == Memory.Status.ACTIVE and memory.superseded_by_id is None
    assert not MemoryVersion.objects.filter(change="merge").exists()


def test_a_statement_and_a_derived_record_never_supersede_each_other(bob):
    derived = add(bob, "Task: send the quote. Outcome: success.", kind="experience")
    statement = add(bob, "Quotes go out on Fridays", kind="requirement")
    for old, new in ((derived, statement), (statement, derived)):
        with pytest.raises(InvalidInput) as refused:
            services.memory_supersede(
                actor=actor(bob),
                old=old,
                new=new,
                change=MemoryVersion.Change.CORRECTION,
                reason="test",
                audit_reason="test",
            )
        assert refused.value.code == "derived_memory"
    statuses = Memory.objects.filter(pk__in=[derived.pk, statement.pk]).values_list(
        "status", flat=True
    )
    assert set(statuses) == {Memory.Status.ACTIVE}


# --- out of ordinary retrieval --------------------------------------------------------------


@pytest.fixture
def northwind(bob, bob_agent):
    """In Bob's agent's scope: a statement, an experience and a tool trajectory, all about the
    Northwind renewal."""
    agent = agent_actor(bob_agent)
    statement = services.memory_add(
        actor=agent,
        scope="agent",
        kind="fact",
        content="The Northwind renewal is due in March",
        source_kind="user_statement",
    )
    experience = services.experience_record(
        actor=agent,
        task="Remind me to call Northwind about the renewal",
        steps=["Use task_create: title=call Northwind about the renewal"],
        outcome="success",
        run_id="r1",
    )
    trajectory = services.tool_trajectory_record(
        actor=agent,
        tool="task_create",
        parameters={"title": "call Northwind about the renewal"},
        result={"task": 1},
        run_id="r1",
        step_id="1",
    )
    return {"statement": statement, "experience": experience, "trajectory": trajectory}


def test_search_leaves_derived_records_out_unless_asked_by_kind(bob, northwind, client_for):
    statement = northwind["statement"]
    derived = {northwind["experience"].pk, northwind["trajectory"].pk}
    found = selectors.memory_search(actor=actor(bob), query="Northwind renewal", force=True)
    assert [hit.memory.pk for hit in found.hits] == [statement.pk]
    asked = selectors.memory_search(
        actor=actor(bob), query="Northwind renewal", kinds=list(DERIVED), force=True
    )
    assert {hit.memory.pk for hit in asked.hits} == derived

    api = client_for(bob)
    plain = api.post("/api/v1/memories/search/", {"query": "Northwind renewal"}, format="json")
    assert [hit["memory"]["id"] for hit in plain.json()["hits"]] == [statement.pk]
    opted = api.post(
        "/api/v1/memories/search/",
        {"query": "Northwind renewal", "kinds": ["fact", *DERIVED]},
        format="json",
    )
    assert {hit["memory"]["id"] for hit in opted.json()["hits"]} == {statement.pk, *derived}


def tool_hits(run: Run) -> set[int]:
    step = run.steps.get(kind=Step.Kind.TOOL_CALL, name="memory_search")
    return {hit["id"] for hit in step.output["memories"]}


def test_the_agents_memory_search_finds_derived_records_only_where_the_template_asks(
    bob, bob_agent, northwind, owner, sales
):
    run = runtime.run_start(
        actor=member_actor(bob), agent=bob_agent, text="search memory for Northwind renewal"
    )
    engine.run_execute(run.pk)
    assert tool_hits(run) == {northwind["statement"].pk}

    # A template that asks for its runs' experience by kind (memory_policy.retrieve_kinds).
    research = agent_services.template_create(
        actor=owner,
        name="Research assistant",
        code="research-assistant",
        agent_md="# Persona\nYou research.",
        tool_permissions=OFFLINE_TOOLS,
        model_settings={"provider": "offline", "model": "offline-1"},
        memory_policy={
            "read_scopes": ["agent", "user"],
            "write_scopes": ["agent"],
            "retrieve_kinds": ["fact", "preference", "requirement", "experience"],
        },
        hooks={"assemble_context": [{"name": "memory_retrieval", "enabled": False}]},
    )
    version = publish(owner, research.versions.get())
    assert grants_for_version(version)["retrieve_kinds"][-1] == "experience"
    deployment = agent_services.deployment_create(
        actor=owner, name="Research", template=research, positions=[sales]
    )
    researcher = deployment.agents.get(member=bob)
    services.experience_record(
        actor=agent_actor(researcher),
        task="Look up the Northwind renewal terms",
        steps=["Use memory_search: query=Northwind renewal"],
        outcome="success",
        run_id="r2",
    )
    services.tool_trajectory_record(
        actor=agent_actor(researcher),
        tool="memory_search",
        parameters={"query": "Northwind renewal"},
        result={"memories": []},
        run_id="r2",
        step_id="1",
    )
    asked = runtime.run_start(
        actor=member_actor(bob), agent=researcher, text="search memory for Northwind renewal"
    )
    engine.run_execute(asked.pk)
    hits = tool_hits(asked)
    experience = Memory.objects.get(kind="experience", scope_key=researcher.memory_scope_key)
    assert experience.pk in hits
    # The kinds it names, no others: its trajectories stay out.
    assert not Memory.objects.filter(pk__in=hits, kind="tool_trajectory").exists()
    assert Memory.objects.filter(
        kind="tool_trajectory", scope_key=researcher.memory_scope_key
    ).exists()


def test_a_template_names_only_memory_kinds_to_retrieve(owner):
    with pytest.raises(InvalidInput) as refused:
        agent_services.template_create(
            actor=owner,
            name="Odd",
            code="odd",
            agent_md="# Persona",
            memory_policy={"retrieve_kinds": ["experience", "gossip"]},
        )
    assert "retrieve_kinds" in refused.value.message
