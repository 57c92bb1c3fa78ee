"""Tool results as a person reads them (`cadre.llm.tool_sentences`): the offline model's reply
and the web chat say what happened in a sentence, never the result's JSON, ids or scope keys."""

from __future__ import annotations

import json

import pytest

from cadre.llm.offline import LABEL, OfflineProvider
from cadre.llm.tool_sentences import failure_sentence, request_sentence, tool_sentence

NO_CONNECTOR = "no connector for channel 'console': the organization has no active IM connector"


@pytest.mark.parametrize(
    ("tool", "result", "sentence"),
    [
        ("memory_write", {"memory_id": 12, "scope": "user:2"}, "Remembered this for you."),
        ("memory_write", {"memory_id": 3, "scope": "agent:1"}, "Remembered this."),
        (
            "memory_write",
            {"memory_id": 4, "scope": "department:7"},
            "Remembered this for your department.",
        ),
        (
            "im_send",
            {"message_id": 5, "recipients": [{"group": "all-staff", "people": 12}], "status": "ok"},
            "Sent to 12 people in All staff.",
        ),
        (
            "im_send",
            {
                "message_id": 6,
                "recipients": [{"member": 2, "name": "Alice"}, {"member": 3, "name": "Bob"}],
                "status": "queued",
            },
            "Sending to Alice and Bob.",
        ),
        (
            "im_send",
            {"message_id": 7, "recipients": [], "status": "failed", "reason": NO_CONNECTOR},
            "Could not send: no IM connector is set up.",
        ),
        (
            "im_send",
            {"error": "undeliverable", "message": NO_CONNECTOR},
            "Could not send: no IM connector is set up.",
        ),
        (
            "task_create",
            {"task_id": 9, "title": "call ACME", "due_at": None},
            "Added a task: call ACME.",
        ),
        ("http_request", {"status": 200, "body": "<html>"}, "Fetched it (the site answered 200)."),
        (
            "http_request",
            {"status": 200, "body": '{"colour":\n "green"}'},
            "Fetched it (the site answered 200): colour: green",
        ),
        ("await_event", {"event": {"timeout": True}}, "Waited, but the event did not come in time"),
        ("some_mcp_tool", {"rows": [1, 2]}, "Done: some_mcp_tool."),
        ("some_mcp_tool", {"text": "3 open tickets"}, "some_mcp_tool: 3 open tickets"),
    ],
)
def test_a_tool_result_reads_as_a_sentence(tool, result, sentence):
    said = tool_sentence(tool, result)
    assert said.startswith(sentence)
    assert "{" not in said and "_id" not in said


def test_a_reason_names_what_a_person_can_act_on():
    assert failure_sentence("im_send", "no connector knows group 'sales-team': name it") == (
        "Could not send: no IM connector knows the group Sales team."
    )
    assert failure_sentence("memory_write", "a question is not remembered") == (
        "Could not remember this: a question is not remembered."
    )


def test_the_offline_reply_after_a_tool_call_is_the_sentence():
    messages = [
        {"role": "user", "content": "remember that I prefer tea"},
        {"role": "assistant", "content": "", "tool_calls": []},
        {
            "role": "tool",
            "name": "memory_write",
            "content": json.dumps({"memory_id": 12, "scope": "user:2"}),
        },
    ]
    reply = OfflineProvider(model="offline-1").decide(messages, []).text
    assert reply == f"{LABEL} Remembered this for you."


def test_a_request_to_confirm_reads_as_a_sentence():
    assert request_sentence("im_send", {"to": ["group:all-staff"], "text": "hello"}) == (
        "Send “hello” to All staff."
    )
    assert request_sentence("task_create", {"title": "call the supplier"}) == (
        "Create the task “call the supplier”."
    )
    assert request_sentence("some_mcp_tool", {"query": "x"}) == ""
