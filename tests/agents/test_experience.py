"""Experience from real runs: each tool call becomes a tool trajectory and each finished task an
experience (steps, outcome, provenance) in the after-run hooks, once however often they run;
the employee's correction becomes the experience's feedback; and memory-to-skill distills a
candidate from runs of the offline provider calling tools."""

from __future__ import annotations

import pytest

from cadre.agents.models import Run, Step
from cadre.agents.runtime.lifecycle import execution as engine
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.agents.runtime.lifecycle.after import run_after_hooks
from cadre.governance.masking.policy import PLACEHOLDER
from cadre.memory.models import Memory, MemoryVersion
from cadre.skills.models import DistillationRecord, SkillCandidate
from cadre.skills.selectors import decode_files
from cadre.skills.tasks import memory_distill
from cadre.tenancy.actors import member_actor

pytestmark = pytest.mark.django_db

PEOPLE = ["Alice Chen", "Bruno Diaz", "Carla Evans", "Dmitri Fox"]


def turn(bob, agent, text, session=None):
    run = runtime.run_start(actor=member_actor(bob), agent=agent, text=text, session=session)
    assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    run_after_hooks(run.pk)
    run.refresh_from_db()
    return run


def test_a_tool_call_is_recorded_as_trajectory_and_experience_with_provenance(bob, bob_agent):
    run = turn(bob, bob_agent, "Remind me to call Alice Chen about the renewal")
    tool_step = run.steps.get(kind=Step.Kind.TOOL_CALL)
    assert tool_step.name == "task_create"

    trajectory = Memory.objects.get(kind="tool_trajectory")
    assert trajectory.scope_key == bob_agent.memory_scope_key
    assert trajectory.source_kind == "tool_result"
    assert trajectory.attributes["parameters"] == {"title": "call Alice Chen about the renewal"}
    assert trajectory.attributes["ok"] is True and trajectory.attributes["tool"] == "task_create"
    assert trajectory.source_ref["run_id"] == str(run.pk)
    assert trajectory.source_ref["step_id"] == str(tool_step.index)
    assert trajectory.source_ref["tool_call_id"].startswith("call_")
    assert trajectory.conversation_id == str(run.session_id)

    experience = Memory.objects.get(kind="experience")
    assert experience.scope_key == bob_agent.memory_scope_key
    assert experience.attributes["task"] == "Remind me to call Alice Chen about the renewal"
    assert experience.attributes["steps"] == [
        "Use task_create: title=call Alice Chen about the renewal"
    ]
    assert experience.attributes["outcome"] == "success"
    assert experience.attributes["tool_steps"] == [tool_step.index]
    assert experience.source_ref == {
        "run_id": str(run.pk),
        "trace_id": run.trace_id,
        "session_id": str(run.session_id),
    }
    assert experience.author_type == "agent"
    # The model saw "<MEMBER_1> Chen" (the directory masks members); memory keeps what was
    # said, never a session's placeholder.
    assert "<MEMBER_1>" in str(tool_step.input["arguments"])
    for memory in Memory.objects.all():
        assert not PLACEHOLDER.search(memory.content + str(memory.attributes)), memory.content
    hook = run.steps.get(name="process_memory:experience_record")
    assert hook.output["trajectories"] == [trajectory.pk]
    assert hook.output["experience"] == experience.pk


def test_rerunning_the_after_run_hooks_writes_nothing_twice(bob, bob_agent):
    run = turn(bob, bob_agent, "Remind me to send the quote to Bruno Diaz")
    memories = list(Memory.objects.order_by("pk").values_list("pk", "version"))
    versions = MemoryVersion.objects.count()
    assert {kind for kind in Memory.objects.values_list("kind", flat=True)} >= {
        "tool_trajectory",
        "experience",
    }
    assert run_after_hooks(run.pk) == []  # every hook completed: skipped
    # A worker that died after the hooks' memory writes committed but before their steps did:
    # the redelivered task runs the hooks again, and they find what they wrote.
    Step.objects.filter(run=run, name__startswith="process_memory:").delete()
    assert "process_memory:experience_record" in run_after_hooks(run.pk)
    assert list(Memory.objects.order_by("pk").values_list("pk", "version")) == memories
    assert MemoryVersion.objects.count() == versions


def test_a_failed_tool_call_is_a_failed_experience(bob, bob_agent, deployment):
    # The template allows im_send only with confirmation for high risk; a message to nobody
    # the directory knows fails in the tool, and the run still answers.
    run = turn(bob, bob_agent, "Send hello to Nobody Known")
    (call,) = run.steps.filter(kind=Step.Kind.TOOL_CALL)
    assert call.output.get("error"), call.output
    experience = Memory.objects.get(kind="experience")
    assert experience.attributes["outcome"] == "failure"
    assert experience.attributes["failed_steps"] == [call.index]
    assert "(failed: " in experience.attributes["steps"][0]
    assert Memory.objects.get(kind="tool_trajectory").attributes["ok"] is False


def test_the_employees_correction_is_the_experiences_feedback(bob, bob_agent):
    first = turn(bob, bob_agent, "Remind me to call Carla Evans about the contract")
    experience = Memory.objects.get(kind="experience")
    assert experience.attributes["outcome"] == "success"
    second = turn(
        bob,
        bob_agent,
        "You forgot the deadline; next time also include the due date",
        session=first.session,
    )
    experience.refresh_from_db()
    assert experience.attributes["outcome"] == "failure"
    assert experience.attributes["outcome_recorded"] == "success"
    assert experience.attributes["feedback"] == {
        "text": "You forgot the deadline; next time also include the due date",
        "verdict": "correction",
        "run_id": str(second.pk),
    }
    version = experience.versions.latest("version")
    assert version.change == MemoryVersion.Change.CORRECTION
    hook = second.steps.get(name="process_memory:experience_record")
    assert hook.output["feedback"]["attached"] is True
    Step.objects.filter(run=second, name__startswith="process_memory:").delete()
    run_after_hooks(second.pk)  # again: the feedback is attached once
    assert experience.versions.count() == version.version


def test_distillation_turns_real_runs_into_a_skill_candidate(bob, bob_agent):
    for person in PEOPLE:
        turn(bob, bob_agent, f"Remind me to call {person} about the renewal")
    assert Memory.objects.filter(kind="experience").count() == len(PEOPLE)

    result = memory_distill(bob.organization_id)
    assert result[bob.organization.slug]["kept"] == 1, list(
        DistillationRecord.objects.values("reason", "figures")
    )
    record = DistillationRecord.objects.get(kept=True)
    assert record.successes == len(PEOPLE)
    assert any("task_create" in step["text"] for step in record.steps)
    candidate = record.candidate
    assert candidate.source == SkillCandidate.Source.MEMORY
    skill = decode_files(candidate.files)["SKILL.md"].decode()
    assert "task_create" in skill
    evidence = candidate.evidence.get(kind="trajectories")
    experience_ids = set(Memory.objects.filter(kind="experience").values_list("pk", flat=True))
    assert set(evidence.data["successes"]) <= experience_ids
