"""Memory's model is a provider configuration like any other, called through `cadre.llm`:
CADRE_MEMORY_PROVIDER_* picks it; the deprecated CADRE_MEMORY_LLM_* still work, with a warning."""

from __future__ import annotations

import json
import logging

import pytest
from django.core.exceptions import ImproperlyConfigured

from cadre.llm import PROVIDERS, ChatResult, ModelProvider
from cadre.memory import dedup, extraction, services
from cadre.memory.services import feedback
from tests.memory.conftest import FakeModelServer, actor

ANSWER = {"memories": [{"kind": "preference", "content": "Bob wants tables", "confidence": 0.7}]}


class RecordingProvider(ModelProvider):
    """A registered provider kind that answers with ANSWER and keeps what it was asked."""

    kind = "recording"
    calls: list[dict] = []

    def complete(self, messages, tools, **params):
        RecordingProvider.calls.append({"messages": messages, "params": params})
        return ChatResult(text=json.dumps(ANSWER), model=self.model)


@pytest.fixture
def recording(monkeypatch):
    RecordingProvider.calls = []
    monkeypatch.setenv("CADRE_MEMORY_PROVIDER_KIND", "recording")
    monkeypatch.setenv("CADRE_MEMORY_PROVIDER_MODEL", "recorder-1")
    with PROVIDERS.overridden({"recording": RecordingProvider}):
        yield RecordingProvider.calls


@pytest.fixture
def legacy_warnings(caplog):
    extraction._warn_legacy.cache_clear()
    caplog.set_level(logging.WARNING, logger="cadre.memory.extraction")
    yield caplog
    extraction._warn_legacy.cache_clear()


def test_extraction_goes_through_the_registered_provider(bob, recording):
    result = services.memory_add_from_messages(
        actor=actor(bob), messages=[{"role": "user", "content": "Tables please"}]
    )
    assert result.extractor == "model"
    assert [(m.content, m.attributes.get("model")) for m in result.memories] == [
        ("Bob wants tables", "recorder-1")
    ]
    (call,) = recording
    assert call["messages"][0]["role"] == "system"
    assert "Tables please" in call["messages"][1]["content"]
    assert call["params"] == {"temperature": 0, "response_format": {"type": "json_object"}}


def test_dedup_judge_and_feedback_use_the_same_provider(recording):
    judge = dedup.judge()
    assert isinstance(judge, dedup.FallbackJudge)
    assert isinstance(judge.primary.model, RecordingProvider)
    assert isinstance(extraction.memory_model(), RecordingProvider)
    assert feedback.memory_model is extraction.memory_model


def test_no_configuration_means_rules(monkeypatch):
    for name in ("CADRE_MEMORY_PROVIDER_KIND", *extraction.LEGACY_VARIABLES):
        monkeypatch.delenv(name, raising=False)
    assert extraction.memory_model() is None
    assert isinstance(extraction.extractor(), extraction.RuleExtractor)
    assert isinstance(dedup.judge(), dedup.RuleJudge)


def test_unknown_provider_kind_is_a_configuration_error(monkeypatch):
    monkeypatch.setenv("CADRE_MEMORY_PROVIDER_KIND", "nonsense")
    with pytest.raises(ImproperlyConfigured, match="CADRE_MEMORY_PROVIDER_KIND"):
        extraction.memory_model()


def test_old_variables_still_work_and_warn(bob, monkeypatch, legacy_warnings):
    monkeypatch.delenv("CADRE_MEMORY_PROVIDER_KIND", raising=False)
    server = FakeModelServer(lambda body: ANSWER)
    try:
        monkeypatch.setenv("CADRE_MEMORY_LLM_BASE_URL", server.base_url)
        monkeypatch.setenv("CADRE_MEMORY_LLM_MODEL", "legacy-model")
        monkeypatch.setenv("CADRE_MEMORY_LLM_API_KEY", "sk-legacy")
        result = services.memory_add_from_messages(
            actor=actor(bob), messages=[{"role": "user", "content": "Tables please"}]
        )
    finally:
        server.close()
    assert result.extractor == "model"
    assert [m.content for m in result.memories] == ["Bob wants tables"]
    request = server.requests[0]
    assert request["body"]["model"] == "legacy-model"
    assert request["authorization"] == "Bearer sk-legacy"
    (record,) = [r for r in legacy_warnings.records if "deprecated" in r.getMessage()]
    message = record.getMessage()
    assert record.levelno == logging.WARNING
    assert "CADRE_MEMORY_LLM_BASE_URL" in message and "CADRE_MEMORY_PROVIDER_KIND" in message
    assert "ignored" not in message


def test_new_configuration_wins_when_both_are_set(bob, monkeypatch, recording, legacy_warnings):
    server = FakeModelServer(lambda body: {"memories": []})
    try:
        monkeypatch.setenv("CADRE_MEMORY_LLM_BASE_URL", server.base_url)
        monkeypatch.setenv("CADRE_MEMORY_LLM_MODEL", "legacy-model")
        result = services.memory_add_from_messages(
            actor=actor(bob), messages=[{"role": "user", "content": "Tables please"}]
        )
    finally:
        server.close()
    assert [m.content for m in result.memories] == ["Bob wants tables"]
    assert len(recording) == 1 and server.requests == []
    (record,) = [r for r in legacy_warnings.records if "deprecated" in r.getMessage()]
    assert "ignored because CADRE_MEMORY_PROVIDER_KIND is set" in record.getMessage()
