"""Memories from messages: explicit requirements and preferences by rules (English and
Chinese), or by a model behind an OpenAI-compatible endpoint when one is configured."""

from __future__ import annotations

import pytest

from cadre.errors import InvalidInput
from cadre.memory import selectors, services
from cadre.memory.extraction import RuleExtractor
from tests.memory.conftest import actor


@pytest.mark.parametrize(
    ("text", "kind", "content"),
    [
        (
            "From now on, send me the summary in English.",
            "requirement",
            "From now on, send me the summary in English.",
        ),
        (
            "I prefer short bullet points over long paragraphs.",
            "preference",
            "I prefer short bullet points over long paragraphs.",
        ),
        ("Always attach the PDF version.", "requirement", "Always attach the PDF version."),
        ("Please remember that my manager is Li Wei.", "fact", "my manager is Li Wei."),
        (
            "Remember that I always want the numbers in USD.",
            "requirement",
            "I always want the numbers in USD.",
        ),
        ("以后周报都用英文写。", "requirement", "以后周报都用英文写。"),
        ("我更喜欢用表格展示数据", "preference", "我更喜欢用表格展示数据"),
        ("每次都要抄送给我的经理！", "requirement", "每次都要抄送给我的经理！"),
        ("请记住：我的工号是 A1024", "fact", "我的工号是 A1024"),
        ("我喜欢早上开会", "preference", "我喜欢早上开会"),
    ],
)
def test_rules_extract_explicit_statements(text, kind, content):
    [candidate] = RuleExtractor().extract([{"role": "user", "content": text}])
    assert (candidate.kind, candidate.content) == (kind, content)


def test_rules_ignore_small_talk_questions_and_the_assistant():
    messages = [
        {"role": "user", "content": "Hi! Can you check the sales numbers for May?"},
        {"role": "assistant", "content": "From now on I will always answer in English."},
        {"role": "user", "content": "好的，谢谢"},
    ]
    assert RuleExtractor().extract(messages) == []


def test_rules_split_sentences_and_keep_only_the_statements():
    text = "Thanks for the draft. From now on, cc Wang Fang on every quote. 另外，以后报价单用PDF。"
    candidates = RuleExtractor().extract([{"role": "user", "content": text}])
    assert [c.content for c in candidates] == [
        "From now on, cc Wang Fang on every quote.",
        "另外，以后报价单用PDF。",
    ]


def test_add_from_messages_writes_user_statements_with_provenance(bob):
    result = services.memory_add_from_messages(
        actor=actor(bob),
        scope="user",
        conversation_id="conv-9",
        messages=[
            {"role": "user", "id": "m1", "content": "What's on today?"},
            {"role": "assistant", "content": "Two meetings."},
            {"role": "user", "id": "m3", "content": "以后会议纪要都发到我的邮箱。"},
        ],
    )
    assert result.extractor == "rules" and result.candidates == 1
    [memory] = result  # the result is the list of memories written
    assert result.memories == [memory]
    assert memory.source_kind == "user_statement" and memory.kind == "requirement"
    assert memory.source_ref == {
        "conversation_id": "conv-9",
        "message_index": 2,
        "message_id": "m3",
    }
    assert memory.conversation_id == "conv-9"
    hits = selectors.memory_search(actor=actor(bob), query="会议纪要发到哪里").hits
    assert [hit.memory.pk for hit in hits] == [memory.pk]


def test_add_from_messages_rejects_malformed_messages(bob):
    with pytest.raises(InvalidInput):
        services.memory_add_from_messages(actor=actor(bob), messages=[{"role": "user"}])
    with pytest.raises(InvalidInput):
        services.memory_add_from_messages(actor=actor(bob), messages=[])


def test_model_extraction_is_used_when_configured(bob, fake_model):
    server = fake_model(
        lambda body: {
            "memories": [
                {
                    "kind": "preference",
                    "content": "Bob wants weekly reports in English",
                    "confidence": 0.8,
                },
                {"kind": "gossip", "content": "Bob works in Sales", "confidence": 2},
                {"kind": "fact", "content": ""},
            ]
        }
    )
    result = services.memory_add_from_messages(
        actor=actor(bob),
        conversation_id="c1",
        messages=[{"role": "user", "content": "Weekly reports in English please, I'm in Sales"}],
    )
    assert result.extractor == "model"
    assert [(m.kind, m.content, m.confidence, m.source_kind) for m in result.memories] == [
        ("preference", "Bob wants weekly reports in English", 0.8, "model_inference"),
        ("fact", "Bob works in Sales", 1.0, "model_inference"),
    ]
    body = server.requests[0]["body"]
    assert body["model"] == "fake-memory-model"
    assert body["response_format"] == {"type": "json_object"}
    assert "Weekly reports in English" in body["messages"][1]["content"]


def test_model_extraction_failure_falls_back_to_rules(bob, fake_model):
    fake_model(lambda body: ["not", "an", "object"])
    result = services.memory_add_from_messages(
        actor=actor(bob), messages=[{"role": "user", "content": "From now on, reply in Chinese."}]
    )
    assert result.extractor == "rules (model failed)"
    assert [m.content for m in result.memories] == ["From now on, reply in Chinese."]
    assert result.memories[0].source_kind == "user_statement"
