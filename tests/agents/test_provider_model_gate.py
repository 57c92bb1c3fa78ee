"""The model-change gate on providers: with `template_model_change` on, changing a provider's
model or base URL, or the organization's default provider, in a way that moves published
templates to another model is refused (409 `model_change_gated`, naming the templates) through
the service, the API and the console, and nothing changes; with the gate off it works."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from cadre.agents import providers
from cadre.agents.evaluation.gates import evaluation_gates_set
from cadre.agents.models import ModelProviderConfig
from cadre.errors import Conflict
from cadre.governance.models import AuditEvent
from tests.refusals import nothing_changes

pytestmark = pytest.mark.django_db

BASE_URL = "http://localhost:11434/v1"


@pytest.fixture
def default(owner):
    config = providers.provider_config_create(
        actor=owner,
        name="Ollama",
        kind="openai_compatible",
        base_url=BASE_URL,
        default_model="qwen2.5",
    )
    return providers.provider_config_set_default(actor=owner, config=config)


@pytest.fixture
def other(owner):
    return providers.provider_config_create(
        actor=owner,
        name="LM Studio",
        kind="openai_compatible",
        base_url="http://localhost:1234/v1",
        default_model="llama-3",
    )


@pytest.fixture
def gate_on(owner):
    evaluation_gates_set(actor=owner, gates={"template_model_change": True})


def _browser(member) -> Client:
    client = Client()
    client.force_login(member.user)
    return client


def _edit(member, config, **changes):
    data = {
        "name": config.name,
        "base_url": config.base_url,
        "default_model": config.default_model,
        "timeout_seconds": config.timeout_seconds,
        **changes,
    }
    return _browser(member).post(reverse("console:provider_edit", args=[config.pk]), data)


@pytest.mark.parametrize(
    ("changes", "what"),
    [
        ({"default_model": "qwen2.5-72b"}, "model"),
        ({"base_url": "http://localhost:11435/v1"}, "base URL"),
    ],
)
def test_with_the_gate_on_editing_the_default_providers_model_or_url_is_refused(
    owner, alice, template, published, default, gate_on, changes, what
):
    with (
        nothing_changes(ModelProviderConfig.objects.get(pk=default.pk)),
        pytest.raises(Conflict) as refused,
    ):
        providers.provider_config_update(actor=owner, config=default, **changes)
    assert refused.value.code == "model_change_gated"
    assert refused.value.status == 409
    assert refused.value.details == {
        "gate": "template_model_change",
        "templates": [{"id": template.pk, "name": "Sales assistant"}],
    }
    assert f"Changing the {what} of “Ollama”" in refused.value.message
    assert "“Sales assistant”" in refused.value.message

    # The console shows why, on the form, and stores nothing.
    with nothing_changes(ModelProviderConfig.objects.get(pk=default.pk)):
        response = _edit(alice, default, **changes)
    assert response.status_code == 400
    page = response.content.decode()
    assert "“Sales assistant”" in page and "model-change evaluation gate is on" in page


def test_with_the_gate_on_other_provider_edits_still_save(
    owner, template, published, default, gate_on
):
    providers.provider_config_update(
        actor=owner, config=default, name="Ollama GPU", timeout_seconds=90
    )
    default.refresh_from_db()
    assert (default.name, default.timeout_seconds) == ("Ollama GPU", 90)
    assert AuditEvent.objects.filter(action="provider.update").count() == 1


def test_only_templates_that_take_the_changed_setting_are_in_the_way(
    owner, template, published, default, other, gate_on
):  # `default` first: the organization's first provider is its default, `other` is not
    from cadre.agents import services

    # A provider no published template calls changes freely.
    providers.provider_config_update(actor=owner, config=other, default_model="llama-3.1")
    # A template naming the provider and its own model is not moved by the provider's model,
    # but it is by its base URL.
    draft = services.version_draft(actor=owner, template=template)
    services.version_update(
        actor=owner,
        version=draft,
        model_settings={"provider_config": other.pk, "model": "llama-3.1"},
    )
    services.version_submit(actor=owner, version=draft)
    services.version_publish(actor=owner, version=draft, override_gate="first use of LM Studio")
    providers.provider_config_update(actor=owner, config=other, default_model="llama-3.2")
    other.refresh_from_db()
    assert other.default_model == "llama-3.2"
    with pytest.raises(Conflict) as refused:
        providers.provider_config_update(
            actor=owner, config=other, base_url="http://localhost:1235/v1"
        )
    assert refused.value.details["templates"] == [{"id": template.pk, "name": "Sales assistant"}]


def test_with_the_gate_on_changing_the_default_provider_is_refused(
    owner, alice, client_for, template, published, default, other, gate_on
):
    watched = (
        ModelProviderConfig.objects.get(pk=default.pk),
        ModelProviderConfig.objects.get(pk=other.pk),
    )
    with nothing_changes(*watched):
        response = client_for(alice).post(f"/api/v1/model-providers/{other.pk}/default/")
    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "model_change_gated"
    assert error["details"]["templates"] == [{"id": template.pk, "name": "Sales assistant"}]
    assert "Making “LM Studio” the organization" in error["message"]
    assert "“Sales assistant”" in error["message"]

    with nothing_changes(*watched):
        refused = _browser(alice).post(
            reverse("console:provider_default", args=[other.pk]), follow=True
        )
    page = refused.content.decode()
    assert "“Sales assistant”" in page and "model-change evaluation gate is on" in page

    with nothing_changes(*watched), pytest.raises(Conflict):
        providers.provider_config_set_default(actor=owner, config=None)


def test_with_the_gate_off_provider_changes_work_as_before(
    owner, alice, client_for, template, published, default, other
):
    response = _edit(alice, default, default_model="qwen2.5-72b", base_url="http://localhost:1/v1")
    assert response.status_code == 302
    default.refresh_from_db()
    assert (default.default_model, default.base_url) == ("qwen2.5-72b", "http://localhost:1/v1")
    made = client_for(alice).post(f"/api/v1/model-providers/{other.pk}/default/")
    assert made.status_code == 200, made.content
    other.refresh_from_db()
    assert other.is_default
    assert AuditEvent.objects.filter(action="provider.set_default").count() == 2
