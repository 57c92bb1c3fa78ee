"""The runtime and memory together: a turn's requirements are written as the employee's own
memory (with provenance), the next turn's context — and their other agents' — retrieves them,
and the model call's ContextRecord names the memory that was sent; "remember that …" through
the memory tool is the employee's statement, not the model's inference."""

from __future__ import annotations

import pytest

from cadre.agents import services
from cadre.agents.models import Run
from cadre.agents.runtime.lifecycle import execution as engine
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.agents.runtime.lifecycle.after import run_after_hooks
from cadre.memory.models import ContextRecordItem, Memory
from cadre.tenancy.actors import member_actor
from tests.agents.conftest import publish

pytestmark = pytest.mark.django_db


@pytest.fixture
def remembering_agent(owner, bob):
    """An agent whose template keeps the default hooks (memory retrieval and writing on)."""
    template = services.template_create(
        actor=owner,
        name="Remembering assistant",
        code="remembering",
        agent_md="# Persona\nYou help {{member.display_name}}.",
        model_settings={"provider": "offline", "model": "offline-1"},
        memory_policy={"read_scopes": ["agent", "user"], "write_scopes": ["agent"]},
    )
    publish(owner, template.versions.get())
    deployment = services.deployment_create(
        actor=owner, name="remembering", template=template, members=[bob]
    )
    return deployment.agents.get()


def test_a_stated_requirement_becomes_the_employees_memory_and_feeds_the_next_turn(
    remembering_agent, bob
):
    first = runtime.run_start(
        actor=member_actor(bob),
        agent=remembering_agent,
        text="From now on, always send the weekly report to Li Wei in English.",
    )
    assert engine.run_execute(first.pk) == Run.Status.COMPLETED
    assert "process_memory:memory_write" in run_after_hooks(first.pk)

    memory = Memory.objects.get(scope_key=f"user:{bob.pk}")
    assert not Memory.objects.filter(scope_key=remembering_agent.memory_scope_key).exists()
    assert memory.subject_id == bob.pk
    assert "weekly report" in memory.content.lower()
    assert memory.kind == "requirement"
    assert memory.source_kind == "user_statement"
    assert memory.source_ref["run_id"] == first.pk
    assert memory.author_type == "agent"

    second = runtime.run_start(
        actor=member_actor(bob), agent=remembering_agent, text="Who gets the weekly report?"
    )
    assert engine.run_execute(second.pk) == Run.Status.COMPLETED
    sent = ContextRecordItem.objects.filter(context__run_id=str(second.pk), memory=memory)
    assert sent.exists(), "the retrieved memory must be recorded as sent to the model call"
    second.refresh_from_db()
    assert "Li Wei" in second.output["text"]


def _second_agent(owner, bob, *, code, read_scopes):
    template = services.template_create(
        actor=owner,
        name=f"Second assistant {code}",
        code=code,
        agent_md="# Persona\nYou help {{member.display_name}}.",
        model_settings={"provider": "offline", "model": "offline-1"},
        memory_policy={"read_scopes": read_scopes, "write_scopes": ["agent"]},
    )
    publish(owner, template.versions.get())
    return services.deployment_create(
        actor=owner, name=code, template=template, members=[bob]
    ).agents.get()


def test_a_preference_follows_the_employee_to_their_other_agents(remembering_agent, owner, bob):
    first = runtime.run_start(
        actor=member_actor(bob),
        agent=remembering_agent,
        text="From now on, always write reports in bullet points, and my manager is Li Wei.",
    )
    assert engine.run_execute(first.pk) == Run.Status.COMPLETED
    run_after_hooks(first.pk)
    memory = Memory.objects.get(scope_key=f"user:{bob.pk}")
    hook_step = first.steps.get(idempotency_key__endswith=":after:process_memory:memory_write")
    assert hook_step.output["written_memories"] == [
        {"id": memory.pk, "scope": f"user:{bob.pk}", "kind": "requirement"}
    ]

    reads_user = _second_agent(owner, bob, code="reads-user", read_scopes=["agent", "user"])
    second = runtime.run_start(
        actor=member_actor(bob), agent=reads_user, text="Who is my manager for the reports?"
    )
    assert engine.run_execute(second.pk) == Run.Status.COMPLETED
    assert ContextRecordItem.objects.filter(context__run_id=str(second.pk), memory=memory).exists()

    # A template that does not read the person's scope keeps its agent to its own memory.
    agent_only = _second_agent(owner, bob, code="agent-only", read_scopes=["agent"])
    third = runtime.run_start(
        actor=member_actor(bob), agent=agent_only, text="Who is my manager for the reports?"
    )
    assert engine.run_execute(third.pk) == Run.Status.COMPLETED
    assert not ContextRecordItem.objects.filter(context__run_id=str(third.pk)).exists()


def test_remember_that_through_the_tool_is_the_employees_statement(owner, bob):
    template = services.template_create(
        actor=owner,
        name="Tool assistant",
        code="tool-assistant",
        agent_md="# Persona\nYou help {{member.display_name}}.",
        model_settings={"provider": "offline", "model": "offline-1"},
        tool_permissions={"memory_write": {"risk": "low", "confirmation": "never"}},
        memory_policy={"read_scopes": ["agent", "user"], "write_scopes": ["agent"]},
        hooks={
            "assemble_context": [{"name": "memory_retrieval", "enabled": False}],
            "process_memory": [{"name": "memory_write", "enabled": False}],
        },
    )
    publish(owner, template.versions.get())
    agent = services.deployment_create(
        actor=owner, name="tools", template=template, members=[bob]
    ).agents.get()
    run = runtime.run_start(
        actor=member_actor(bob), agent=agent, text="Remember that my manager is Li Wei"
    )
    assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    memory = Memory.objects.get(content__icontains="Li Wei")
    assert memory.scope_key == f"user:{bob.pk}"
    assert memory.source_kind == "user_statement"
    assert memory.subject_id == bob.pk and memory.author_type == "agent"
