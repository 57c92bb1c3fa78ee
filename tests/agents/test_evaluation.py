"""Evaluation suites: cases saved from a turn or imported (masked, all-or-nothing), replays that
never run a tool, memory read as of the case, and the baseline/candidate comparison."""

from __future__ import annotations

import dataclasses
import io
import json

import pytest
from django.utils import timezone

from cadre.agents import services as agents
from cadre.agents.evaluation import services, tasks
from cadre.agents.evaluation.compare import aggregate, bootstrap_difference, wilson
from cadre.agents.evaluation.models import EvalCase, EvalResult, EvalRun, EvalSuite
from cadre.agents.models import AgentMessage, AgentTask, Run, ToolEffect
from cadre.agents.runtime.lifecycle import execution as engine
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.agents.tools import registry as tool_registry
from cadre.errors import InvalidInput
from cadre.governance.models import AuditEvent, PolicyDecision
from cadre.tenancy.actors import member_actor
from tests.refusals import nothing_changes

pytestmark = pytest.mark.django_db


@pytest.fixture
def suite(owner, template, published):
    return services.suite_create(actor=owner, name="Sales turns", template=template)


@pytest.fixture
def effects(monkeypatch):
    """The side-effecting tools swapped for fakes that count what they would have done."""
    performed: list[tuple[str, dict]] = []
    for name in ("task_create", "im_send", "memory_write", "http_request"):
        real = tool_registry.get(name)

        def handler(ctx, args, name=name):
            performed.append((name, args))
            return {"ok": True}

        monkeypatch.setitem(
            tool_registry._REGISTRY, name, dataclasses.replace(real, handler=handler)
        )
    return performed


def _case(suite, owner, **data):
    return services.case_create(actor=owner, suite=suite, data={"input": "hello", **data})


def test_a_written_case_is_masked_with_one_vault(owner, suite):
    case = _case(
        suite,
        owner,
        input="Call me at 13812345678 please",
        required_facts=["13812345678"],
        tool_results=[
            {"name": "task_create", "arguments": {"title": "ring 13812345678"}, "result": {}}
        ],
    )
    assert "13812345678" not in json.dumps([case.input_text, case.tool_results, case.expectations])
    placeholder = case.expectations["required_facts"][0]
    assert placeholder.startswith("<") and placeholder in case.input_text
    assert placeholder in case.tool_results[0]["arguments"]["title"]
    assert AuditEvent.objects.filter(action="evaluation.case.create").count() == 1


def test_a_turn_becomes_a_case_with_its_tool_results_and_outcome(owner, bob, bob_agent, suite):
    run = runtime.run_start(actor=member_actor(bob), agent=bob_agent, text="hello there")
    engine.run_execute(run.pk)
    second = runtime.run_start(
        actor=member_actor(bob), agent=bob_agent, text="remind me to call Dana", session=run.session
    )
    assert engine.run_execute(second.pk) == Run.Status.COMPLETED
    second.refresh_from_db()

    case = services.case_from_turn(actor=owner, suite=suite, run=second)

    assert case.source == EvalCase.Source.TURN and case.source_run == second
    assert case.input_text == "remind me to call Dana"
    assert [t["role"] for t in case.conversation] == ["user", "assistant"]
    assert case.conversation[0]["content"] == "hello there"
    assert case.tool_results[0]["name"] == "task_create"
    assert case.tool_results[0]["arguments"] == {"title": "call Dana"}
    assert case.as_of == second.created_at
    assert case.member == bob
    assert case.expectations["expected_tool_calls"] == [
        {"name": "task_create", "arguments": {"title": "call Dana"}}
    ]
    assert case.expectations["expected_policy"] == "allow"
    assert case.expectations["reference_reply"] == second.output["text"]


def test_a_turn_still_running_cannot_become_a_case(owner, bob, bob_agent, suite):
    run = runtime.run_start(actor=member_actor(bob), agent=bob_agent, text="hello")
    with nothing_changes(EvalCase), pytest.raises(InvalidInput) as refused:
        services.case_from_turn(actor=owner, suite=suite, run=run)
    assert refused.value.code == "run_not_completed"


def test_replay_never_runs_a_tool_answers_recorded_results_and_stubs_the_rest(
    owner, template, suite, effects
):
    _case(
        suite,
        owner,
        input="remind me to call Dana",
        tool_results=[
            {
                "name": "task_create",
                "arguments": {"title": "call Dana"},
                "result": {"task": {"id": 77, "title": "call Dana"}},
            }
        ],
        expected_tool_calls=[{"name": "task_create", "arguments": {"title": "call Dana"}}],
    )
    _case(suite, owner, input="send hello to Bob")  # im_send: nothing recorded
    draft = agents.version_draft(actor=owner, template=template)
    run = services.eval_run_start(
        actor=owner, suite=suite, candidate={"kind": "template_version", "version": draft.pk}
    )
    before = (AgentTask.objects.count(), AgentMessage.objects.count(), ToolEffect.objects.count())
    decisions = PolicyDecision.objects.count()

    tasks.eval_run_execute.apply(args=[run.pk])

    assert effects == []  # no fake tool was ever called
    assert (
        AgentTask.objects.count(),
        AgentMessage.objects.count(),
        ToolEffect.objects.count(),
    ) == before
    assert PolicyDecision.objects.count() == decisions
    run.refresh_from_db()
    assert run.status == EvalRun.Status.COMPLETED and run.verdict == "pass"
    recorded, stubbed = EvalResult.objects.filter(run=run).order_by("case_id")
    assert recorded.candidate["tool_calls"][0]["source"] == "recorded"
    assert "77" in recorded.candidate["reply"] or "call Dana" in recorded.candidate["reply"]
    assert recorded.candidate_passed and recorded.comparison["tools"]["same_arguments"]
    assert stubbed.candidate["tool_calls"][0] == {
        "name": "im_send",
        "arguments": {"to": ["Bob"], "text": "hello"},
        "source": "stubbed",
    }
    assert stubbed.candidate["stubbed"] == 1 and run.summary["candidate"]["stubbed_calls"] == 1
    assert run.summary["cases"] == 2


def test_a_candidate_that_loses_a_tool_and_a_fact_regresses(owner, template, suite, effects):
    for n in range(4):
        _case(
            suite,
            owner,
            input="remind me to call Dana",
            tool_results=[
                {"name": "task_create", "arguments": {"title": "call Dana"}, "result": {"ok": n}}
            ],
            expected_tool_calls=[{"name": "task_create"}],
        )
    _case(suite, owner, input="What is the standard discount?", required_facts=["5 percent"])
    draft = agents.version_draft(actor=owner, template=template)
    agents.version_update(
        actor=owner,
        version=draft,
        sop="# SOP\nAsk your manager about prices.",
        tool_permissions={"memory_search": {"risk": "low", "confirmation": "never"}},
    )
    run = services.eval_run_start(
        actor=owner, suite=suite, candidate={"kind": "template_version", "version": draft.pk}
    )
    services.eval_run_execute(run.pk)

    run.refresh_from_db()
    summary = run.summary
    assert summary["baseline"]["pass_rate"] == 1.0 and summary["candidate"]["pass_rate"] == 0.0
    assert summary["regressed_cases"] == 5 and run.verdict == "regression"
    assert summary["difference_ci95"] == [-1.0, -1.0]
    lost = EvalResult.objects.filter(run=run).first()
    # task_create is no longer on offer: the candidate makes no call where one is expected
    assert (
        lost.candidate["tool_calls"] == []
        and lost.baseline["tool_calls"][0]["name"] == "task_create"
    )
    assert lost.candidate["checks"]["missing_tool_calls"] == [{"name": "task_create"}]
    assert lost.comparison["tools"]["same_tools"] is False
    assert lost.comparison["policy"]["same"] is False
    fact = EvalResult.objects.filter(run=run).last()
    assert fact.candidate["checks"]["missing_facts"] == ["5 percent"]
    assert fact.baseline["checks"]["missing_facts"] == []
    assert effects == []


def test_a_model_candidate_replays_with_its_own_model(owner, suite):
    _case(suite, owner, input="What is the standard discount?", required_facts=["5 percent"])
    run = services.eval_run_start(
        actor=owner,
        suite=suite,
        candidate={
            "kind": "model",
            "model_settings": {"provider": "offline", "model": "offline-2"},
        },
    )
    services.eval_run_execute(run.pk)
    result = EvalResult.objects.get(run=run)
    assert result.candidate["side"] == "model offline-2"
    assert result.comparison["tokens"]["candidate"] > 0
    assert result.candidate["usage"]["input_tokens"] > 0
    assert result.candidate["overhead_ms"] >= 0 and result.candidate["latency_ms"] > 0


def _memory(bob, content: str):
    from cadre.memory import services as memory_services

    return memory_services.memory_add(
        actor=member_actor(bob),
        scope="user",
        scope_id=bob.pk,
        kind="fact",
        content=content,
        source_kind="user_statement",
    )


def test_memory_is_read_as_of_the_case_time(owner, bob):
    past = _memory(bob, "Dana prefers calls on Tuesday mornings")
    moment = timezone.now()
    later = _memory(bob, "Dana also likes calls on Friday afternoons")
    assert later.created_at > moment
    suite = services.suite_create(actor=owner, name="Retrieval", kind="retrieval")
    case = _case(
        suite,
        owner,
        input="When does Dana prefer calls?",
        scopes=[past.scope_key],
        as_of=moment.isoformat(),
        expected_memories=[past.pk],
    )
    now_case = _case(suite, owner, input="When does Dana prefer calls?", scopes=[past.scope_key])
    run = services.eval_run_start(actor=owner, suite=suite, candidate={"kind": "current"})
    services.eval_run_execute(run.pk)
    result = EvalResult.objects.get(run=run, case=case)
    sent = [m["id"] for m in result.baseline["memories"]]
    assert past.pk in sent and later.pk not in sent
    assert result.baseline["checks"]["memory_recall"] == 1.0
    assert result.comparison["retrieval"]["overlap"] == 1.0
    assert result.comparison["retrieval"]["recall_of_baseline"] == 1.0
    now = EvalResult.objects.get(run=run, case=now_case)
    assert {past.pk, later.pk} <= {m["id"] for m in now.baseline["memories"]}


def test_a_jsonl_file_with_a_bad_line_imports_nothing(owner, suite):
    good = json.dumps({"input": "hi", "required_facts": ["hello"]})
    bad = json.dumps({"input": "", "expected_policy": "maybe"})
    content = "\n".join([good, "{not json", good, bad]).encode()
    with nothing_changes(EvalCase), pytest.raises(InvalidInput) as refused:
        services.cases_import_jsonl(actor=owner, suite=suite, content=content)
    assert refused.value.code == "invalid_jsonl"
    lines = refused.value.details["lines"]
    assert [problem["line"] for problem in lines] == [2, 4]
    assert any("expected_policy" in e for e in lines[1]["errors"])
    assert any("input" in e for e in lines[1]["errors"])


def test_jsonl_import_through_the_api(alice, client_for, owner, suite):
    lines = [
        {"input": "Email dana@example.com the price", "forbidden_facts": ["10 percent"]},
        {
            "input": "hi",
            "conversation": [{"role": "user", "content": "earlier"}],
            "scopes": ["organization"],
        },
    ]
    upload = io.BytesIO("\n".join(json.dumps(line) for line in lines).encode())
    upload.name = "cases.jsonl"
    response = client_for(alice).post(
        "/api/v1/evaluation/cases/import/", {"suite": suite.pk, "file": upload}, format="multipart"
    )
    assert response.status_code == 201, response.content
    assert response.json()["imported"] == 2
    first = EvalCase.objects.get(pk=response.json()["ids"][0])
    assert "dana@example.com" not in first.input_text and first.source == "import"

    bad = io.BytesIO(b'{"input": "ok"}\n{"input": 5}\n')
    bad.name = "bad.jsonl"
    with nothing_changes(EvalCase):
        refused = client_for(alice).post(
            "/api/v1/evaluation/cases/import/", {"suite": suite.pk, "file": bad}, format="multipart"
        )
    assert refused.status_code == 400
    body = refused.json()["error"]
    assert body["code"] == "invalid_jsonl" and body["details"]["lines"][0]["line"] == 2


def test_api_starts_a_replay_and_lists_its_results(alice, bob, client_for, owner, suite):
    _case(suite, owner, input="What is the standard discount?", required_facts=["5 percent"])
    client = client_for(alice)
    response = client.post(
        "/api/v1/evaluation/runs/",
        {
            "suite": suite.pk,
            "candidate": {"kind": "model", "model_settings": {"model": "offline-2"}},
        },
        format="json",
    )
    assert response.status_code == 202, response.content
    run_id = response.json()["id"]
    assert response.json()["status"] == "queued"
    services.eval_run_execute(run_id)
    detail = client.get(f"/api/v1/evaluation/runs/{run_id}/").json()
    assert detail["status"] == "completed" and detail["verdict"] == "pass"
    assert detail["summary"]["baseline"]["pass_rate_ci95"] == list(wilson(1, 1))
    results = client.get(f"/api/v1/evaluation/runs/{run_id}/results/").json()
    assert results["results"][0]["candidate_passed"] is True
    # an employee may read templates but not start replays
    assert (
        client_for(bob)
        .post(
            "/api/v1/evaluation/runs/",
            {"suite": suite.pk, "candidate": {"kind": "current"}},
            format="json",
        )
        .status_code
        == 403
    )


def test_bad_sides_are_refused_with_nothing_started(owner, suite, charlie):
    _case(suite, owner)
    for side in (
        {"kind": "nonsense"},
        {"kind": "template_version", "version": 999999},
        {"kind": "model", "model_settings": {}},
        {"kind": "embedding", "embedding_model": "nope/none"},
    ):
        with nothing_changes(EvalRun), pytest.raises(InvalidInput) as refused:
            services.eval_run_start(actor=owner, suite=suite, candidate=side)
        assert refused.value.code == "invalid_side"
    empty = services.suite_create(actor=owner, name="Empty")
    with nothing_changes(EvalRun), pytest.raises(InvalidInput):
        services.eval_run_start(actor=owner, suite=empty, candidate={"kind": "current"})


def test_interval_arithmetic():
    assert wilson(0, 0) == (0.0, 1.0)
    low, high = wilson(8, 10)
    assert low == pytest.approx(0.4902, abs=1e-4) and high == pytest.approx(0.9433, abs=1e-4)
    assert bootstrap_difference([(True, True)] * 10) == (0.0, 0.0)
    low, high = bootstrap_difference([(True, False)] * 3 + [(True, True)] * 7)
    assert -0.6 <= low <= -0.3 <= high <= 0.0
    result = {"passed": True, "cost": "0", "latency_ms": 1}
    comparison = {
        "tokens": {"baseline": 1, "candidate": 1},
        "retrieval": {"overlap": 1.0, "recall_of_baseline": 1.0, "mean_rank_change": 0.0},
        "tools": {"same_arguments": True},
        "policy": {"same": True},
    }
    rows = [
        {"baseline": result, "candidate": {**result, "passed": n > 0}, "comparison": comparison}
        for n in range(20)
    ]
    assert aggregate(rows, 0.1)["verdict"] == "pass"  # one case of 20: -0.05, within 0.1
    assert aggregate(rows, 0.01)["verdict"] == "regression"
    assert EvalSuite.objects.count() == 0


def test_the_publish_gate_blocks_without_a_passing_replay_and_audits_overrides(
    alice, client_for, owner, template, suite
):
    from cadre.agents.evaluation.gates import evaluation_gates_set
    from cadre.agents.models import TemplateVersion
    from cadre.errors import Conflict

    _case(suite, owner, input="What is the standard discount?", required_facts=["5 percent"])
    evaluation_gates_set(actor=owner, gates={"template_publish": True})
    draft = agents.version_submit(
        actor=owner, version=agents.version_draft(actor=owner, template=template)
    )
    published = TemplateVersion.objects.filter(status="published")
    with nothing_changes(published), pytest.raises(Conflict) as blocked:
        agents.version_publish(actor=owner, version=draft, reason="ship")
    assert blocked.value.code == "evaluation_gate"
    response = client_for(alice).post(f"/api/v1/template-versions/{draft.pk}/publish/", {})
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "evaluation_gate"

    # a regressed replay still blocks; an override says why and who
    agents.version_withdraw(actor=owner, version=draft, reason="edit")
    agents.version_update(actor=owner, version=draft, sop="# SOP\nAsk your manager.")
    draft = agents.version_submit(actor=owner, version=draft)
    run = services.eval_run_start(
        actor=owner, suite=suite, candidate={"kind": "template_version", "version": draft.pk}
    )
    services.eval_run_execute(run.pk)
    run.refresh_from_db()
    assert run.verdict == "regression"
    with pytest.raises(Conflict):
        agents.version_publish(actor=owner, version=draft)
    response = client_for(alice).post(
        f"/api/v1/template-versions/{draft.pk}/publish/",
        {"override_gate": "pricing change approved by sales"},
        format="json",
    )
    assert response.status_code == 200, response.content
    override = AuditEvent.objects.get(action="evaluation.gate.override")
    assert (override.actor_type, override.actor_id) == ("member", str(alice.pk))
    assert override.reason == "pricing change approved by sales"
    changes = json.dumps(override.changes)
    assert '"replay"' in changes and str(run.pk) in changes and "regression" in changes


def test_a_passing_replay_opens_the_publish_gate(owner, template, suite):
    from cadre.agents.evaluation.gates import evaluation_gates_set

    _case(suite, owner, input="What is the standard discount?", required_facts=["5 percent"])
    evaluation_gates_set(actor=owner, gates={"template_publish": True})
    draft = agents.version_submit(
        actor=owner, version=agents.version_draft(actor=owner, template=template)
    )
    run = services.eval_run_start(
        actor=owner, suite=suite, candidate={"kind": "template_version", "version": draft.pk}
    )
    services.eval_run_execute(run.pk)
    published = agents.version_publish(actor=owner, version=draft, reason="ship")
    assert published.status == "published"
    assert not AuditEvent.objects.filter(action="evaluation.gate.override").exists()
