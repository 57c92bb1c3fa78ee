"""The first start's model provider from the environment: created through the agents service
with its key encrypted, used by the demo templates, answering through a loopback fake server."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import connection

from cadre.agents.models import AgentTemplate, ModelProviderConfig, Run
from cadre.agents.runtime.lifecycle import execution as engine
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.governance.models import AuditEvent
from cadre.runtime.default_provider import provider_from_env
from cadre.runtime.demo import demo_setup, describe
from cadre.tenancy.actors import member_actor
from cadre.tenancy.models import Organization
from tests.agents.fake_models import FakeModelServer


def test_no_variable_means_no_provider():
    assert provider_from_env() is None


def test_openai_and_anthropic_keys_name_their_providers(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-1")
    chosen = provider_from_env()
    assert (chosen.kind, chosen.base_url, chosen.api_key) == (
        "anthropic",
        "https://api.anthropic.com",
        "sk-ant-1",
    )
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-1")
    monkeypatch.setenv("CADRE_MODEL_NAME", "gpt-4.1-mini")
    chosen = provider_from_env()  # OpenAI first when both are set
    assert (chosen.kind, chosen.base_url, chosen.model) == (
        "openai_compatible",
        "https://api.openai.com/v1",
        "gpt-4.1-mini",
    )


@pytest.mark.parametrize(
    ("variables", "named"),
    [
        ({"CADRE_MODEL_BASE_URL": "http://127.0.0.1:11434/v1"}, "CADRE_MODEL_NAME"),
        ({"CADRE_MODEL_API_KEY": "sk-1"}, "CADRE_MODEL_API_KEY"),
        ({"CADRE_MODEL_BASE_URL": "not a url", "CADRE_MODEL_NAME": "m"}, "CADRE_MODEL_BASE_URL"),
    ],
)
@pytest.mark.django_db
def test_an_incomplete_setting_stops_the_first_start_naming_the_variable(
    monkeypatch, variables, named
):
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ImproperlyConfigured, match=rf"^{named}: "):
        demo_setup()
    assert not Organization.objects.exists()


@pytest.mark.django_db
def test_the_demo_agent_answers_through_the_provider_the_environment_names(monkeypatch):
    with FakeModelServer([{"text": "Hello from the fake model."}]) as server:
        monkeypatch.setenv("CADRE_MODEL_BASE_URL", server.base_url)
        monkeypatch.setenv("CADRE_MODEL_API_KEY", "sk-demo-secret-77")
        monkeypatch.setenv("CADRE_MODEL_NAME", "demo-model")
        monkeypatch.setenv("CADRE_DEMO_PASSWORD", "a-long-demo-passphrase-42")
        account = demo_setup()

        provider = ModelProviderConfig.objects.get(organization=account.organization)
        assert account.provider == provider
        assert (provider.kind, provider.base_url, provider.default_model) == (
            "openai_compatible",
            server.base_url,
            "demo-model",
        )
        assert provider.api_key == "sk-demo-secret-77"
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT api_key FROM agents_modelproviderconfig WHERE id = %s", [provider.pk]
            )
            assert "sk-demo-secret-77" not in cursor.fetchone()[0]  # encrypted at rest
        created = AuditEvent.objects.get(
            organization=account.organization, action="provider.create"
        )
        assert "sk-demo-secret-77" not in str(created.changes)
        for template in AgentTemplate.objects.filter(organization=account.organization):
            settings = template.versions.get().model_settings
            assert settings["provider_config"] == provider.pk
            assert settings["model"] == "demo-model"
        assert "answer through Default model (demo-model)" in "\n".join(describe(account))

        agent = account.seed.agent
        run = runtime.run_start(actor=member_actor(agent.member), agent=agent, text="Who are you?")
        assert engine.run_execute(run.pk) == Run.Status.COMPLETED
        run.refresh_from_db()
        assert run.output["text"] == "Hello from the fake model."
        request = server.requests[-1]
        assert request["headers"]["authorization"] == "Bearer sk-demo-secret-77"
        assert request["body"]["model"] == "demo-model"
        assert request["body"]["messages"][-1]["content"] == "Who are you?"
