"""A question states nothing: extraction never writes one (any extractor, English and Chinese),
and the dedup funnel never lets a question merge with, update or archive a statement."""

from __future__ import annotations

import pytest

from cadre.memory import services
from cadre.memory.extraction import Candidate
from cadre.memory.models import Memory, MemoryTask
from cadre.memory.statements import is_question
from tests.memory.conftest import actor


@pytest.mark.parametrize(
    "text",
    [
        "What format do I like for weekly reports?",
        "What format do I like for weekly reports",
        "Which format do I prefer?",
        "Do I always send the report on Friday",
        "Can you tell me what format I like?",
        "我喜欢什么格式的周报？",
        "我喜欢什么格式的周报",
        "你知道我喜欢什么格式吗",
        "请问周报用哪种格式",
        "我是否喜欢要点",
    ],
)
def test_questions_are_questions(text):
    assert is_question(text)


@pytest.mark.parametrize(
    "text",
    [
        "I prefer bullet points for weekly reports.",
        "What I like is bullet points",
        "When the report is late, tell Li Wei",
        "Could you always send PDFs from now on?",  # a request: a requirement
        "以后能不能都用英文回复？",  # a request too
        "记住：我喜欢用中文的要点形式写周报",
        "我不怎么喜欢PPT",
        "我什么都吃",
        "哪怕再忙也要周五发周报",
        "报告什么的都用中文写",
        "Don't send PDFs on Fridays",
        "I like bullet points. What do you think?",  # it states something
    ],
)
def test_statements_and_requests_are_not_questions(text):
    assert not is_question(text)


class Proposes:
    """An extractor proposing fixed candidates (as a model might)."""

    name = "model"

    def __init__(self, *contents):
        self.contents = contents

    def extract(self, messages):
        return [Candidate(kind="preference", content=text) for text in self.contents]


@pytest.mark.parametrize(
    "text", ["Which format do I prefer for weekly reports?", "我喜欢什么格式的周报？"]
)
def test_extraction_never_writes_a_question_by_rules(bob, text):
    written = services.memory_add_from_messages(
        actor=actor(bob), messages=[{"role": "user", "content": text}]
    )
    assert list(written) == []
    assert not Memory.objects.exists()


def test_extraction_never_writes_a_question_a_model_proposes(bob):
    written = services.memory_add_from_messages(
        actor=actor(bob),
        messages=[{"role": "user", "content": "What format do I like for weekly reports?"}],
        extractor=Proposes("What format do I like for weekly reports?", "我喜欢什么格式的周报？"),
    )
    assert list(written) == []
    assert not Memory.objects.exists()


def test_extraction_skips_what_the_turn_already_stored(bob):
    written = services.memory_add_from_messages(
        actor=actor(bob),
        messages=[
            {
                "role": "user",
                "content": "Remember that I prefer bullet points. From now on, cc Li Wei.",
            }
        ],
        already_written=["I prefer bullet points."],
    )
    assert [memory.content for memory in written] == ["From now on, cc Li Wei."]


@pytest.mark.parametrize(
    "statement, question",
    [
        ("我喜欢用中文的要点形式写周报", "我喜欢什么格式的周报？"),
        ("I prefer bullet points for weekly reports", "Do I prefer bullet points for reports?"),
    ],
)
def test_a_question_stored_through_the_api_never_supersedes_a_statement(
    bob, run_async, statement, question
):
    def add(content):
        return services.memory_add(
            actor=actor(bob),
            scope="user",
            kind="preference",
            source_kind="user_statement",
            content=content,
        )

    with run_async():
        stated = add(statement)
    with run_async():
        asked = add(question)

    stated.refresh_from_db()
    asked.refresh_from_db()
    assert stated.status == Memory.Status.ACTIVE and stated.superseded_by_id is None
    assert asked.superseded_by_id is None
    result = MemoryTask.objects.get(memory=asked, kind="dedup").result
    assert result["decision"] == "new" and result["candidates"] == []
