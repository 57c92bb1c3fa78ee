"""Model providers as an organization manages them: connection tests against loopback servers
(a fake OpenAI-compatible endpoint, a closed port, a wrong key, a server that never answers),
the organization's default, and a run failing fast with the endpoint's own error."""

from __future__ import annotations

import time

import pytest
from django.db import connection

from cadre.agents import providers
from cadre.agents.models import MODEL_FAILURE, ModelProviderConfig, Run, RunEvent
from cadre.agents.runtime.lifecycle import execution as engine
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.errors import Conflict, InvalidInput, NotPermitted
from cadre.governance.models import AuditEvent
from cadre.llm import ProviderError
from cadre.llm.metering import uncharged
from cadre.llm.openai_compatible import OpenAICompatibleProvider
from cadre.llm.presets import provider_presets
from cadre.tenancy.actors import member_actor
from tests.agents.fake_models import FakeModelServer, blackhole, closed_port

pytestmark = pytest.mark.django_db


def _add(owner, base_url, **fields):
    return providers.provider_config_create(
        actor=owner,
        name=fields.pop("name", "Loopback"),
        kind="openai_compatible",
        base_url=base_url,
        default_model=fields.pop("default_model", "fake-chat"),
        **fields,
    )


# --- presets -----------------------------------------------------------------------------


def test_every_preset_names_a_known_kind_and_a_note():
    presets = provider_presets()
    assert {"openai", "azure_openai", "deepseek", "dashscope", "moonshot", "zhipu"} <= set(presets)
    assert {"ollama", "vllm", "lm_studio", "anthropic", "offline"} <= set(presets)
    for preset in presets.values():
        assert preset.kind in providers.PROVIDER_KINDS and preset.note
    assert presets["deepseek"].base_url == "https://api.deepseek.com/v1"
    assert presets["dashscope"].base_url == "https://dashscope.aliyuncs.com/compatible-mode/v1"
    assert presets["ollama"].base_url == "http://localhost:11434/v1"


# --- connection test ---------------------------------------------------------------------


def test_connection_test_reports_latency_and_the_model_list(owner):
    with FakeModelServer([{"text": "ok"}], api_key="sk-right") as server:
        config = _add(owner, server.base_url, api_key="sk-right")
        report = providers.provider_config_test(actor=owner, config=config)
    assert report["ok"] is True, report
    assert report["models"] == ["fake-chat", "fake-large"]
    # Status, latency and the model list: never what the endpoint wrote.
    assert report["status"] == 200 and "reply" not in report and report["warning"] == ""
    assert "ok" not in {str(value) for key, value in report.items() if key != "ok"}
    assert isinstance(report["latency_ms"], int) and 0 <= report["latency_ms"] < 5000
    chat, listing = server.requests
    assert chat["path"] == "/v1/chat/completions" and chat["body"]["max_tokens"] == 16
    assert listing["path"] == "/v1/models"
    assert chat["headers"]["authorization"] == "Bearer sk-right"


def test_connection_test_warns_when_the_model_is_not_listed(owner):
    with FakeModelServer([{"text": "ok"}]) as server:
        config = _add(owner, server.base_url, default_model="gpt-9")
        report = providers.provider_config_test(actor=owner, config=config)
    assert report["ok"] is True
    assert report["warning"].startswith("model not found: 'gpt-9' is not among the 2 models")


def test_connection_test_on_a_closed_port_says_the_host_cannot_be_reached(owner):
    config = _add(owner, closed_port())
    started = time.monotonic()
    report = providers.provider_config_test(actor=owner, config=config)
    assert time.monotonic() - started < 5
    assert report["ok"] is False and report["reason"] == "unreachable"
    host = config.base_url.split("//")[1].split("/")[0]
    assert report["error"].startswith(f"could not reach host {host}")
    assert report["latency_ms"] is None and report["models"] is None


def test_connection_test_with_a_wrong_key_says_401_from_provider(owner):
    with FakeModelServer([{"text": "ok"}], api_key="sk-right") as server:
        config = _add(owner, server.base_url, api_key="sk-wrong")
        report = providers.provider_config_test(actor=owner, config=config)
    assert report["ok"] is False and report["reason"] == "unauthorized"
    assert report["error"].startswith("401 from provider 127.0.0.1:")
    assert report["status"] == 401
    assert "Incorrect API key provided." not in report["error"]  # the endpoint's words stay out
    assert len(server.requests) == 1  # refused at once: no retry, no model list


def test_a_404_names_the_missing_model():
    with FakeModelServer() as server:
        provider = OpenAICompatibleProvider(model="nope", base_url=server.root_url + "/nowhere")
        with uncharged(), pytest.raises(ProviderError) as caught:
            provider.chat([{"role": "user", "content": "hi"}])
    assert caught.value.reason == "model_not_found"
    assert str(caught.value).startswith("model not found: 'nope' at 127.0.0.1:")


def test_the_offline_provider_tests_ok_without_network(owner):
    config = providers.provider_config_create(actor=owner, name="Offline", kind="offline")
    report = providers.provider_config_test(actor=owner, config=config)
    assert report["ok"] is True and report["models"] == ["offline-1"]


def test_only_a_member_with_model_manage_manages_providers(owner, make_member):
    business_admin = member_actor(make_member(roles=["business_admin"]))
    with pytest.raises(NotPermitted):
        providers.provider_config_create(actor=business_admin, name="x", kind="offline")
    config = providers.provider_config_create(actor=owner, name="Offline", kind="offline")
    providers.provider_config_set_default(actor=owner, config=None)  # the first is the default
    for call in (
        lambda: providers.provider_config_test(actor=business_admin, config=config),
        lambda: providers.provider_config_set_default(actor=business_admin, config=config),
        lambda: providers.provider_config_update(actor=business_admin, config=config, name="y"),
        lambda: providers.provider_config_delete(actor=business_admin, config=config),
    ):
        with pytest.raises(NotPermitted):
            call()
    config.refresh_from_db()
    assert config.name == "Offline" and not config.is_default
    assert ModelProviderConfig.objects.count() == 1


def test_bad_input_is_refused_and_nothing_is_stored(owner):
    with pytest.raises(InvalidInput) as caught:
        _add(owner, "ftp://example.test/v1")
    assert caught.value.code == "invalid_base_url"
    with pytest.raises(InvalidInput):
        providers.provider_config_create(
            actor=owner, name="x", kind="openai_compatible", preset="vllm"
        )
    with pytest.raises(InvalidInput):
        providers.provider_config_create(actor=owner, name="x", kind="gemini")
    _add(owner, "http://127.0.0.1:9/v1", name="Same")
    with pytest.raises(Conflict):
        _add(owner, "http://127.0.0.1:9/v1", name="Same")
    assert ModelProviderConfig.objects.count() == 1


def test_updating_keeps_the_key_unless_a_new_one_is_given(owner):
    config = _add(owner, "http://127.0.0.1:9/v1", api_key="sk-first")
    providers.provider_config_update(actor=owner, config=config, api_key="", name="Renamed")
    config.refresh_from_db()
    assert config.name == "Renamed" and config.api_key == "sk-first"
    providers.provider_config_update(actor=owner, config=config, api_key="sk-second")
    config.refresh_from_db()
    assert config.api_key == "sk-second"
    with connection.cursor() as cursor:
        cursor.execute("SELECT api_key FROM agents_modelproviderconfig WHERE id = %s", [config.pk])
        assert "sk-second" not in cursor.fetchone()[0]  # encrypted at rest
    events = AuditEvent.objects.filter(action__startswith="provider.").order_by("pk")
    assert [e.action for e in events] == [
        "provider.create",
        "provider.set_default",  # the organization's first provider
        "provider.update",
        "provider.update",
    ]
    assert all("sk-" not in str(e.changes) for e in events)


def test_one_default_per_organization(owner, charlie):
    first = _add(owner, "http://127.0.0.1:9/v1", name="First")  # the first: the default
    second = _add(owner, "http://127.0.0.1:9/v1", name="Second")
    assert list(ModelProviderConfig.objects.filter(is_default=True)) == [first]
    providers.provider_config_set_default(actor=owner, config=second)
    assert list(ModelProviderConfig.objects.filter(is_default=True)) == [second]
    theirs = _add(member_actor(charlie), "http://127.0.0.1:9/v1", name="Theirs")
    with pytest.raises(ModelProviderConfig.DoesNotExist):  # another organization's row
        providers.provider_config_set_default(actor=owner, config=theirs)
    providers.provider_config_set_default(actor=owner, config=None)
    assert not ModelProviderConfig.objects.filter(organization=owner.organization, is_default=True)
    # First (as the first provider), Second, none; Theirs, in the other organization.
    assert AuditEvent.objects.filter(action="provider.set_default").count() == 4


# --- the default serves versions that name no provider ------------------------------------


def test_the_default_serves_a_version_without_a_provider_of_its_own(owner, bob_agent, bob):
    with FakeModelServer([{"text": "Through the default."}]) as server:
        config = _add(owner, server.base_url)
        providers.provider_config_set_default(actor=owner, config=config)
        run = runtime.run_start(actor=member_actor(bob), agent=bob_agent, text="hello")
        assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    run.refresh_from_db()
    assert run.output["text"] == "Through the default."
    # The version names the offline kind and its "offline-1": the default's own model is used.
    assert server.requests[0]["body"]["model"] == "fake-chat"


def test_a_version_naming_a_provider_keeps_it_over_the_default(owner):
    mine = _add(owner, "http://127.0.0.1:9/v1", name="Mine")
    default = _add(owner, "http://127.0.0.1:9/v1", name="Default")
    providers.provider_config_set_default(actor=owner, config=default)
    config, settings = providers.resolve(
        {"provider_config": mine.pk, "model": "m"}, owner.organization.pk
    )
    assert config == mine and settings["model"] == "m"
    mine.is_active = False
    mine.save(update_fields=["is_active"])
    with pytest.raises(providers.ProviderUnavailable):
        providers.resolve({"provider_config": mine.pk}, owner.organization.pk)


# --- failing fast ------------------------------------------------------------------------


def _fail_run(owner, bob_agent, bob, config, **settings):
    version = bob_agent.version
    type(version).objects.filter(pk=version.pk).update(
        model_settings={**version.model_settings, "provider_config": config.pk, **settings}
    )
    run = runtime.run_start(actor=member_actor(bob), agent=bob_agent, text="hello")
    started = time.monotonic()
    status = engine.run_execute(run.pk)
    elapsed = time.monotonic() - started
    run.refresh_from_db()
    return run, status, elapsed


def test_an_unreachable_provider_fails_the_run_at_once_with_its_error(owner, bob_agent, bob):
    config = _add(owner, closed_port(), timeout_seconds=20)
    run, status, elapsed = _fail_run(owner, bob_agent, bob, config)
    assert status == Run.Status.FAILED == run.status
    # Four tries with backoff (0.5, 1, 2 s), not 66 s of task retries.
    assert 2 < elapsed < 8, elapsed
    assert run.error.startswith(f"{MODEL_FAILURE}could not reach host 127.0.0.1:")
    assert "(4 attempts in" in run.error
    assert run.failed_on_model
    last = RunEvent.objects.filter(run=run, kind="status").order_by("pk").last()
    assert last.data == {"status": "failed", "error": run.error}


def test_a_silent_provider_fails_the_run_within_the_timeout(owner, bob_agent, bob):
    with blackhole() as base_url:
        config = _add(owner, base_url, timeout_seconds=2)
        run, status, elapsed = _fail_run(owner, bob_agent, bob, config)
    assert status == Run.Status.FAILED
    assert elapsed < 4, elapsed  # the total budget bounds the retries, not each attempt
    assert run.error.startswith(f"{MODEL_FAILURE}timed out waiting for 127.0.0.1:")


def test_a_refused_key_fails_the_run_without_retrying(owner, bob_agent, bob):
    with FakeModelServer(api_key="sk-right") as server:
        config = _add(owner, server.base_url, api_key="sk-wrong")
        run, status, _elapsed = _fail_run(owner, bob_agent, bob, config)
    assert status == Run.Status.FAILED and len(server.requests) == 1
    assert run.error.startswith(f"{MODEL_FAILURE}401 from provider")


def test_a_template_timeout_bounds_the_call(owner, bob_agent, bob):
    with blackhole() as base_url:
        config = _add(owner, base_url, timeout_seconds=60)
        _run, status, elapsed = _fail_run(owner, bob_agent, bob, config, timeout_seconds=1)
    assert status == Run.Status.FAILED and elapsed < 3, elapsed


# --- API -----------------------------------------------------------------------------------


def test_the_api_tests_a_provider_and_sets_the_default(client_for, alice, charlie, make_member):
    with FakeModelServer([{"text": "ok"}]) as server:
        config = _add(member_actor(alice), server.base_url, api_key="sk-api-secret")
        api = client_for(alice)
        report = api.post(f"/api/v1/model-providers/{config.pk}/test/").json()
        assert report["ok"] is True and report["models"] == ["fake-chat", "fake-large"]
    body = api.post(f"/api/v1/model-providers/{config.pk}/default/").json()
    assert body["is_default"] is True and "sk-api-secret" not in str(body)
    assert body["api_key_set"] is True
    outsider = client_for(charlie)
    for action in ("test", "default"):
        response = outsider.post(f"/api/v1/model-providers/{config.pk}/{action}/")
        assert response.status_code == 404, action
    business_admin = client_for(make_member(roles=["business_admin"]))
    response = business_admin.post(
        "/api/v1/model-providers/", {"name": "x", "kind": "offline"}, format="json"
    )
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "permission_denied"
    assert ModelProviderConfig.objects.count() == 1
