"""Role templates: versions, review and publishing, immutability, diff, presets, audit."""

from __future__ import annotations

import pytest

from cadre.agents import services
from cadre.agents.models import AgentTemplate, ImmutableVersion, TemplateVersion
from cadre.errors import Conflict, InvalidInput, NotPermitted
from cadre.governance.models import AuditEvent
from cadre.tenancy.actors import member_actor
from tests.agents.conftest import publish

pytestmark = pytest.mark.django_db


def test_template_starts_with_a_draft_version(template):
    version = template.versions.get()
    assert version.number == 1
    assert version.status == TemplateVersion.Status.DRAFT
    assert "Standard discount" in version.sop


def test_publishing_goes_through_review_and_is_audited(owner, template):
    version = template.versions.get()
    with pytest.raises(Conflict):
        services.version_publish(actor=owner, version=version)
    services.version_submit(actor=owner, version=version)
    version = services.version_publish(actor=owner, version=version, reason="reviewed")
    assert version.status == "published" and version.published_at is not None
    event = AuditEvent.objects.get(action="template.publish")
    assert event.target_id == str(version.pk)
    assert event.reason == "reviewed"
    assert event.changes == {"before": {"status": "in_review"}, "after": {"status": "published"}}


def test_published_version_is_immutable(owner, published):
    with pytest.raises(Conflict):
        services.version_update(actor=owner, version=published, sop="changed")
    published.sop = "sneaky edit"
    with pytest.raises(ImmutableVersion):
        published.save()
    with pytest.raises(ImmutableVersion):
        published.delete()
    published.refresh_from_db()
    assert "Standard discount" in published.sop


def test_in_review_version_cannot_be_edited_until_withdrawn(owner, template):
    version = services.version_submit(actor=owner, version=template.versions.get())
    with pytest.raises(Conflict):
        services.version_update(actor=owner, version=version, sop="x")
    services.version_withdraw(actor=owner, version=version, reason="needs work")
    version = services.version_update(actor=owner, version=version, sop="new sop")
    assert version.sop == "new sop"


def test_new_draft_copies_latest_and_only_one_draft_at_a_time(owner, template, published):
    draft = services.version_draft(actor=owner, template=template)
    assert draft.number == 2 and draft.sop == published.sop
    with pytest.raises(Conflict):
        services.version_draft(actor=owner, template=template)


def test_diff_between_versions_is_unified_per_field(owner, template, published):
    draft = services.version_draft(actor=owner, template=template)
    services.version_update(
        actor=owner,
        version=draft,
        sop=published.sop.replace("5 percent", "7 percent"),
        tool_permissions={"memory_search": {"risk": "low", "confirmation": "never"}},
    )
    draft.refresh_from_db()
    diff = services.version_diff(published, draft)
    assert set(diff) == {"sop", "tool_permissions"}
    assert "--- v1/sop" in diff["sop"] and "+++ v2/sop" in diff["sop"]
    assert "-Standard discount is 5 percent." in diff["sop"]
    assert "+Standard discount is 7 percent." in diff["sop"]
    assert '-  "im_send": {' in diff["tool_permissions"]
    assert services.version_diff(draft, draft) == {}


def test_unknown_tool_or_hook_is_rejected(owner, template):
    version = template.versions.get()
    with pytest.raises(InvalidInput) as error:
        services.version_update(
            actor=owner, version=version, tool_permissions={"rm_rf": {"risk": "high"}}
        )
    assert "unknown tool" in error.value.message
    with pytest.raises(InvalidInput):
        services.version_update(
            actor=owner, version=version, hooks={"on_init": [{"name": "nope", "enabled": True}]}
        )
    with pytest.raises(InvalidInput):
        services.version_update(
            actor=owner, version=version, memory_policy={"read_scopes": ["everyone"]}
        )


def test_every_preset_loads_and_validates(owner):
    presets = services.presets()
    assert {
        "sales",
        "market_analyst",
        "product_manager",
        "customer_service",
        "it_operations",
    } <= set(presets)
    for index, key in enumerate(sorted(presets)):
        template = services.template_create(
            actor=owner, name=f"From {key}", code=f"p{index}", preset=key
        )
        version = template.versions.get()
        assert version.sop and version.agent_md and version.user_md_template
        assert version.tool_permissions
        publish(owner, version)


def test_versions_of_a_template_from_a_preset_carry_the_templates_name(owner):
    template = services.template_create(
        actor=owner, name="Acme inside sales", code="acme-sales", preset="sales"
    )
    first = template.versions.get()
    assert first.name == "Acme inside sales"
    assert first.sop == services.presets()["sales"]["sop"]  # the preset's content, not its name
    publish(owner, first)
    assert services.version_draft(actor=owner, template=template).name == "Acme inside sales"


def test_employee_cannot_manage_templates(bob):
    with pytest.raises(NotPermitted):
        services.template_create(actor=member_actor(bob), name="x", code="x")
    assert not AgentTemplate.objects.exists()


def test_duplicate_code_is_a_conflict(owner, template):
    with pytest.raises(Conflict):
        services.template_create(actor=owner, name="Other", code="sales-assistant")
