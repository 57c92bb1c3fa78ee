# ruff: noqa: F811 - the fixtures imported from tests.console.agents_setup are parameters here
"""The Models page: adding providers from presets, credentials never rendered back, testing a
connection against loopback servers, the default, who may do it (outsiders get 404), the
template editor's provider and model selects, and the embeddings card with its re-embed."""

from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils.html import escape

from cadre.agents import providers
from cadre.agents.models import MODEL_FAILURE, ModelProviderConfig, Run
from cadre.agents.runtime.records.delivery import NOTICES
from cadre.governance.models import AuditEvent
from cadre.memory.models import MemoryTask
from cadre.tenancy.actors import member_actor
from tests.agents.fake_models import FakeModelServer, closed_port
from tests.console.agents_setup import (  # noqa: F401 - fixtures
    alice_agent,
    bob_agent,
    deployment,
    owner,
    published,
    sales,
    template,
)

pytestmark = pytest.mark.django_db
SECRET = "sk-console-secret-42"


def _add(client, preset: str, **fields):
    data = {"preset": preset, "timeout_seconds": 20, **fields}
    return client.post(reverse("console:provider_create"), data)


def test_the_page_lists_presets_and_says_no_provider_yet(alice, browser):
    page = browser(alice).get(reverse("console:models")).content.decode()
    assert "No model provider yet" in page
    for label in ("DeepSeek", "Qwen (Alibaba Cloud DashScope)", "Azure OpenAI", "LM Studio"):
        assert label in page
    assert "Embeddings" in page and "Coverage" in page


def test_a_preset_fills_the_form(alice, browser):
    page = browser(alice).get(reverse("console:provider_create") + "?preset=dashscope")
    html = page.content.decode()
    assert 'value="https://dashscope.aliyuncs.com/compatible-mode/v1"' in html
    assert 'value="qwen-plus"' in html and "dashscope-intl" in html  # the note


def test_adding_a_provider_stores_the_key_encrypted_and_never_renders_it(alice, browser):
    client = browser(alice)
    response = _add(
        client,
        "deepseek",
        name="DeepSeek",
        base_url="https://api.deepseek.com/v1",
        api_key=SECRET,
        default_model="deepseek-chat",
    )
    assert response.status_code == 302
    config = ModelProviderConfig.objects.get()
    assert (config.kind, config.preset, config.api_key) == ("openai_compatible", "deepseek", SECRET)
    for url in (reverse("console:models"), reverse("console:provider_edit", args=[config.pk])):
        html = client.get(url).content.decode()
        assert SECRET not in html and "sk-console" not in html
    # Editing with the key left empty keeps it.
    client.post(
        reverse("console:provider_edit", args=[config.pk]),
        {"name": "DeepSeek CN", "base_url": config.base_url, "timeout_seconds": 30},
    )
    config.refresh_from_db()
    assert config.name == "DeepSeek CN" and config.api_key == SECRET
    event = AuditEvent.objects.get(action="provider.create")
    assert SECRET not in str(event.changes)


def test_a_bad_base_url_is_refused_and_nothing_is_stored(alice, browser):
    response = _add(browser(alice), "vllm", name="vLLM", base_url="not a url")
    assert response.status_code == 400
    assert "The base URL must be an http(s) address." in response.content.decode()
    assert not ModelProviderConfig.objects.exists()


def test_test_connection_shows_latency_and_models(alice, browser):
    client = browser(alice)
    with FakeModelServer([{"text": "ok"}]) as server:
        _add(client, "vllm", name="Loopback", base_url=server.base_url, default_model="fake-chat")
        config = ModelProviderConfig.objects.get()
        page = client.post(reverse("console:provider_test", args=[config.pk])).content.decode()
    assert "Loopback answered</strong> in" in page
    assert "fake-chat, fake-large" in page
    config.refresh_from_db()
    assert config.known_models == ["fake-chat", "fake-large"] and config.tested_at


@pytest.mark.parametrize(
    ("setup", "expected"),
    [("closed", "could not reach host 127.0.0.1:"), ("refused_key", "401 from provider")],
)
def test_test_connection_shows_the_exact_error(alice, browser, setup, expected):
    client = browser(alice)
    with FakeModelServer(api_key="sk-right") as server:
        base_url = closed_port() if setup == "closed" else server.base_url
        _add(client, "vllm", name="Broken", base_url=base_url, api_key="sk-wrong")
        config = ModelProviderConfig.objects.get()
        page = client.post(reverse("console:provider_test", args=[config.pk])).content.decode()
    assert "Broken failed:</strong>" in page
    assert expected in page


def test_make_default(alice, browser):
    client = browser(alice)
    _add(client, "ollama", name="Ollama", base_url="http://localhost:11434/v1")
    config = ModelProviderConfig.objects.get()
    client.post(reverse("console:provider_default", args=[config.pk]))
    config.refresh_from_db()
    assert config.is_default
    assert "Default</span>" in client.get(reverse("console:models")).content.decode()


def test_a_member_without_model_manage_is_refused_and_nothing_changes(alice, make_member, browser):
    config = providers.provider_config_create(
        actor=member_actor(alice), name="Offline", kind="offline"
    )
    providers.provider_config_set_default(actor=member_actor(alice), config=None)  # was the first
    business_admin = browser(make_member(roles=["business_admin"]))
    assert business_admin.get(reverse("console:models")).status_code == 403
    assert _add(business_admin, "offline", name="Mine", timeout_seconds=10).status_code == 403
    response = business_admin.post(reverse("console:provider_default", args=[config.pk]))
    assert response.status_code == 403
    response = business_admin.post(reverse("console:provider_delete", args=[config.pk]))
    assert response.status_code == 403
    config.refresh_from_db()
    assert not config.is_default and ModelProviderConfig.objects.count() == 1
    nav = business_admin.get(reverse("console:templates")).content.decode()
    assert reverse("console:models") not in nav


def test_an_outsider_gets_404_for_another_organizations_provider(alice, charlie, browser):
    config = providers.provider_config_create(
        actor=member_actor(alice), name="Acme model", kind="offline"
    )
    providers.provider_config_set_default(actor=member_actor(alice), config=None)  # was the first
    outsider = browser(charlie)
    for name in (
        "provider_edit",
        "provider_test",
        "provider_default",
        "provider_prices",
        "provider_delete",
    ):
        url = reverse(f"console:{name}", args=[config.pk])
        response = outsider.post(url) if name != "provider_edit" else outsider.get(url)
        assert response.status_code == 404, name
    assert "Acme model" not in outsider.get(reverse("console:models")).content.decode()
    config.refresh_from_db()  # still there, not the default, never tested
    assert not config.is_default and config.tested_at is None


def test_the_version_editor_picks_provider_and_model_from_lists(alice, browser, template):
    owner = member_actor(alice)
    config = providers.provider_config_create(
        actor=owner,
        name="Loopback",
        kind="openai_compatible",
        base_url="http://127.0.0.1:9/v1",
        default_model="fake-chat",
    )
    ModelProviderConfig.objects.filter(pk=config.pk).update(known_models=["fake-large"])
    version = template.versions.get()
    url = reverse("console:template_version_edit", args=[template.pk, version.number])
    client = browser(alice)
    html = client.get(url).content.decode()
    assert f'<option value="{config.pk}">Loopback (OpenAI-compatible)</option>' in html
    assert '<optgroup label="Loopback">' in html and '<option value="fake-large">' in html
    response = client.post(
        url,
        {
            "name": version.name,
            "provider_config": str(config.pk),
            "model": "fake-large",
            "model_settings": '{"budget": {"max_steps": 6}}',
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    version.refresh_from_db()
    assert version.model_settings == {
        "provider_config": config.pk,
        "provider": "openai_compatible",
        "model": "fake-large",
        "budget": {"max_steps": 6},
    }
    # The JSON field holds what the selects do not: no provider, no model.
    form = client.get(url).context["form"]
    assert form.initial["model_settings"] == {"budget": {"max_steps": 6}}
    assert form.initial["provider_config"] == str(config.pk)
    assert form.initial["model"] == "fake-large"
    # A provider of another organization (or made up) is not a choice.
    response = client.post(url, {"name": version.name, "provider_config": "999999"})
    assert response.status_code == 200 and "Select a valid choice" in response.content.decode()


def test_the_chat_links_admins_to_models_when_the_provider_failed(
    alice, bob, browser, alice_agent, bob_agent
):
    from cadre.agents.runtime.lifecycle import services as runtime

    error = f"{MODEL_FAILURE}could not reach host 127.0.0.1:9"
    pages = {}
    for member, agent in ((alice, alice_agent), (bob, bob_agent)):
        run = runtime.run_start(actor=member_actor(member), agent=agent, text="hi")
        Run.objects.filter(pk=run.pk).update(status=Run.Status.FAILED, error=error)
        url = reverse("console:chat_session", args=[run.session_id])
        pages[member.pk] = browser(member).get(url).content.decode()
    assert "could not reach host 127.0.0.1:9" in pages[alice.pk]
    assert f'<a href="{reverse("console:models")}">check it under Models</a>' in pages[alice.pk]
    # bob cannot fix it: he reads what his IM would, neither the endpoint's error nor the link
    assert "could not reach host 127.0.0.1:9" not in pages[bob.pk]
    assert escape(NOTICES["failed"]) in pages[bob.pk]
    assert "check it under Models" not in pages[bob.pk]
    assert "data-models-url" not in pages[bob.pk]


def test_the_embeddings_card_and_a_reembed(alice, browser):
    from cadre.memory import embeddings

    client = browser(alice)
    card = client.get(reverse("console:embeddings")).content.decode()
    assert "Coverage" in card and "No memories yet." in card
    response = client.post(reverse("console:embeddings_reembed"))
    assert response.status_code == 302
    task = MemoryTask.objects.get(kind=MemoryTask.Kind.REEMBED)
    assert task.params["model_id"] == embeddings.configured().model_id
    assert AuditEvent.objects.filter(action="memory.reembed_start").count() == 1
    # While it runs the card polls itself and the button is off; a second start is refused.
    card = client.get(reverse("console:models")).content.decode()
    assert 'hx-trigger="every 2s"' in card and "Re-embedding…" in card
    client.post(reverse("console:embeddings_reembed"))
    assert MemoryTask.objects.filter(kind=MemoryTask.Kind.REEMBED).count() == 1


def test_prices_are_set_on_the_edit_page_and_a_bad_amount_stores_nothing(
    alice, browser, make_member
):
    config = providers.provider_config_create(
        actor=member_actor(alice), name="Priced", kind="offline"
    )
    url = reverse("console:provider_prices", args=[config.pk])
    client = browser(alice)
    assert (
        'id="prices"'
        in client.get(reverse("console:provider_edit", args=[config.pk])).content.decode()
    )
    response = client.post(
        url, {"prices-input": "2.50", "prices-output": "10", "prices-cached_input": ""}
    )
    assert response.status_code == 302
    config.refresh_from_db()
    assert config.prices == {"input": "2.5", "output": "10"}
    assert AuditEvent.objects.filter(action="provider.prices_set").count() == 1

    response = client.post(url, {"prices-input": "cheap", "prices-output": "-1"})
    assert response.status_code == 400
    assert "not a number" in response.content.decode()
    config.refresh_from_db()
    assert config.prices == {"input": "2.5", "output": "10"}
    assert AuditEvent.objects.filter(action="provider.prices_set").count() == 1

    business_admin = browser(make_member(roles=["business_admin"]))
    assert business_admin.post(url, {"prices-input": "0"}).status_code == 403
    config.refresh_from_db()
    assert config.prices == {"input": "2.5", "output": "10"}
