"""Deletion reaches every copy: a preference a person stated, that a tool then used, is quoted
by the memories derived from those runs (the `memory_write` and `memory_search` trajectories,
the experience "Task: …") and by a skill draft, a candidate and a proposal. Deleting it
redacts it from all of them — content, attributes, history, both search indexes — so the
text is found nowhere and never reaches the next model call; the report lists the copies."""

from __future__ import annotations

import base64
import json

import pytest

from cadre.agents import services as agent_services
from cadre.agents.models import Run
from cadre.agents.runtime.lifecycle import execution as engine
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.agents.runtime.lifecycle.after import run_after_hooks
from cadre.governance.models import AuditEvent
from cadre.memory import selectors
from cadre.memory import services as memory_services
from cadre.memory.models import Kind, Memory, MemoryEmbedding, MemoryVersion
from cadre.skills import distill
from cadre.skills import services as skill_services
from cadre.skills.models import (
    CandidateRevision,
    DistillationRecord,
    SkillCandidate,
    SkillEvidence,
    SkillProposal,
)
from cadre.tenancy.actors import member_actor, system_actor
from tests.agents.conftest import publish
from tests.agents.fake_models import FakeModelServer

pytestmark = pytest.mark.django_db

TEXT = "I prefer numbered lists for weekly reports"
SAID = f"Remember that {TEXT}."
WRITE = {"content": TEXT, "kind": "preference"}
MEMORY_TOOLS = {
    "memory_search": {"risk": "low", "confirmation": "never"},
    "memory_write": {"risk": "low", "confirmation": "never"},
}


def _agent(alice, bob, server):
    owner = member_actor(alice)
    config = agent_services.provider_config_create(
        actor=owner,
        name="fake reports",
        kind="openai_compatible",
        base_url=server.base_url,
        api_key="sk-test",
        default_model="m",
    )
    template = agent_services.template_create(
        actor=owner,
        name="Reports desk",
        code="reports-desk",
        model_settings={
            "provider": "openai_compatible",
            "provider_config": config.pk,
            "model": "m",
        },
        tool_permissions=MEMORY_TOOLS,
        memory_policy={"read_scopes": ["agent", "user"], "write_scopes": ["agent", "user"]},
    )
    publish(owner, template.versions.get())
    deployment = agent_services.deployment_create(
        actor=owner, name="reports", template=template, members=[bob]
    )
    return deployment.agents.get()


def _turn(bob, agent, text, run_async) -> Run:
    with run_async():  # the after-run hooks and the memories' enrichment run on commit
        run = runtime.run_start(actor=member_actor(bob), agent=agent, text=text)
        assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    run_after_hooks(run.pk)  # idempotent: whatever has not run yet
    run.refresh_from_db()
    return run


def _skill_copies_text(organization) -> str:
    """Every skill draft, candidate (files decoded), revision, evidence and proposal."""
    parts = []
    for record in DistillationRecord.objects.filter(organization=organization):
        parts.append(record.draft + json.dumps(record.steps, ensure_ascii=False))
    for candidate in SkillCandidate.objects.filter(organization=organization):
        parts += [base64.b64decode(c).decode() for c in candidate.files.values()]
        parts.append(candidate.description)
    for revision in CandidateRevision.objects.filter(candidate__organization=organization):
        parts += [base64.b64decode(c).decode() for c in revision.files.values()]
        parts.append(revision.note)
    for evidence in SkillEvidence.objects.filter(candidate__organization=organization):
        parts.append(evidence.summary + json.dumps(evidence.data, ensure_ascii=False))
    for proposal in SkillProposal.objects.filter(organization=organization):
        parts.append(
            json.dumps(
                [proposal.summary, proposal.correction, proposal.files, proposal.messages],
                ensure_ascii=False,
            )
        )
    return "\n".join(parts)


def _memory_text(organization) -> str:
    """Every memory's content and attributes, and every history entry's text."""
    parts = [
        json.dumps([m.content, m.attributes, m.search_text], ensure_ascii=False)
        for m in Memory.objects.filter(organization=organization)
    ]
    parts += [
        json.dumps(
            [v.old_content, v.new_content, v.old_attributes, v.new_attributes],
            ensure_ascii=False,
        )
        for v in MemoryVersion.objects.filter(memory__organization=organization)
    ]
    return "\n".join(parts)


def _found_by_search(organization, query: str) -> list[str]:
    reader = selectors.system_reader(
        organization, job="deletion test", reason="look for a deleted memory's text"
    )
    contents = []
    for mode in ("lexical", "vector", "hybrid"):
        result = selectors.memory_search(  # every kind: derived records are left out by default
            actor=reader,
            query=query,
            top_k=50,
            force=True,
            mode=mode,
            kinds=list(Kind.values),
        )
        contents += [
            json.dumps([hit.memory.content, hit.memory.attributes], ensure_ascii=False)
            for hit in result.hits
        ]
    return contents


def _drafts(organization, bob, run, experience_id) -> dict:
    """A distilled draft, its candidate and a proposal, each quoting the task as said."""
    draft = distill.render_draft("weekly-report-format", [SAID], [], 3)
    actor = system_actor(organization, label="memory-to-skill")
    candidate = skill_services.candidate_create(
        actor=actor,
        source=SkillCandidate.Source.MEMORY,
        files={"SKILL.md": draft.encode()},
        note=f"kept: {SAID}",
        evidence=[
            {
                "kind": "trajectories",
                "summary": "3 successful task runs in memory",
                "data": {"memory_ids": [experience_id], "example": SAID},
                "weight": 3,
            }
        ],
    )
    record = DistillationRecord.objects.create(
        organization=organization,
        cluster_key="c" * 64,
        memory_ids=[experience_id],
        successes=3,
        name="weekly-report-format",
        draft=draft,
        steps=[{"text": f"Use memory_write: content={TEXT}"}],
        check_method="rules",
        kept=True,
        reason="kept",
        candidate=candidate,
    )
    proposal = SkillProposal.objects.create(
        organization=organization,
        member=bob,
        run=run,
        session=run.session,
        kind=SkillProposal.Kind.NEW_SKILL,
        name="weekly-report-format",
        summary=f"Answer as the person said: {TEXT}",
        correction=SAID,
        files={"SKILL.md": draft},
        messages=[{"role": "user", "content": SAID, "run_id": run.pk}],
        drafted_by="rules",
    )
    return {"candidate": candidate, "record": record, "proposal": proposal}


@pytest.fixture
def server():
    with FakeModelServer(
        [
            # 1: the person states a preference; the model remembers it.
            {
                "tool_calls": [
                    {"name": "memory_write", "arguments": {"content": TEXT, "kind": "preference"}}
                ]
            },
            {"text": "Noted."},
            # 2: a later task; the model looks it up and uses it.
            {"tool_calls": [{"name": "memory_search", "arguments": {"query": "weekly reports"}}]},
            {"text": "1. Wins 2. Risks 3. Next steps"},
            # 3: after the deletion, the same question again.
            {"tool_calls": [{"name": "memory_search", "arguments": {"query": "weekly reports"}}]},
            {"text": "Which format would you like?"},
        ]
    ) as server:
        yield server


@pytest.fixture
def used(alice, bob, server, run_async):
    """The preference stated (memory_write), then used by a tool in a later task, and quoted
    by the derived memories and skill drafts those runs led to."""
    agent = _agent(alice, bob, server)
    first = _turn(bob, agent, SAID, run_async)
    memory = Memory.objects.get(organization=bob.organization, kind="preference")
    assert memory.content == TEXT and memory.scope_key == f"user:{bob.pk}"
    second = _turn(bob, agent, "Draft my weekly report outline, please.", run_async)
    assert TEXT in json.dumps(server.requests[3]["body"], ensure_ascii=False)  # the tool's hit

    derived = Memory.objects.filter(
        organization=bob.organization, kind__in=["tool_trajectory", "experience"]
    )
    quoting = {m.pk: m for m in derived if TEXT in m.content}
    trajectories = [m for m in quoting.values() if m.kind == "tool_trajectory"]
    assert {m.attributes["tool"] for m in trajectories} == {"memory_write", "memory_search"}
    experience = next(m for m in quoting.values() if m.kind == "experience")
    assert experience.content.startswith(f"Task: {SAID}")
    assert all(MemoryEmbedding.objects.filter(memory_id=pk).exists() for pk in quoting)
    assert any(TEXT in text for text in _found_by_search(bob.organization, TEXT))
    copies = _drafts(bob.organization, bob, first, experience.pk)
    assert TEXT in _skill_copies_text(bob.organization)
    return {
        "agent": agent,
        "memory": memory,
        "runs": (first, second),
        "trajectories": trajectories,
        "experience": experience,
        **copies,
    }


def test_a_deleted_preference_is_found_nowhere_and_never_reaches_the_next_model_call(
    bob, client_for, server, used, run_async
):
    memory = used["memory"]
    derived = [*used["trajectories"], used["experience"]]
    vectors_before = set(
        MemoryEmbedding.objects.filter(memory__in=derived).values_list("pk", flat=True)
    )

    with run_async():  # the purge, and the derived memories' re-embedding, run on commit
        response = client_for(bob).delete(f"/api/v1/memories/{memory.pk}/")
    assert response.status_code == 200, response.content
    marker = response.json()["marker"]

    organization = bob.organization
    # Not in any memory: content, attributes, lexical document, history.
    assert TEXT not in _memory_text(organization)
    for row in Memory.objects.filter(pk__in=[m.pk for m in derived]):
        assert marker in row.content and row.status == "active"
        assert row.search_text and marker not in row.search_text  # re-indexed
        assert row.versions.last().reason == f"redacted: quoted memory {memory.pk}, deleted"
    assert Memory.objects.get(pk=used["experience"].pk).content.startswith(
        f"Task: Remember that {marker}."
    )
    # Not found by search, vector or lexical: the derived rows were re-embedded from the
    # redacted text (their old vectors are gone).
    assert not [text for text in _found_by_search(organization, TEXT) if TEXT in text]
    vectors_after = set(
        MemoryEmbedding.objects.filter(memory__in=derived).values_list("pk", flat=True)
    )
    assert vectors_after and not vectors_after & vectors_before
    # Not in the skill drafts, candidates, revisions, evidence or proposals.
    skills = _skill_copies_text(organization)
    assert TEXT not in skills and marker in skills
    candidate = SkillCandidate.objects.get(pk=used["candidate"].pk)
    assert candidate.fingerprint != used["candidate"].fingerprint  # its files changed

    # The next model call, in a new session, looks for it again: nothing quotes it.
    third = _turn(bob, used["agent"], "How do I format my weekly report?", run_async)
    assert len(server.requests) == 6
    for request in server.requests[4:]:
        assert TEXT not in json.dumps(request["body"], ensure_ascii=False)
    tool_step = third.steps.get(kind="tool_call", name="memory_search")
    assert TEXT not in json.dumps(tool_step.output, ensure_ascii=False)


def test_the_report_lists_the_derived_copies_by_kind_with_ids_only(bob, client_for, used):
    memory = used["memory"]
    summary = memory_services.memory_add(
        actor=system_actor(bob.organization, label="memory organizer"),
        scope="user",
        scope_id=bob.pk,
        kind="summary",
        content=f'Tool memory_write: 3 recorded calls. Most recent parameters: {{"content": '
        f'"{TEXT}"}}',
        source_kind="system",
    )
    unrelated = memory_services.memory_add(
        actor=member_actor(bob),
        scope="user",
        kind="experience",
        content="Task: book a room. Recorded from run 1.",
        source_kind="system",
    )

    response = client_for(bob).delete(f"/api/v1/memories/{memory.pk}/")
    assert response.status_code == 200, response.content
    derived = response.json()["redaction"]["derived"]

    assert derived["status"] == "complete"
    copies = derived["copies"]
    assert sorted(copies["tool_trajectories"]) == sorted(m.pk for m in used["trajectories"])
    assert copies["experiences"] == [used["experience"].pk]
    assert copies["summaries"] == [summary.pk]
    assert copies["skill_drafts"] == [used["record"].pk]
    assert copies["skill_candidates"] == [used["candidate"].pk]
    assert copies["skill_proposals"] == [used["proposal"].pk]
    assert unrelated.pk not in [pk for ids in copies.values() for pk in ids]
    assert derived["counts"] == {kind: len(ids) for kind, ids in copies.items()}
    # The same on the row and in the audit event, ids and counts only.
    memory.refresh_from_db()
    assert memory.deletion["redaction"]["derived"]["copies"] == copies
    event = AuditEvent.objects.get(action="memory.delete", target_id=str(memory.pk))
    assert event.changes["redaction"]["derived"]["copies"] == copies
    assert TEXT not in json.dumps(event.changes) and "numbered" not in json.dumps(derived)
    shown = client_for(bob).get(f"/api/v1/memories/{memory.pk}/deletion/").json()
    assert shown["redaction"]["derived"] == derived


def test_a_filter_deletion_redacts_the_derived_copies_before_it_purges(bob, used, run_async):
    memory = used["memory"]
    with run_async():  # the purge task redacts the copies, then purges
        result = memory_services.memory_delete_by_filter(
            actor=member_actor(bob), kinds=["preference"]
        )
    assert result.deleted == [memory.pk]
    memory.refresh_from_db()
    assert memory.purged_at is not None
    assert TEXT not in _memory_text(bob.organization)
    assert TEXT not in _skill_copies_text(bob.organization)
    derived = memory.deletion["redaction"]["derived"]["copies"]
    assert derived["experiences"] == [used["experience"].pk]
    purge = AuditEvent.objects.get(action="memory.purge")
    assert purge.changes["derived"][str(memory.pk)]["copies"] == derived
    assert TEXT not in json.dumps(purge.changes)


def test_a_draft_quoting_the_text_masked_is_redacted_too(bob, client_for):
    """Drafts quote tasks masked with their own vault: the phone number is a placeholder of
    another number than the deleted memory's own masking would give."""
    said = "Call me on 13812345678 before every weekly review"
    memory = memory_services.memory_add(
        actor=member_actor(bob),
        scope="user",
        kind="requirement",
        content=said,
        source_kind="user_statement",
    )
    masked = said.replace("13812345678", "<PHONE_3>")
    other = "Call me on <PHONE_1> after lunch, every weekday"
    record = DistillationRecord.objects.create(
        organization=bob.organization,
        cluster_key="d" * 64,
        name="weekly-review-calls",
        draft=f"## Example\n\nTask: {masked}\nTask: {other}",
        check_method="rules",
        reason="kept",
    )

    response = client_for(bob).delete(f"/api/v1/memories/{memory.pk}/")
    assert response.status_code == 200, response.content

    record.refresh_from_db()
    marker = response.json()["marker"]
    assert record.draft == f"## Example\n\nTask: {marker}\nTask: {other}"
    assert response.json()["redaction"]["derived"]["copies"]["skill_drafts"] == [record.pk]


def test_a_short_chinese_fact_is_redacted_where_it_is_quoted_and_a_short_phrase_is_not(
    bob, client_for
):
    """A bare text is matched by how much it says: eight ideographs say as much as a sentence
    (an ideograph counts three characters), three common ones do not."""
    actor = member_actor(bob)
    said = "我住在朝阳区望京"  # "I live in Wangjing, Chaoyang": 8 characters
    thanks = "谢谢你"
    fact, polite = (
        memory_services.memory_add(
            actor=actor, scope="user", kind="fact", content=text, source_kind="user_statement"
        )
        for text in (said, thanks)
    )
    quoting = memory_services.experience_record(
        actor=actor,
        task=f"帮我找离{said}最近的健身房，{thanks}",
        steps=[f"查询 {said} 附近的健身房"],
        outcome="success",
        run_id=1,
    )
    marker = client_for(bob).delete(f"/api/v1/memories/{fact.pk}/").json()["marker"]
    quoting.refresh_from_db()
    history = MemoryVersion.objects.filter(memory=quoting).values_list("new_content", flat=True)
    assert not [text for text in history if said in text]
    assert quoting.content.count(marker) == 2 and thanks in quoting.content  # task and step
    assert quoting.attributes["steps"] == [f"查询 {marker} 附近的健身房"]

    client_for(bob).delete(f"/api/v1/memories/{polite.pk}/")
    quoting.refresh_from_db()
    assert thanks in quoting.content  # three characters: everyone's words, left alone
