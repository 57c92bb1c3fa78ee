"""The runtime and memory together: a turn's requirements are written as the agent's memory
(with provenance), the next turn's context retrieves them, and the model call's ContextRecord
names the memory that was sent."""

from __future__ import annotations

import pytest

from cadre.agents import services
from cadre.agents.models import Run
from cadre.agents.runtime import engine
from cadre.agents.runtime import services as runtime
from cadre.agents.runtime.after import run_after_hooks
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


def test_a_stated_requirement_becomes_agent_memory_and_feeds_the_next_turn(remembering_agent, bob):
    first = runtime.run_start(
        actor=member_actor(bob),
        agent=remembering_agent,
        text="From now on, always send the weekly report to Li Wei in English.",
    )
    assert engine.run_execute(first.pk) == Run.Status.COMPLETED
    assert "process_memory:memory_write" in run_after_hooks(first.pk)

    memory = Memory.objects.get(scope_key=remembering_agent.memory_scope_key)
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
