"""What a person says in a turn is remembered as they said it, once, and only when it states
something: "remember …" holding masked values (a phone, a colleague's name) is still the
person's statement in their own scope; a question is never stored and never supersedes a
statement; a statement the memory tool wrote is not written again by the after-run hook."""

from __future__ import annotations

import pytest

from cadre.agents import services
from cadre.agents.models import Run
from cadre.agents.runtime.lifecycle import execution as engine
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.agents.runtime.lifecycle.after import run_after_hooks
from cadre.memory.models import Memory, MemoryVersion
from cadre.tenancy.actors import member_actor
from tests.agents.conftest import publish

pytestmark = pytest.mark.django_db


def _agent(owner, bob, *, code, memory_hook=True):
    """An offline agent with the memory tool, the after-run extraction (unless switched off)
    and the dedup funnel; retrieval off (it embeds with the local model: slow)."""
    hooks = {"assemble_context": [{"name": "memory_retrieval", "enabled": False}]}
    if not memory_hook:
        hooks["process_memory"] = [{"name": "memory_write", "enabled": False}]
    template = services.template_create(
        actor=owner,
        name=f"Statements {code}",
        code=code,
        agent_md="# Persona\nYou help {{member.display_name}}.",
        model_settings={"provider": "offline", "model": "offline-1"},
        tool_permissions={"memory_write": {"risk": "low", "confirmation": "never"}},
        memory_policy={"read_scopes": ["agent", "user"], "write_scopes": ["agent"]},
        hooks=hooks,
    )
    publish(owner, template.versions.get())
    return services.deployment_create(
        actor=owner, name=code, template=template, members=[bob]
    ).agents.get()


def _say(bob, agent, text, session=None) -> Run:
    run = runtime.run_start(actor=member_actor(bob), agent=agent, text=text, session=session)
    assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    run_after_hooks(run.pk)
    run.refresh_from_db()
    return run


# --- 1. like with like: masked values in a statement ---------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Remember my phone is 138 0013 8000", "138 0013 8000"),
        ("Remember that my manager is Alice", "Alice"),
    ],
)
def test_a_statement_holding_masked_values_is_the_persons_own(owner, bob, text, expected):
    agent = _agent(owner, bob, code="masked-statement", memory_hook=False)
    run = _say(bob, agent, text)
    assert run.input["model_text"] != run.input["text"], "the model side must be masked"

    memory = Memory.objects.get(content__contains=expected)
    assert memory.source_kind == "user_statement"
    assert memory.scope_key == f"user:{bob.pk}"
    assert memory.subject_id == bob.pk
    assert not Memory.objects.filter(scope_key=agent.memory_scope_key, kind="fact").exists()


# --- 2. questions are not statements ----------------------------------------------------------


@pytest.mark.parametrize(
    "statement, question",
    [
        ("记住：我喜欢用中文的要点形式写周报", "我喜欢什么格式的周报？"),
        ("Remember that I prefer bullet points for weekly reports", "Which format do I prefer?"),
    ],
)
def test_a_question_is_never_stored_and_never_supersedes_the_statement(
    owner, bob, statement, question
):
    agent = _agent(owner, bob, code="questions")
    first = _say(bob, agent, statement)
    stated = Memory.objects.get(
        scope_key=f"user:{bob.pk}", kind__in=["fact", "preference", "requirement"]
    )

    _say(bob, agent, question, session=first.session)

    stated.refresh_from_db()
    assert stated.status == Memory.Status.ACTIVE and stated.superseded_by_id is None
    assert list(
        Memory.objects.filter(kind__in=["fact", "preference", "requirement"]).values_list(
            "content", flat=True
        )
    ) == [stated.content]
    assert not MemoryVersion.objects.filter(memory=stated).exclude(change="addition").exists()


# --- 3. stored once ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Remember that I prefer bullet points for weekly reports", "bullet points"),
        ("Remember my phone is 138 0013 8000", "138 0013 8000"),
    ],
)
def test_a_remembered_fact_is_written_once(owner, bob, text, expected):
    agent = _agent(owner, bob, code="written-once")
    run = _say(bob, agent, text)

    memories = list(
        Memory.objects.filter(content__contains=expected).exclude(
            kind__in=["experience", "tool_trajectory"]
        )
    )
    assert len(memories) == 1
    memory = memories[0]
    assert memory.source_kind == "user_statement" and memory.scope_key == f"user:{bob.pk}"
    # Written once: no exact-duplicate merge, one provenance entry (the tool call).
    assert len(memory.provenance) == 1
    assert not MemoryVersion.objects.filter(memory=memory, change="merge").exists()
    hook = run.steps.get(idempotency_key__endswith=":after:process_memory:memory_write")
    assert hook.output["written"] == 0


def test_a_chinese_statement_without_the_tool_is_written_once_by_the_hook(owner, bob):
    agent = _agent(owner, bob, code="zh-once")
    _say(bob, agent, "记住：我喜欢用中文的要点形式写周报")
    memory = Memory.objects.get(kind="preference")
    assert memory.content == "我喜欢用中文的要点形式写周报"
    assert memory.source_kind == "user_statement" and len(memory.provenance) == 1


def test_the_memory_tool_refuses_to_store_a_question(owner, bob):
    agent = _agent(owner, bob, code="tool-question")
    run = _say(bob, agent, "Remember what format I like for weekly reports?")
    call = run.steps.get(kind="tool_call", name="memory_write")
    assert call.output["error"] == "not_a_statement"
    assert not Memory.objects.filter(kind__in=["fact", "preference", "requirement"]).exists()
