"""The `compact` hook: once a session's history passes its share of the template's context
budget, the older turns become a summary with provenance labels and the turns it covers; the
next model call reads the summary and the recent turns, not the old ones. Offline the summary
is built by rules and says so; with memory's model configured (a loopback OpenAI-compatible
server) the model writes it."""

from __future__ import annotations

import pytest

from cadre.agents import services
from cadre.agents.hooks.compaction import SUMMARY_PROMPT
from cadre.agents.models import Run, SessionSummary
from cadre.agents.runtime.lifecycle import execution as engine
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.agents.runtime.lifecycle.after import run_after_hooks
from cadre.llm import estimate_tokens
from cadre.tenancy.actors import member_actor
from tests.agents.conftest import OFFLINE_TOOLS, publish
from tests.memory.conftest import FakeModelServer

pytestmark = pytest.mark.django_db

CONVERSATION = [
    "From now on, always write the weekly reports in bullet points.",
    "Remind me to call Alice Chen about the renewal",
    "Plan the offsite: we will book the Berlin venue for the team offsite in May.",
    "Actually, instead of the Berlin venue, book the Lisbon venue for the offsite.",
    "What did we decide about the offsite venue?",
    "And the weekly reports format?",
    "Thanks, what else is open?",
    "Anything about renewals?",
]


@pytest.fixture
def compact_agent(owner, bob):
    template = services.template_create(
        actor=owner,
        name="Compacting assistant",
        code="compacting",
        agent_md="# Persona\nYou help {{member.display_name}} plan work.",
        tool_permissions=OFFLINE_TOOLS,
        # A small context budget: the history's share (half of it) is passed in a few turns.
        model_settings={"provider": "offline", "model": "offline-1", "context_tokens": 600},
        memory_policy={"read_scopes": ["agent", "user"], "write_scopes": ["agent"]},
        hooks={
            "assemble_context": [{"name": "memory_retrieval", "enabled": False}],
            "compact": [
                {"name": "memory_dedup", "enabled": False},
                {"name": "session_summary", "config": {"keep_recent": 2, "summary_share": 1.0}},
            ],
        },
    )
    publish(owner, template.versions.get())
    deployment = services.deployment_create(
        actor=owner, name="compacting", template=template, members=[bob]
    )
    return deployment.agents.get()


def talk(bob, agent, texts, session=None):
    runs = []
    for text in texts:
        run = runtime.run_start(actor=member_actor(bob), agent=agent, text=text, session=session)
        assert engine.run_execute(run.pk) == Run.Status.COMPLETED
        run_after_hooks(run.pk)
        session = run.session
        runs.append(run)
    return runs


def model_messages(run):
    return run.steps.filter(kind="model_call").order_by("index").first().input["messages"]


def test_a_long_session_is_summarised_with_labels_and_the_next_call_reads_the_summary(
    bob, compact_agent
):
    runs = talk(bob, compact_agent, CONVERSATION)
    summary = SessionSummary.objects.filter(session=runs[0].session).latest("created_at")
    assert summary.method == "rules (offline)"
    assert "summarised by offline rules, not by a model" in summary.text
    ids = [run.pk for run in runs]
    assert summary.covered_run_ids == ids[: len(summary.covered_run_ids)]
    assert ids[0] in summary.covered_run_ids and ids[3] in summary.covered_run_ids
    assert summary.through_run_id == summary.covered_run_ids[-1]
    assert estimate_tokens(summary.text) <= 300  # its share (all) of the history budget

    by_label: dict[str, list[dict]] = {}
    for item in summary.items:
        by_label.setdefault(item["label"], []).append(item)
    assert set(by_label) == {
        "user_requirement",
        "model_assumption",
        "tool_fact",
        "superseded_plan",
    }
    requirement = next(i for i in by_label["user_requirement"] if "bullet points" in i["text"])
    assert requirement["turn_ids"] == [ids[0]]
    fact = next(i for i in by_label["tool_fact"] if "task_create" in i["text"])
    assert fact["turn_ids"] == [ids[1]] and "Alice Chen" not in fact["text"]  # model's side
    superseded = next(i for i in by_label["superseded_plan"] if "Berlin" in i["text"])
    assert superseded["turn_ids"] == [ids[2]] and superseded["superseded_by"] == ids[3]
    assert any("Lisbon" in i["text"] for i in by_label["user_requirement"])
    assert "[user requirement]" in summary.text and "[superseded plan]" in summary.text

    # The next turn's model call: the summary, then only the turns after it.
    (following,) = talk(bob, compact_agent, ["Summarise where we are."], runs[0].session)
    messages = model_messages(following)
    assert messages[1] == {"role": "system", "content": summary.text}
    sent = [m["content"] for m in messages if m["role"] in ("user", "assistant")]
    for run in runs:
        if run.pk in summary.covered_run_ids:
            assert run.input["model_text" if "model_text" in run.input else "text"] not in sent
    assert messages[-1] == {"role": "user", "content": "Summarise where we are."}


def test_below_the_budget_nothing_is_summarised(bob, compact_agent):
    (run,) = talk(bob, compact_agent, ["hello there"])
    step = run.steps.get(name="compact:session_summary")
    assert step.output["compacted"] is False and step.output["budget"] == 300
    assert not SessionSummary.objects.exists()


def test_rerunning_the_compact_hook_keeps_one_summary(bob, compact_agent):
    talk(bob, compact_agent, CONVERSATION[:5])
    last = SessionSummary.objects.latest("created_at")
    count = SessionSummary.objects.count()
    last.run.steps.filter(name__startswith="compact:").delete()
    run_after_hooks(last.run_id)
    assert SessionSummary.objects.count() == count


def test_with_memorys_model_the_summary_comes_from_the_model(bob, compact_agent, monkeypatch):
    def answer(body):
        system = body["messages"][0]["content"]
        if system == SUMMARY_PROMPT:
            turns = [
                int(line.split()[1])
                for line in body["messages"][1]["content"].splitlines()
                if line.startswith("TURN ")
            ]
            return {
                "items": [
                    {
                        "label": "user_requirement",
                        "text": "Weekly reports are written in bullet points.",
                        "turn_ids": turns[:1],
                    },
                    {
                        "label": "superseded_plan",
                        "text": "Book the Berlin venue (replaced by Lisbon).",
                        "turn_ids": turns[2:3] or turns[:1],
                    },
                    {"label": "invented", "text": "dropped: unknown label", "turn_ids": turns},
                ]
            }
        return {"memories": []}  # memory extraction reads the same model

    server = FakeModelServer(answer)
    try:
        monkeypatch.setenv("CADRE_MEMORY_PROVIDER_KIND", "openai_compatible")
        monkeypatch.setenv("CADRE_MEMORY_PROVIDER_BASE_URL", server.base_url)
        monkeypatch.setenv("CADRE_MEMORY_PROVIDER_MODEL", "fake-summary-model")
        monkeypatch.setenv("CADRE_MEMORY_PROVIDER_API_KEY", "sk-test-key")
        runs = talk(bob, compact_agent, CONVERSATION[:5])
    finally:
        server.close()
    summary = SessionSummary.objects.filter(session=runs[0].session).latest("created_at")
    assert summary.method == "model:fake-summary-model"
    assert [item["label"] for item in summary.items] == ["user_requirement", "superseded_plan"]
    assert summary.items[0]["text"] == "Weekly reports are written in bullet points."
    assert set(summary.items[0]["turn_ids"]) <= set(summary.covered_run_ids)
    assert "summarised by model:fake-summary-model" in summary.text
    asked = [r for r in server.requests if r["body"]["messages"][0]["content"] == SUMMARY_PROMPT]
    assert asked and "TURN " in asked[0]["body"]["messages"][1]["content"]
