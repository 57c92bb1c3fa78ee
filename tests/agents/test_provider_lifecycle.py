"""A model provider's life in an organization: the first one added becomes the default (audited,
through the model-change gate), and a provider is deleted only when nothing uses it — refused
with 409 `provider_in_use` saying by what (the default, template versions, agents, evaluation
suites), nothing deleted — through the service, the API and the console."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from cadre.agents import providers, services
from cadre.agents.evaluation.models import EvalSuite
from cadre.agents.models import ModelProviderConfig
from cadre.errors import Conflict, NotPermitted
from cadre.governance.models import AuditEvent
from cadre.tenancy.actors import member_actor
from tests.agents.conftest import publish

pytestmark = pytest.mark.django_db


def _add(owner, name, **fields):
    return providers.provider_config_create(
        actor=owner,
        name=name,
        kind="openai_compatible",
        base_url="https://api.example.com/v1",
        default_model="m-1",
        **fields,
    )


def _named(template, config):
    """A draft of `template` that names `config` as its provider."""
    version = template.versions.get(status="draft")
    return services.version_update(
        actor=member_actor(template.created_by),
        version=version,
        model_settings={"provider_config": config.pk, "provider": config.kind, "model": "m-1"},
    )


# --- the first provider is the default ------------------------------------------------------


def test_the_first_provider_becomes_the_default_and_the_second_does_not(owner):
    first = _add(owner, "First")
    second = _add(owner, "Second")
    first.refresh_from_db()
    second.refresh_from_db()
    assert first.is_default and not second.is_default
    assert providers.organization_default(owner.organization.pk) == first
    event = AuditEvent.objects.get(action="provider.set_default")
    assert event.target_id == str(first.pk) and event.reason == "first provider"
    assert event.changes == {"before": {"default": None}, "after": {"default": "First"}}


def test_the_first_provider_stays_aside_when_the_model_change_gate_refuses(owner, template):
    publish(owner, template.versions.get())
    owner.organization.settings = {"evaluation_gates": {"template_model_change": True}}
    owner.organization.save(update_fields=["settings"])
    config = _add(owner, "Gated")
    config.refresh_from_db()
    # Kept, but not the default: the published template's model would change without a replay.
    assert ModelProviderConfig.objects.filter(pk=config.pk).exists()
    assert not config.is_default
    assert not AuditEvent.objects.filter(action="provider.set_default").exists()


def test_each_organization_has_its_own_first_provider(owner, charlie):
    ours = _add(owner, "Ours")
    theirs = _add(member_actor(charlie), "Theirs")
    ours.refresh_from_db()
    theirs.refresh_from_db()
    assert ours.is_default and theirs.is_default


# --- deleting --------------------------------------------------------------------------------


def test_an_unused_provider_is_deleted_and_audited(owner):
    _add(owner, "Default one")
    spare = _add(owner, "Spare")
    providers.provider_config_delete(actor=owner, config=spare)
    assert not ModelProviderConfig.objects.filter(pk=spare.pk).exists()
    event = AuditEvent.objects.get(action="provider.delete")
    assert event.target_id == str(spare.pk) and event.changes["before"]["name"] == "Spare"


def test_the_default_is_not_deleted(owner):
    default = _add(owner, "Default one")
    with pytest.raises(Conflict) as refused:
        providers.provider_config_delete(actor=owner, config=default)
    assert refused.value.code == "provider_in_use"
    assert "the organization's default" in refused.value.message
    assert ModelProviderConfig.objects.filter(pk=default.pk, is_default=True).exists()
    assert not AuditEvent.objects.filter(action="provider.delete").exists()


def test_a_provider_named_by_versions_and_agents_is_not_deleted_saying_by_what(
    owner, template, sales, alice
):
    _add(owner, "Default one")
    named = _add(owner, "Named")
    version = publish(owner, _named(template, named))
    alice.positions.add(sales)
    services.deployment_create(
        actor=owner, name="Sales agents", template=template, positions=[sales]
    )
    services.version_draft(actor=owner, template=template)  # v2 copies v1: it names it too
    with pytest.raises(Conflict) as refused:
        providers.provider_config_delete(actor=owner, config=named)
    error = refused.value
    assert error.code == "provider_in_use" and error.status == 409
    assert "Sales assistant v1 (published)" in error.message
    assert "Sales assistant v2 (draft)" in error.message
    assert "1 active agent run on it" in error.message
    assert error.details["default"] is False and error.details["agents"] == 1
    assert error.details["templates"] == [{"id": template.pk, "name": "Sales assistant"}]
    assert [(v["number"], v["status"]) for v in error.details["versions"]] == [
        (1, "published"),
        (2, "draft"),
    ]
    assert version.pk == error.details["versions"][0]["id"]
    assert ModelProviderConfig.objects.filter(pk=named.pk).exists()
    assert not AuditEvent.objects.filter(action="provider.delete").exists()


def test_a_provider_judging_an_evaluation_suite_is_not_deleted(owner, template):
    _add(owner, "Default one")
    judge = _add(owner, "Judge")
    EvalSuite.objects.create(
        organization=owner.organization,
        template=template,
        name="Pricing answers",
        judge={"provider_config": judge.pk, "rubric": "Correct prices."},
    )
    with pytest.raises(Conflict) as refused:
        providers.provider_config_delete(actor=owner, config=judge)
    assert "evaluation suites judge with it: Pricing answers" in refused.value.message
    assert ModelProviderConfig.objects.filter(pk=judge.pk).exists()


def test_deleting_needs_model_manage(owner, bob):
    _add(owner, "Default one")
    spare = _add(owner, "Spare")
    with pytest.raises(NotPermitted):
        providers.provider_config_delete(actor=member_actor(bob), config=spare)
    assert ModelProviderConfig.objects.filter(pk=spare.pk).exists()


# --- the API ---------------------------------------------------------------------------------


def test_api_delete_answers_204_or_409_with_what_uses_it(client_for, owner, alice, template):
    default = _add(owner, "Default one")
    spare = _add(owner, "Spare")
    named = _add(owner, "Named")
    _named(template, named)
    api = client_for(alice)
    refused = api.delete(f"/api/v1/model-providers/{default.pk}/")
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "provider_in_use"
    assert refused.json()["error"]["details"]["default"] is True
    in_draft = api.delete(f"/api/v1/model-providers/{named.pk}/")
    assert in_draft.status_code == 409
    assert in_draft.json()["error"]["details"]["versions"][0]["status"] == "draft"
    assert api.delete(f"/api/v1/model-providers/{spare.pk}/").status_code == 204
    assert set(ModelProviderConfig.objects.values_list("name", flat=True)) == {
        "Default one",
        "Named",
    }


def test_api_delete_by_an_employee_or_an_outsider_deletes_nothing(client_for, owner, bob, charlie):
    _add(owner, "Default one")
    spare = _add(owner, "Spare")
    assert client_for(bob).delete(f"/api/v1/model-providers/{spare.pk}/").status_code == 403
    assert client_for(charlie).delete(f"/api/v1/model-providers/{spare.pk}/").status_code == 404
    assert ModelProviderConfig.objects.filter(pk=spare.pk).exists()


# --- the console -----------------------------------------------------------------------------


def _browser(member) -> Client:
    browser = Client()
    browser.force_login(member.user)
    return browser


def test_console_delete_removes_an_unused_provider_and_refuses_the_default(owner, alice):
    default = _add(owner, "Default one")
    spare = _add(owner, "Spare")
    browser = _browser(alice)
    page = browser.post(reverse("console:provider_delete", args=[default.pk]), follow=True)
    text = page.content.decode()
    assert "cannot be deleted while it is in use" in text and "default" in text
    assert ModelProviderConfig.objects.filter(pk=default.pk).exists()
    page = browser.post(reverse("console:provider_delete", args=[spare.pk]), follow=True)
    assert "“Spare” was deleted." in page.content.decode()
    assert not ModelProviderConfig.objects.filter(pk=spare.pk).exists()


def test_console_adding_the_first_provider_says_it_is_the_default(alice):
    page = _browser(alice).post(
        reverse("console:provider_create"),
        {
            "preset": "deepseek",
            "name": "DeepSeek",
            "base_url": "https://api.deepseek.com/v1",
            "default_model": "deepseek-chat",
            "timeout_seconds": 30,
        },
        follow=True,
    )
    assert "is the organization&#x27;s default" in page.content.decode()
    assert ModelProviderConfig.objects.get(name="DeepSeek").is_default
