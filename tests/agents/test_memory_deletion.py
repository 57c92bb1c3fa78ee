"""Verifiable deletion: a memory a real run (offline provider) was given is deleted or purged
through the public API; it is gone from both search indexes, its text is redacted from the
run's steps, events and later turns (a marker stays), and the report lists what was redacted
and which copies follow their own retention. Second deletes and outsiders change nothing."""

from __future__ import annotations

import json

import pytest
from django.utils import timezone

from cadre.agents import redaction
from cadre.agents.models import Run, RunEvent, Step
from cadre.agents.runtime.lifecycle import execution as engine
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.celery import app as celery_app
from cadre.governance.models import AuditEvent
from cadre.memory import selectors
from cadre.memory import services as memory_services
from cadre.memory.models import ContextRecordItem, Memory, MemoryEmbedding, MemoryTask
from cadre.memory.services import deletion
from cadre.tenancy.actors import member_actor
from tests.agents.test_memory_integration import remembering_agent  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db

TEXT = "Always send the weekly report to Li Wei in English"


@pytest.fixture(autouse=True)
def eager_celery():
    saved = (celery_app.conf.task_always_eager, celery_app.conf.task_eager_propagates)
    celery_app.conf.task_always_eager = celery_app.conf.task_eager_propagates = True
    yield
    celery_app.conf.task_always_eager, celery_app.conf.task_eager_propagates = saved


@pytest.fixture
def agent(remembering_agent):  # noqa: F811 (the imported fixture, by name)
    """Bob's agent with the default hooks: memory retrieval on, reading his personal memory."""
    return remembering_agent


@pytest.fixture
def memory(bob, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):  # embedded by its enrich task
        memory = memory_services.memory_add(
            actor=member_actor(bob),
            content=TEXT,
            scope="user",
            kind="requirement",
            source_kind="user_statement",
        )
    assert MemoryEmbedding.objects.filter(memory=memory).exists()
    return memory


def _turn(bob, agent, text, session=None) -> Run:
    run = runtime.run_start(actor=member_actor(bob), agent=agent, text=text, session=session)
    assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    run.refresh_from_db()
    return run


def _session_text(session_id: int) -> str:
    """Everything the session's runs stored, as one string."""
    runs = Run.objects.filter(session_id=session_id)
    parts = [json.dumps([run.input, run.output], ensure_ascii=False) for run in runs]
    for step in Step.objects.filter(run__session_id=session_id):
        parts.append(json.dumps([step.input, step.output, step.error], ensure_ascii=False))
    for event in RunEvent.objects.filter(run__session_id=session_id):
        parts.append(json.dumps(event.data, ensure_ascii=False))
    return "\n".join(parts)


def _model_step(run: Run) -> Step:
    return run.steps.get(kind=Step.Kind.MODEL_CALL)


def _hook_step(run: Run) -> Step:
    return run.steps.get(name="assemble_context:memory_retrieval")


def _found(bob, query="weekly report Li Wei") -> list[int]:
    result = selectors.memory_search(actor=member_actor(bob), query=query, force=True)
    return [hit.memory.pk for hit in result.hits]


@pytest.fixture
def carried(bob, agent, memory):
    """A run that was given the memory in its model call, and a later turn of its session."""
    first = _turn(bob, agent, "Who gets the weekly report?")
    assert ContextRecordItem.objects.filter(context__run_id=str(first.pk), memory=memory).exists()
    assert TEXT in json.dumps(_model_step(first).input["messages"], ensure_ascii=False)
    assert _hook_step(first).output["memories"][0]["content"] == TEXT
    later = _turn(bob, agent, "Thanks, and what language?", session=first.session)
    assert TEXT in _session_text(first.session_id)
    return first, later


def test_delete_removes_the_memory_everywhere_and_redacts_the_run_that_carried_it(
    bob, client_for, memory, carried, django_capture_on_commit_callbacks
):
    first, later = carried
    assert memory.pk in _found(bob)
    steps_before = {step.pk for step in Step.objects.filter(run__session_id=first.session_id)}

    with django_capture_on_commit_callbacks(execute=True):  # the purge task runs on commit
        response = client_for(bob).delete(f"/api/v1/memories/{memory.pk}/")
    assert response.status_code == 200, response.content
    report = response.json()

    marker = report["marker"]
    assert marker.startswith(f"[memory {memory.pk} deleted on ")
    # Gone from search: the vector index (no embedding) and the lexical one (no document).
    assert memory.pk not in _found(bob)
    assert memory.pk not in _found(bob, query=TEXT)
    assert not MemoryEmbedding.objects.filter(memory=memory).exists()
    memory.refresh_from_db()
    assert memory.search_text == "" and memory.status == "deleted"
    assert client_for(bob).get(f"/api/v1/memories/{memory.pk}/").status_code == 404
    # The model call's messages and the hook's output show the marker, not the text.
    model_step, hook_step = _model_step(first), _hook_step(first)
    messages = json.dumps(model_step.input["messages"], ensure_ascii=False)
    assert TEXT not in messages and marker in messages
    assert hook_step.output["memories"][0] == {**hook_step.output["memories"][0], "content": marker}
    # Nothing the session stored holds the text any more: steps, events, replies, later turns.
    stored = _session_text(first.session_id)
    assert TEXT not in stored
    assert marker in json.dumps(_hook_step(later).output, ensure_ascii=False) or (
        marker in json.dumps(later.steps.get(name="assemble_context:base").output)
    )

    # The report: what was removed, the steps redacted, the copies under their own retention.
    assert report["removed"]["vector_index"]["embeddings_removed"] >= 1
    assert report["removed"]["lexical_index"] is True
    redacted = report["redaction"]
    assert redacted["status"] == "complete"
    assert {model_step.pk, hook_step.pk} <= set(redacted["steps"])
    assert set(redacted["steps"]) <= steps_before
    assert {first.pk, later.pk} <= set(redacted["runs"])
    assert redacted["counts"]["steps"] == len(redacted["steps"])
    copies = {copy["copy"]: copy for copy in report["retained"]}
    assert {"audit_events", "audit_exports", "backups", "delivered_messages"} <= set(copies)
    assert "never its text" in copies["audit_events"]["holds"]
    # The purge task ran: content gone, the report on the row says so.
    memory.refresh_from_db()
    assert memory.content == "" and memory.purged_at is not None
    shown = client_for(bob).get(f"/api/v1/memories/{memory.pk}/deletion/").json()
    assert shown["status"] == "purged" and shown["removed"]["content"] == "purged"
    assert shown["task"]["status"] == "completed"
    assert shown["redaction"]["steps"] == redacted["steps"]
    assert len(shown["retained"][0]["ids"]) == 2  # memory.delete and memory.purge

    # The audit events carry ids only.
    event = AuditEvent.objects.get(action="memory.delete", target_id=str(memory.pk))
    assert set(event.changes["redaction"]["steps"]) == set(redacted["steps"])
    purge = AuditEvent.objects.get(action="memory.purge")
    for audited in (event, purge):
        assert "Li Wei" not in json.dumps(audited.changes) + audited.target_label + audited.reason
    assert sorted(shown["retained"][0]["ids"]) == sorted([event.pk, purge.pk])


def test_a_second_delete_is_a_conflict_and_changes_nothing(
    bob, client_for, memory, carried, django_capture_on_commit_callbacks
):
    client = client_for(bob)
    with django_capture_on_commit_callbacks(execute=True):
        assert client.delete(f"/api/v1/memories/{memory.pk}/").status_code == 200
    memory.refresh_from_db()
    before = (memory.version, memory.deletion, AuditEvent.objects.count())
    steps = list(Step.objects.order_by("pk").values_list("pk", "input", "output"))

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        again = client.delete(f"/api/v1/memories/{memory.pk}/")
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "already_deleted"
    assert f"/api/v1/memories/{memory.pk}/deletion/" in again.json()["error"]["message"]
    purge_again = client.post(f"/api/v1/memories/{memory.pk}/purge/")
    assert purge_again.status_code == 409
    assert purge_again.json()["error"]["code"] == "already_purged"
    memory.refresh_from_db()
    assert (memory.version, memory.deletion, AuditEvent.objects.count()) == before
    assert list(Step.objects.order_by("pk").values_list("pk", "input", "output")) == steps
    assert callbacks == []


def test_an_outsider_gets_404_and_nothing_is_redacted(
    charlie, client_for, memory, carried, django_capture_on_commit_callbacks
):
    first, _later = carried
    stored = _session_text(first.session_id)
    client = client_for(charlie)
    with django_capture_on_commit_callbacks(execute=True):
        for response in (
            client.delete(f"/api/v1/memories/{memory.pk}/"),
            client.post(f"/api/v1/memories/{memory.pk}/purge/"),
            client.get(f"/api/v1/memories/{memory.pk}/deletion/"),
        ):
            assert response.status_code == 404
            assert response.json()["error"]["code"] == "not_found"
    memory.refresh_from_db()
    assert memory.status == "active" and memory.content == TEXT and memory.deletion == {}
    assert MemoryEmbedding.objects.filter(memory=memory).exists()
    assert _session_text(first.session_id) == stored
    assert not AuditEvent.objects.filter(action__in=["memory.delete", "memory.purge"]).exists()


def test_a_colleague_cannot_delete_someone_elses_memory(
    make_member, client_for, memory, carried, django_capture_on_commit_callbacks
):
    """A colleague reads no one else's personal memory: 404, nothing redacted."""
    first, _later = carried
    stored = _session_text(first.session_id)
    colleague = make_member(roles=["employee"])
    assert client_for(colleague).delete(f"/api/v1/memories/{memory.pk}/").status_code == 404
    assert _session_text(first.session_id) == stored


def test_purge_redacts_and_removes_the_content_at_once(
    bob, client_for, memory, carried, django_capture_on_commit_callbacks
):
    first, _later = carried
    with django_capture_on_commit_callbacks(execute=False):  # the delete's task is not needed
        response = client_for(bob).post(f"/api/v1/memories/{memory.pk}/purge/")
    assert response.status_code == 200, response.content
    report = response.json()
    assert report["status"] == "purged" and report["removed"]["content"] == "purged"
    assert report["redaction"]["status"] == "complete"
    assert _model_step(first).pk in report["redaction"]["steps"]
    memory.refresh_from_db()
    assert memory.content == "" and memory.search_text == "" and memory.purged_at is not None
    assert not MemoryEmbedding.objects.filter(memory=memory).exists()
    assert memory.pk not in _found(bob)
    stored = _session_text(first.session_id)
    assert TEXT not in stored and report["marker"] in stored
    actions = list(
        AuditEvent.objects.filter(target_id=str(memory.pk))
        .order_by("pk")
        .values_list("action", flat=True)
    )
    assert actions[-2:] == ["memory.delete", "memory.purge"]


def test_many_sessions_are_redacted_in_bounded_batches_by_the_purge_task(
    bob, agent, memory, client_for, monkeypatch, django_capture_on_commit_callbacks
):
    runs = [_turn(bob, agent, f"Who gets the weekly report? ({n})") for n in range(3)]
    monkeypatch.setattr(deletion, "INLINE_SESSIONS", 1)
    monkeypatch.setattr(deletion, "PURGE_BATCH_SESSIONS", 1)

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        report = client_for(bob).delete(f"/api/v1/memories/{memory.pk}/").json()
    # The request redacted one session; the report says two remain and names the task.
    assert report["redaction"]["status"] == "in_progress"
    assert report["redaction"]["counts"]["sessions"] == 1
    assert report["redaction"]["sessions_pending"] == 2
    assert report["removed"]["content"] == "purge_pending"
    task = MemoryTask.objects.get(pk=report["task"]["id"])
    assert task.status == "waiting"
    assert TEXT in _session_text(runs[2].session_id)

    with django_capture_on_commit_callbacks(execute=True):
        for callback in callbacks:  # the purge task: one session per pass, purging in the last
            callback()
    task.refresh_from_db()
    memory.refresh_from_db()
    assert task.status == "completed" and task.attempts == 2
    assert memory.purged_at is not None
    assert memory.deletion["redaction"]["counts"]["sessions"] == 3
    for run in runs:
        assert TEXT not in _session_text(run.session_id)


def test_a_run_in_progress_is_redacted_once_it_rests(bob, agent, memory, monkeypatch):
    first = _turn(bob, agent, "Who gets the weekly report?")
    Run.objects.filter(pk=first.pk).update(status=Run.Status.RUNNING, heartbeat_at=timezone.now())
    deleted = memory_services.memory_delete(actor=member_actor(bob), memory=memory)
    report = memory_services.deletion_report(deleted)
    assert report["redaction"]["status"] == "in_progress"
    assert report["redaction"]["deferred_runs"] == [first.pk]
    assert TEXT in _session_text(first.session_id)
    # The purge waits for the redaction, which waits for the run.
    result = memory_services.memory_purge(organization=memory.organization, memory_ids=[memory.pk])
    assert result["deferred"] == [memory.pk] and result["retry_in"] == deletion.BUSY_RETRY_SECONDS
    assert Memory.objects.get(pk=memory.pk).content == TEXT

    Run.objects.filter(pk=first.pk).update(status=Run.Status.COMPLETED)
    result = memory_services.memory_purge(organization=memory.organization, memory_ids=[memory.pk])
    assert result["purged"] == [memory.pk]
    assert TEXT not in _session_text(first.session_id)
    # Idempotent: redacting again (with today's marker or another day's) changes nothing.
    marker = Memory.objects.get(pk=memory.pk).deletion["marker"]
    for again_marker in (marker, f"[memory {memory.pk} deleted on 2999-01-01]"):
        again = redaction.redact_memory(
            organization_id=memory.organization_id,
            memory_id=memory.pk,
            texts=[TEXT],
            marker=again_marker,
        )
        assert (again.steps, again.events, again.runs) == ([], [], [])
