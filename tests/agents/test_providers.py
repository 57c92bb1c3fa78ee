"""Provider adapters against loopback fake servers (OpenAI-compatible and Anthropic wire
formats, tool calls and streaming), the offline provider, and provider use inside a run."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest
from django.db import connection

from cadre.agents import services
from cadre.agents.models import Run
from cadre.agents.runtime.lifecycle import execution as engine
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.agents.runtime.records import crashpoints
from cadre.governance.models import AuditEvent
from cadre.llm import ToolCall
from cadre.llm.anthropic import AnthropicProvider
from cadre.llm.metering import uncharged
from cadre.llm.offline import OfflineProvider
from cadre.llm.openai_compatible import OpenAICompatibleProvider
from cadre.tenancy.actors import member_actor
from tests.agents.conftest import publish
from tests.agents.fake_models import FakeModelServer


@pytest.fixture(autouse=True)
def _adapter_calls_name_no_account():
    """These tests call the adapters themselves, outside any account."""
    with uncharged():
        yield


TOOLS = [
    {
        "name": "task_create",
        "description": "Create a task",
        "parameters": {
            "type": "object",
            "properties": {"title": {"type": "string"}},
            "required": ["title"],
        },
    }
]
MESSAGES = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "remind me to call ACME"},
]


def test_openai_compatible_tool_call_and_request_shape():
    script = [{"tool_calls": [{"name": "task_create", "arguments": {"title": "call ACME"}}]}]
    with FakeModelServer(script) as server:
        provider = OpenAICompatibleProvider(
            model="qwen-test",
            base_url=server.base_url,
            api_key="sk-test",
            parameters={"temperature": 0.1},
        )
        result = provider.chat(MESSAGES, TOOLS)
    assert result.tool_calls == [
        ToolCall(id="call_0", name="task_create", arguments={"title": "call ACME"})
    ]
    assert (result.usage.input_tokens, result.usage.output_tokens) == (11, 7)
    request = server.requests[0]
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["authorization"] == "Bearer sk-test"
    assert request["body"]["model"] == "qwen-test" and request["body"]["temperature"] == 0.1
    assert request["body"]["tools"][0] == {"type": "function", "function": TOOLS[0]}
    assert request["body"]["messages"][0] == {"role": "system", "content": "You are terse."}


def test_openai_compatible_streaming_text_and_tool_calls():
    script = [
        {"text": "Hello there, friend."},
        {"tool_calls": [{"name": "task_create", "arguments": {"title": "a longer title"}}]},
    ]
    deltas: list[str] = []
    with FakeModelServer(script) as server:
        provider = OpenAICompatibleProvider(model="m", base_url=server.base_url)
        result = provider.chat(MESSAGES, TOOLS, stream=True, on_delta=deltas.append)
        second = provider.chat(MESSAGES, TOOLS, stream=True)
    assert len(deltas) > 1 and "".join(deltas) == "Hello there, friend." == result.text
    assert result.usage.output_tokens == 7 and result.finish_reason == "stop"
    assert second.tool_calls[0].arguments == {"title": "a longer title"}
    assert server.requests[0]["body"]["stream"] is True
    assert server.requests[0]["body"]["stream_options"] == {"include_usage": True}


def test_openai_messages_round_trip_tool_results():
    history = [
        *MESSAGES,
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "call_0", "name": "task_create", "arguments": {"title": "x"}}],
        },
        {
            "role": "tool",
            "tool_call_id": "call_0",
            "name": "task_create",
            "content": '{"task_id": 1}',
        },
    ]
    with FakeModelServer([{"text": "Done."}]) as server:
        OpenAICompatibleProvider(model="m", base_url=server.base_url).chat(history, TOOLS)
    sent = server.requests[0]["body"]["messages"]
    assert sent[2]["tool_calls"][0]["function"] == {
        "name": "task_create",
        "arguments": '{"title": "x"}',
    }
    assert sent[3] == {"role": "tool", "tool_call_id": "call_0", "content": '{"task_id": 1}'}


def test_anthropic_tool_use_and_request_shape():
    script = [
        {
            "text": "Creating it.",
            "tool_calls": [{"name": "task_create", "arguments": {"title": "call ACME"}}],
        }
    ]
    with FakeModelServer(script) as server:
        provider = AnthropicProvider(
            model="claude-test", base_url=server.root_url, api_key="ak-test"
        )
        result = provider.chat(MESSAGES, TOOLS)
    assert result.text == "Creating it."
    assert result.tool_calls == [
        ToolCall(id="toolu_0", name="task_create", arguments={"title": "call ACME"})
    ]
    assert (result.usage.input_tokens, result.usage.output_tokens) == (13, 9)
    request = server.requests[0]
    assert request["path"] == "/v1/messages"
    # anthropic 2.x sends the key as a bearer token (1.x used x-api-key).
    assert "ak-test" in (
        request["headers"].get("x-api-key", "") + request["headers"].get("authorization", "")
    )
    assert request["body"]["system"] == "You are terse."
    assert request["body"]["tools"][0]["input_schema"] == TOOLS[0]["parameters"]
    assert request["body"]["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "remind me to call ACME"}]}
    ]


def test_anthropic_streaming_text_and_tool_use():
    script = [
        {"text": "Streaming answer here."},
        {"tool_calls": [{"name": "task_create", "arguments": {"title": "streamed"}}]},
    ]
    deltas: list[str] = []
    with FakeModelServer(script) as server:
        provider = AnthropicProvider(model="c", base_url=server.root_url)
        result = provider.chat(MESSAGES, TOOLS, stream=True, on_delta=deltas.append)
        second = provider.chat(MESSAGES, TOOLS, stream=True)
    assert len(deltas) > 1 and "".join(deltas) == "Streaming answer here." == result.text
    assert result.usage.output_tokens == 9
    assert second.tool_calls[0].name == "task_create"
    assert second.tool_calls[0].arguments == {"title": "streamed"}
    assert second.finish_reason == "tool_use"


def test_anthropic_merges_tool_results_into_one_user_turn():
    from cadre.llm.anthropic import to_anthropic

    system, messages = to_anthropic(
        [
            *MESSAGES,
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"id": "a", "name": "t", "arguments": {}},
                    {"id": "b", "name": "t", "arguments": {}},
                ],
            },
            {"role": "tool", "tool_call_id": "a", "name": "t", "content": "1"},
            {"role": "tool", "tool_call_id": "b", "name": "t", "content": "2"},
        ]
    )
    assert system == "You are terse."
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert [b["tool_use_id"] for b in messages[2]["content"]] == ["a", "b"]


def test_offline_provider_is_deterministic_labelled_and_rule_based():
    provider = OfflineProvider(model="offline-1")
    tools = [{"name": "im_send", "parameters": {}}, {"name": "task_create", "parameters": {}}]
    messages = [
        {"role": "system", "content": "# SOP\nRefunds need a manager's approval."},
        {"role": "user", "content": "send the report is late to Alice and Bob"},
    ]
    first = provider.chat(messages, tools)
    assert first.tool_calls[0].name == "im_send"
    assert first.tool_calls[0].arguments == {"to": ["Alice", "Bob"], "text": "the report is late"}
    assert provider.chat(messages, tools).tool_calls == first.tool_calls
    answer = provider.chat(
        [messages[0], {"role": "user", "content": "who approves refunds?"}], tools
    )
    assert answer.text.startswith("Offline model: ") and "manager's approval" in answer.text
    # A tool the run does not offer is never called.
    assert not provider.chat(messages, [{"name": "task_create"}]).tool_calls


def test_offline_reply_says_what_it_is_what_it_retrieved_and_where_to_configure_a_model():
    provider = OfflineProvider(model="offline-1")
    system = {
        "role": "system",
        "content": "# Standard operating procedure (SOP)\n## Refunds\n"
        "- Refunds above 500 EUR need a manager's approval.\n"
        "# Relevant memories\n- [agent:1#7] The Lisbon office ships orders on Tuesdays.\n"
        "- [user:3#12] Dana prefers invoices as PDF.",
    }
    refunds = provider.chat([system, {"role": "user", "content": "Who approves refunds?"}])
    assert refunds.text.startswith("Offline model: no language model is configured. ")
    assert "Retrieved for this request: SOP: “Refunds above 500 EUR need a manager's" in (
        refunds.text
    )
    assert refunds.text.endswith("Configure a model under Models.")
    assert "Who approves refunds?" in refunds.text  # what a model would answer
    # A second, different question in the same conversation: a different, relevant reply
    # that does not repeat the first.
    shipping = provider.chat(
        [
            system,
            {"role": "user", "content": "Who approves refunds?"},
            {"role": "assistant", "content": refunds.text},
            {"role": "user", "content": "When does the Lisbon office ship orders?"},
        ]
    )
    assert "memory: “The Lisbon office ships orders on Tuesdays.”" in shipping.text
    assert "manager's approval" not in shipping.text and refunds.text not in shipping.text
    for reply in (refunds.text, shipping.text):
        assert not re.search(r"\[[a-z_]+(:\d+)?#\d*\]", reply), reply
        assert "[agent:" not in reply and "[offline model]" not in reply
    # A summary of the earlier conversation (a system message) is not quoted back either.
    summary = {
        "role": "system",
        "content": "Summary of the earlier conversation (turn 1).\n- [answer] " + refunds.text,
    }
    again = provider.chat([system, summary, {"role": "user", "content": "Who approves refunds?"}])
    assert again.text.count("Retrieved for this request") == 1
    nothing = provider.chat([system, {"role": "user", "content": "What is the capital of Peru?"}])
    assert "nothing in this agent's SOP, USER.md, skills or memories matches" in nothing.text
    assert "capital of Peru" in nothing.text and nothing.text != refunds.text


# --- inside a run ---------------------------------------------------------------------------


@pytest.mark.django_db
def test_run_with_openai_compatible_provider_denies_a_tool_not_allowed(owner, sales, alice, bob):
    with FakeModelServer(
        [
            {"tool_calls": [{"name": "http_request", "arguments": {"url": "http://evil.test/x"}}]},
            {"text": "I could not fetch it."},
        ]
    ) as server:
        config = services.provider_config_create(
            actor=owner,
            name="vLLM",
            kind="openai_compatible",
            base_url=server.base_url,
            api_key="sk-secret-123",
            default_model="qwen",
            prices={"input": "2", "output": "6"},
        )
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT api_key FROM agents_modelproviderconfig WHERE id = %s", [config.pk]
            )
            assert "sk-secret-123" not in cursor.fetchone()[0]  # encrypted at rest
        template = services.template_create(
            actor=owner,
            name="Ops",
            code="ops",
            model_settings={
                "provider": "openai_compatible",
                "provider_config": config.pk,
                "model": "qwen",
            },
            tool_permissions={"task_create": {"risk": "low", "confirmation": "never"}},
            hooks={"assemble_context": [{"name": "memory_retrieval", "enabled": False}]},
        )
        publish(owner, template.versions.get())
        bob.positions.add(sales)
        deployment = services.deployment_create(
            actor=owner, name="Ops", template=template, members=[bob]
        )
        agent = deployment.agents.get()
        run = runtime.run_start(actor=member_actor(bob), agent=agent, text="fetch it")
        assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    run.refresh_from_db()
    assert run.output["text"] == "I could not fetch it."
    assert server.requests[0]["headers"]["authorization"] == "Bearer sk-secret-123"
    tool_message = server.requests[1]["body"]["messages"][-1]
    assert tool_message["role"] == "tool" and '"error": "denied"' in tool_message["content"]
    denied = AuditEvent.objects.get(action="tool.denied")
    assert denied.changes["tool"] == "http_request" and denied.trace_id == run.trace_id
    # Usage and cost: two calls of 11 in / 7 out at 2 and 6 per million tokens.
    assert (run.tokens_in, run.tokens_out) == (22, 14)
    assert run.cost == Decimal("0.000128")


@pytest.mark.django_db
def test_model_call_crash_calls_the_model_again_but_no_step_twice(owner, alice, bob):
    with FakeModelServer(
        [
            {"tool_calls": [{"name": "task_create", "arguments": {"title": "x"}}]},
            {"tool_calls": [{"name": "task_create", "arguments": {"title": "x"}}]},
            {"text": "done"},
        ]
    ) as server:
        config = services.provider_config_create(
            actor=owner, name="m", kind="openai_compatible", base_url=server.base_url
        )
        template = services.template_create(
            actor=owner,
            name="T",
            code="t",
            model_settings={"provider_config": config.pk, "model": "m"},
            tool_permissions={"task_create": {}},
            hooks={"assemble_context": [{"name": "memory_retrieval", "enabled": False}]},
        )
        publish(owner, template.versions.get())
        agent = services.deployment_create(
            actor=owner, name="T", template=template, members=[bob]
        ).agents.get()
        run = runtime.run_start(actor=member_actor(bob), agent=agent, text="go")
        with crashpoints.crash_after("model_call"), pytest.raises(crashpoints.SimulatedCrash):
            engine.run_execute(run.pk)
        assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    # The interrupted model call was made again (model calls have no side effects) …
    assert len(server.requests) == 3
    # … and the task it asked for was created once.
    from cadre.agents.models import AgentTask

    assert AgentTask.objects.count() == 1
