"""bench/memory_qa.py end to end: a one-conversation LoCoMo-format file, Cadre's retrieval on
the test database (memory_retrieval's loader), and loopback fake OpenAI-compatible servers as
the answer and judge models."""

from __future__ import annotations

import json

import pytest

from bench import memory_qa
from tests.agents.fake_models import FakeModelServer, closed_port

TURNS_1 = [
    ("Caroline", "D1:1", "I went to the pottery class at the community center yesterday."),
    ("Melanie", "D1:2", "Nice! My kids and I are planning a camping trip to the lake."),
    ("Caroline", "D1:3", "My grandmother gave me a silver necklace from Sweden."),
    ("Melanie", "D1:4", "I still play the violin every Sunday morning."),
]
TURNS_2 = [
    ("Caroline", "D2:1", "The adoption agency called me back about the interview."),
    ("Melanie", "D2:2", "We finally went camping at the lake last weekend, it rained."),
    ("Caroline", "D2:3", "I painted a sunrise over the harbour for my new flat."),
    ("Melanie", "D2:4", "My daughter started learning the piano this month."),
]
QUESTIONS = [
    {
        "question": "What instrument does Melanie play?",
        "answer": "violin",
        "evidence": ["D1:4"],
        "category": 4,
    },
    {
        "question": "When did Melanie go camping at the lake?",
        "answer": "The weekend before 20 June 2023",
        "evidence": ["D2:2"],
        "category": 2,
    },
    # skipped: category 5, and a question without evidence
    {"question": "What did Caroline sell?", "adversarial_answer": "x", "category": 5},
    {"question": "Who is Caroline?", "answer": "a friend", "evidence": [], "category": 1},
]


def _conversation() -> dict:
    return {
        "sample_id": "conv-test",
        "conversation": {
            "speaker_a": "Caroline",
            "speaker_b": "Melanie",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [{"speaker": s, "dia_id": d, "text": t} for s, d, t in TURNS_1],
            "session_2_date_time": "10:30 am on 20 June, 2023",
            "session_2": [{"speaker": s, "dia_id": d, "text": t} for s, d, t in TURNS_2],
        },
        "qa": QUESTIONS,
    }


def _chats(server) -> list[str]:
    """The user messages of the chat completions the server received, in order."""
    return [
        next(m["content"] for m in r["body"]["messages"] if m["role"] == "user")
        for r in server.requests
        if r["path"] == "/v1/chat/completions"
    ]


def _args(data, answer_url, judge_url, *extra) -> list[str]:
    return [
        "--data",
        str(data),
        "--answer-base-url",
        answer_url,
        "--answer-model",
        "fake-chat",
        "--answer-api-key",
        "sk-answer",
        "--judge-base-url",
        judge_url,
        "--judge-model",
        "fake-large",
        "--judge-api-key",
        "sk-judge",
        "--workers",
        "1",  # the fakes answer from a script, in order
        *extra,
    ]


@pytest.mark.django_db
def test_cadre_and_full_history_are_answered_judged_and_reported(tmp_path, capsys):
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([_conversation()]), encoding="utf-8")
    out = tmp_path / "qa.json"
    answers = [
        {"text": "The violin."},  # cadre, instrument
        {"text": "In March 2021."},  # cadre, camping
        {"text": "Violin"},  # full, instrument
        {"text": "Mid June 2023"},  # full, camping
    ]
    verdicts = [{"text": "CORRECT"}, {"text": "WRONG"}, {"text": "correct"}, {"text": "Maybe?"}]
    with (
        FakeModelServer(answers, api_key="sk-answer") as answer,
        FakeModelServer(verdicts, api_key="sk-judge") as judge,
    ):
        status = memory_qa.main(
            _args(data, answer.base_url, judge.base_url, "--top-k", "2", "--json", str(out)),
            own_database=False,
        )
    captured = capsys.readouterr()
    assert status == 0, captured.err
    lines = captured.out.splitlines()

    # The header pins the models.
    assert any("answer_model=fake-chat" in line for line in lines)
    assert any("judge_model=fake-large" in line for line in lines)

    # The answer model got the retrieved memories (top 2, dated), not the whole conversation.
    sent = _chats(answer)
    assert len(sent) == 4
    cadre_first = sent[0]
    assert "What instrument does Melanie play?" in cadre_first
    assert "I still play the violin every Sunday morning." in cadre_first
    assert "[8 May 2023]" in cadre_first
    assert sum(text in cadre_first for _, _, text in TURNS_1 + TURNS_2) == 2
    # The full-history method sent every turn of the conversation, with the sessions' dates.
    for full in sent[2:]:
        assert all(text in full for _, _, text in TURNS_1 + TURNS_2)
        assert "8 May 2023" in full and "20 June 2023" in full

    # The judge was given the question, the gold answer and the model's answer.
    graded = _chats(judge)
    assert len(graded) == 4
    assert "violin" in graded[0] and "The violin." in graded[0]
    assert "The weekend before 20 June 2023" in graded[1] and "In March 2021." in graded[1]

    # Verdicts become accuracy, overall and per category (numbers and names).
    cadre = next(line for line in lines if line.startswith("cadre accuracy="))
    assert "accuracy=0.500 correct=1/2 unparsed=0" in cadre
    assert "recall@2=1.000" in cadre
    assert "cadre category=4 single-hop accuracy=1.000 correct=1/1 recall@2=1.000" in lines
    assert "cadre category=2 temporal accuracy=0.000 correct=0/1 recall@2=1.000" in lines
    assert "cadre category=1 multi-hop accuracy=- correct=0/0 recall@2=-" in lines
    assert "cadre category=3 open-domain accuracy=- correct=0/0 recall@2=-" in lines
    # A judge reply that is neither CORRECT nor WRONG counts as wrong, and is reported.
    full = next(line for line in lines if line.startswith("full accuracy="))
    assert "accuracy=0.500 correct=1/2 unparsed=1" in full
    assert "recall@2=-" in full and "retrieval_p50_ms=0.0 retrieval_p95_ms=0.0" in full
    assert "full category=2 temporal accuracy=0.000 correct=0/1 recall@2=-" in lines
    assert "'Maybe?'" in captured.err and "counted wrong" in captured.err
    # The whole conversation is a bigger context than two memories.
    tokens = {
        line.split()[0]: int(line.split("context_tokens=")[1].split()[0]) for line in (cadre, full)
    }
    assert 0 < tokens["cadre"] < tokens["full"]

    records = json.loads(out.read_text(encoding="utf-8"))["records"]
    assert [(r["method"], r["verdict"]) for r in records] == [
        ("cadre", "CORRECT"),
        ("cadre", "WRONG"),
        ("full", "CORRECT"),
        ("full", "UNPARSED"),
    ]
    first = records[0]
    assert first["question"] == "What instrument does Melanie play?"
    assert first["gold"] == "violin" and first["answer"] == "The violin."
    assert first["context_tokens"] > 0 and first["retrieval_ms"] > 0
    assert "D1:4" in first["retrieved"]
    assert "sk-answer" not in out.read_text(encoding="utf-8")


def test_a_directory_of_conversations_and_the_full_history_alone(tmp_path, capsys):
    """bench/data/locomo-zh/ style: one conversation object per file; `--methods full` needs
    no memories."""
    folder = tmp_path / "locomo-zh"
    folder.mkdir()
    (folder / "conv-1.json").write_text(json.dumps(_conversation()), encoding="utf-8")
    with (
        FakeModelServer([{"text": "violin"}, {"text": "June"}], api_key="sk-answer") as answer,
        FakeModelServer([{"text": "CORRECT"}] * 2, api_key="sk-judge") as judge,
    ):
        status = memory_qa.main(
            _args(folder, answer.base_url, judge.base_url, "--methods", "full", "--limit", "1"),
            own_database=False,
        )
    captured = capsys.readouterr()
    assert status == 0, captured.err
    assert "full accuracy=1.000 correct=1/1 unparsed=0" in captured.out
    assert not any(line.startswith("cadre") for line in captured.out.splitlines())
    assert len(_chats(answer)) == 1


def test_an_unreachable_endpoint_is_a_clear_error(tmp_path, capsys):
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([_conversation()]), encoding="utf-8")
    nowhere = closed_port()
    status = memory_qa.main(_args(data, nowhere, nowhere), own_database=False)
    captured = capsys.readouterr()
    assert status == 2
    assert f"answer model endpoint {nowhere} unreachable" in captured.err
    assert "Traceback" not in captured.err and captured.out == ""


def test_a_refused_key_is_a_clear_error(tmp_path, capsys):
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([_conversation()]), encoding="utf-8")
    with FakeModelServer([], api_key="sk-other") as server:
        status = memory_qa.main(_args(data, server.base_url, server.base_url), own_database=False)
    captured = capsys.readouterr()
    assert status == 2
    assert "refused the API key (HTTP 401)" in captured.err
    assert "Traceback" not in captured.err
