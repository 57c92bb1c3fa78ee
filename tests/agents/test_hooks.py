"""Hooks: per-template order, enable/disable, async hooks after the run, on_spawn narrowing,
and the built-in memory retrieval feeding the context (with its ContextRecord)."""

from __future__ import annotations

import pytest

from cadre.agents import services
from cadre.agents.hooks.registry import _REGISTRY, hook, hook_names, hooks_for
from cadre.agents.models import Run, Step
from cadre.agents.runtime.lifecycle import execution as engine
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.agents.runtime.lifecycle.after import run_after_hooks
from cadre.agents.runtime.records import crashpoints, grants
from cadre.agents.runtime.steps import delegation
from cadre.tenancy.actors import member_actor
from tests.agents.conftest import publish

pytestmark = pytest.mark.django_db

CALLS: list[str] = []


def _first(ctx, config):
    CALLS.append("first")
    return {"seen": ctx.input_text}


def _second(ctx, config):
    CALLS.append(f"second:{config.get('flag')}")
    return {}


def _section(ctx, config):
    return {"sections": [{"title": "Account notes", "text": "ACME renews in March."}]}


def _after(run, config):
    CALLS.append(f"after:{run.pk}")
    return {"ok": True}


def _greedy(parent_run, requested, config):
    """Asks for everything: the runtime must cut it down to the parent's grants."""
    return {
        "tools": {
            name: {"risk": "low", "confirmation": "never"}
            for name in ("http_request", "im_send", "task_create", "memory_write")
        },
        "read_scopes": ["agent", "user", "position", "department", "organization"],
        "write_scopes": ["agent", "user", "organization"],
        "budget": {"max_steps": 10_000, "max_tokens": 10**9},
    }


# This module's hooks exist only while its tests run: registered at import they would be in every
# test's registry (the template editor lists the registry's hooks, for one).
TEST_HOOKS = (
    ("on_init", "test_first", _first),
    ("on_init", "test_second", _second),
    ("assemble_context", "test_section", _section),
    ("post_process", "test_after", _after),
    ("on_spawn", "test_greedy", _greedy),
)


@pytest.fixture(autouse=True)
def test_hooks_registered():
    for point, name, fn in TEST_HOOKS:
        hook(point, name, default=False)(fn)
    yield
    for point, name, _ in TEST_HOOKS:
        _REGISTRY[point].pop(name, None)


def _agent_with_hooks(owner, bob, hooks, code="hooked", **content):
    template = services.template_create(
        actor=owner, name="Hooked", code=code, hooks=hooks, **content
    )
    publish(owner, template.versions.get())
    return services.deployment_create(
        actor=owner, name=code, template=template, members=[bob]
    ).agents.get()


def test_hooks_run_in_template_order_and_disabled_ones_are_skipped(owner, bob):
    CALLS.clear()
    agent = _agent_with_hooks(
        owner,
        bob,
        {
            "on_init": [
                {"name": "test_second", "config": {"flag": 1}},
                {"name": "test_first"},
            ],
            "assemble_context": [
                {"name": "test_section"},
                {"name": "memory_retrieval", "enabled": False},
            ],
            "post_process": [{"name": "test_after"}],
        },
    )
    run = runtime.run_start(actor=member_actor(bob), agent=agent, text="when does ACME renew?")
    assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    assert CALLS == ["second:1", "first"]
    names = list(run.steps.order_by("index").values_list("name", flat=True))
    assert names == [
        "input_policy",  # the organization's input gate: the runtime's, before any hook
        "on_init:test_second",
        "on_init:test_first",
        "assemble_context:base",
        "assemble_context:test_section",
        "model",
    ]
    assert run.steps.get(name="on_init:test_first").output == {"seen": "when does ACME renew?"}
    run.refresh_from_db()
    assert "ACME renews in March" in run.output["text"]
    # The async hooks (Celery after the run) are steps too, and run once.
    assert run_after_hooks(run.pk) == [
        "process_memory:memory_write",
        "process_memory:experience_record",
        "compact:memory_dedup",
        "compact:session_summary",
        "post_process:test_after",
    ]
    assert run_after_hooks(run.pk) == []
    assert CALLS[-1] == f"after:{run.pk}"
    assert run.steps.get(name="post_process:test_after").status == Step.Status.COMPLETED


def test_unconfigured_points_run_the_default_hooks():
    # The input policy is not a hook: the runtime runs it before on_init (test_input_gate.py).
    assert [h.name for h, _ in hooks_for({}, "on_init")] == []
    assert "input_policy" not in hook_names("on_init")
    # "skills" is the Hub's hook (hub/hooks.py): installed skills into the context.
    assert [h.name for h, _ in hooks_for({}, "assemble_context")] == ["memory_retrieval", "skills"]
    assert [h.name for h, _ in hooks_for({"on_init": []}, "on_init")] == []
    assert [h.name for h, _ in hooks_for({}, "process_memory")] == [
        "memory_write",
        "experience_record",
    ]
    assert [h.name for h, _ in hooks_for({}, "compact")] == ["memory_dedup", "session_summary"]


def _two_hook_agent(owner, bob):
    return _agent_with_hooks(
        owner,
        bob,
        {
            "on_init": [{"name": "test_first"}, {"name": "test_second"}],
            "assemble_context": [{"name": "memory_retrieval", "enabled": False}],
        },
    )


def test_crash_inside_a_hook_runs_the_hooks_before_the_model_again(owner, bob):
    # Hooks are recorded with the model call's start: a crash before it loses them (they only
    # read and decide), and the next attempt runs them again from the start.
    CALLS.clear()
    run = runtime.run_start(actor=member_actor(bob), agent=_two_hook_agent(owner, bob), text="hi")
    with (
        crashpoints.crash_after("hook", "on_init:test_second"),
        pytest.raises(crashpoints.SimulatedCrash),
    ):
        engine.run_execute(run.pk)
    assert not run.steps.exists()
    assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    assert CALLS == ["first", "second:None", "first", "second:None"]
    names = list(run.steps.order_by("id").values_list("name", flat=True))
    assert names[:3] == ["input_policy", "on_init:test_first", "on_init:test_second"]
    assert names.count("on_init:test_first") == 1


def test_crash_after_the_model_call_started_replays_its_hooks(owner, bob):
    CALLS.clear()
    run = runtime.run_start(actor=member_actor(bob), agent=_two_hook_agent(owner, bob), text="hi")
    with crashpoints.crash_after("model_call"), pytest.raises(crashpoints.SimulatedCrash):
        engine.run_execute(run.pk)
    # The hooks were committed with the model call's start, before the crash.
    assert run.steps.filter(kind="hook", status="completed").count() >= 2
    assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    assert CALLS == ["first", "second:None"]  # replayed from their stored outputs
    assert run.steps.get(kind="model_call").attempts == 2


def test_on_spawn_cannot_widen_the_childs_grants(owner, bob, alice, deployment):
    parent_agent = _agent_with_hooks(
        owner,
        bob,
        {
            "on_spawn": [{"name": "test_greedy"}],
            "assemble_context": [{"name": "memory_retrieval", "enabled": False}],
        },
        code="parent",
        tool_permissions={"task_create": {"risk": "low", "confirmation": "never"}, "delegate": {}},
        memory_policy={"read_scopes": ["agent"], "write_scopes": []},
        model_settings={"budget": {"max_steps": 4, "max_tokens": 5000}},
    )
    parent = runtime.run_start(actor=member_actor(bob), agent=parent_agent, text="x")
    target = deployment.agents.get(member=alice)  # im_send, task_create, … agent, user scopes
    grants = delegation.child_grants(parent, target)
    assert set(grants["tools"]) == {"task_create"}  # parent ∩ hook ∩ child's template
    assert grants["read_scopes"] == ["agent"] and grants["write_scopes"] == []
    assert grants["budget"]["max_steps"] <= 4 and grants["budget"]["max_tokens"] <= 5000


def test_narrowing_keeps_the_stricter_rule():
    parent = {
        "tools": {
            "im_send": {"risk": "high", "confirmation": "always"},
            "http_request": {"allowed_hosts": ["a.test"]},
        },
        "read_scopes": ["agent"],
        "write_scopes": [],
        "budget": {"max_steps": 3},
    }
    child = grants.narrow_grants(
        parent,
        {
            "tools": {
                "im_send": {"risk": "low", "confirmation": "never"},
                "http_request": {"allowed_hosts": ["a.test", "b.test"]},
            },
            "read_scopes": ["agent", "organization"],
            "budget": {"max_steps": 50},
        },
    )
    assert child["tools"]["im_send"] == {"risk": "high", "confirmation": "always"}
    assert child["tools"]["http_request"]["allowed_hosts"] == ["a.test"]
    assert child["read_scopes"] == ["agent"] and child["budget"] == {"max_steps": 3}


def test_memory_retrieval_puts_memories_in_context_and_records_them(owner, bob, org_a):
    from cadre.memory.dedup import content_hash
    from cadre.memory.models import ContextRecord, Memory
    from cadre.memory.text import lexical_document

    content = "Bob prefers oolong tea at customer meetings."
    memory = Memory.objects.create(
        organization=org_a,
        scope="user",
        scope_id=bob.pk,
        scope_key=f"user:{bob.pk}",
        content=content,
        search_text=lexical_document(content),
        content_hash=content_hash(content),
    )
    agent = _agent_with_hooks(
        owner, bob, {}, code="mem", memory_policy={"read_scopes": ["agent", "user"]}
    )
    run = runtime.run_start(
        actor=member_actor(bob), agent=agent, text="Which tea does Bob prefer at meetings?"
    )
    assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    retrieval = run.steps.get(name="assemble_context:memory_retrieval").output
    # The memory enters the context through the chain's masking ("Bob" is a member's name).
    assert [m["id"] for m in retrieval["memories"]] == [memory.pk]
    assert retrieval["memories"][0]["content"] == content.replace("Bob", "<MEMBER_1>")
    call = run.steps.get(kind="model_call")
    assert retrieval["memories"][0]["content"] in call.input["messages"][0]["content"]
    # One record for the model call, listing the memory as sent.
    record = ContextRecord.objects.get(run_id=str(run.pk))
    assert (record.kind, record.step_id) == ("model_call", str(call.index))
    assert [(i.memory_id, i.status) for i in record.items.all()] == [(memory.pk, "sent")]


def test_memory_retrieval_with_empty_scopes_still_records_the_context(owner, bob):
    from cadre.memory.models import ContextRecord

    agent = _agent_with_hooks(owner, bob, {}, code="empty-mem")
    run = runtime.run_start(actor=member_actor(bob), agent=agent, text="anything about ACME?")
    assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    retrieval = run.steps.get(name="assemble_context:memory_retrieval").output
    assert retrieval["memories"] == []
    record = ContextRecord.objects.get(run_id=str(run.pk))
    assert record.kind == "model_call" and record.items.count() == 0
