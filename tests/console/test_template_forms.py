# ruff: noqa: F811 - the fixtures imported from tests.console.agents_setup are parameters here
"""The template editor's pickers, through Django's client: the page lists the organization's
positions, tools (built-in and MCP, with their own risk), memory scopes, hook pipeline and Hub
skills; what is posted becomes the version's content through `version_update`; a mistake
(negative retention, a skill without a range, a weakened input policy) is shown on its field
and stores nothing; the Advanced (JSON) view still edits the JSON."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from cadre.agents.models import McpServer, TemplateVersion
from cadre.governance.models import AuditEvent
from hub.models import DistTag, HubNamespace, SkillPackage, SkillVersion
from tests.console.agents_setup import (  # noqa: F401 - fixtures
    client,
    owner,
    sales,
    template,
)
from tests.factories import PositionFactory

pytestmark = pytest.mark.django_db


def edit_url(template, number: int = 1) -> str:
    return reverse("console:template_version_edit", args=[template.pk, number])


def picker_data(form) -> dict:
    """What the browser posts for the picker form as shown (every value as rendered)."""
    data: dict = {"editor": "forms"}
    for bound in form:
        if bound.name in ("skills", "tool_permissions", "memory_policy", "hooks", "model_settings"):
            continue
        value = bound.value()
        if isinstance(value, bool):
            if value:
                data[bound.html_name] = "on"
        elif isinstance(value, list | tuple):
            data[bound.html_name] = [str(item) for item in value]
        elif value is not None:
            data[bound.html_name] = str(value)
    formset = form.skill_formset
    for bound in formset.management_form:
        data[bound.html_name] = str(bound.value())
    for row in formset.forms:
        for bound in row:
            if bound.value() not in (None, False, ""):
                data[bound.html_name] = str(bound.value())
    for point in form.hook_pipeline():
        data[f"hooks-{point['point']}"] = [hook["name"] for hook in point["hooks"]]
        data[f"hooks-{point['point']}-on"] = [h["name"] for h in point["hooks"] if h["enabled"]]
    return data


@pytest.fixture
def pdf_skill(alice, org_a):
    namespace = HubNamespace.objects.create(organization=org_a, handle="acme")
    package = SkillPackage.objects.create(
        organization=org_a, namespace=namespace, name="pdf-tools", owner=alice
    )
    version = SkillVersion.objects.create(
        package=package,
        version="1.2.0",
        major=1,
        minor=2,
        patch=0,
        status=SkillVersion.Status.PUBLISHED,
        fingerprint="0" * 64,
        created_by=alice,
    )
    DistTag.objects.create(package=package, tag="latest", version=version)
    return package


@pytest.fixture
def crm(org_a):
    return McpServer.objects.create(
        organization=org_a,
        name="crm",
        transport="streamable_http",
        url="http://127.0.0.1:9/mcp",
        tools=[
            {"name": "get_contact", "description": "Read a contact"},
            {"name": "delete_contact", "annotations": {"destructiveHint": True}},
        ],
    )


def test_the_page_offers_pickers_and_json_only_as_the_advanced_view(
    alice, template, sales, crm, pdf_skill
):
    page = client(alice).get(edit_url(template))
    assert page.status_code == 200
    html = page.content.decode()
    assert 'name="editor" value="forms"' in html
    assert "Advanced (JSON)" in html
    # No JSON textarea in the form view.
    assert 'name="tool_permissions"' not in html and 'name="memory_policy"' not in html
    # Positions of the organization, tools with their own risk (MCP ones included).
    # (the name is the organization's data, the code an identifier: neither is translated)
    assert 'value="sales"' in html
    assert '<span translate="no">Sales</span> (<code>sales</code>)' in html
    rows = {tool.name: tool for tool in page.context["form"].tool_rows()}
    assert rows["im_send"].own_risk == "medium" and rows["im_send"].allow.value() is True
    assert rows["http_request"].allow.value() is False
    assert rows["mcp__crm__delete_contact"].own_risk == "high"
    assert "mcp__crm__*" in rows
    # Skills: the Hub's, with their latest version; hooks as the registry has them.
    assert "@acme/pdf-tools — 1.2.0 latest" in html
    points = {p["point"]: p for p in page.context["form"].hook_pipeline()}
    # The template switched memory_retrieval off and names no other assemble_context hook.
    assembled = {h["name"]: h["enabled"] for h in points["assemble_context"]["hooks"]}
    assert assembled == {"memory_retrieval": False, "standing_memories": False, "skills": False}
    assert [h["name"] for h in points["compact"]["hooks"]] == ["memory_dedup", "session_summary"]

    advanced = client(alice).get(edit_url(template) + "?view=json").content.decode()
    assert 'name="editor" value="json"' in advanced and 'name="tool_permissions"' in advanced


def test_saving_the_pickers_writes_the_version_content(alice, template, sales, crm, pdf_skill):
    browser = client(alice)
    PositionFactory(organization=sales.organization, name="Key accounts", code="key-accounts")
    form = browser.get(edit_url(template)).context["form"]
    unchanged = browser.post(edit_url(template), picker_data(form))
    assert unchanged.status_code == 302
    # The pickers as shown write back what the version holds (the SOP's last newline aside:
    # text fields are stripped).
    for event in AuditEvent.objects.filter(action="template.version_update"):
        assert set(event.changes["after"]) <= {"sop", "agent_md", "user_md_template"}

    data = picker_data(form)
    data["target_positions"] = ["sales", "key-accounts"]
    data.update(
        {
            "skill-0-package": "@acme/pdf-tools",
            "skill-0-selector": "tag",
            "skill-0-requested": "latest",
            "skill-0-policy": "manual",
            "allow-mcp__crm__get_contact": "on",
            "risk-mcp__crm__get_contact": "high",
            "confirmation-mcp__crm__get_contact": "always",
            "allow-http_request": "on",
            "risk-http_request": "medium",
            "confirmation-http_request": "high_risk",
            "hosts-http_request": "api.example.com, crm.example.com",
            "read_scopes": ["agent", "user", "position"],
            "write_scopes": ["agent", "user"],
            "retention_days": "90",
            "retrieve_derived": ["experience"],
            "hooks-assemble_context": ["skills", "memory_retrieval", "standing_memories"],
            "hooks-assemble_context-on": ["skills", "memory_retrieval"],
        }
    )
    data.pop("allow-task_create")
    response = browser.post(edit_url(template), data)
    assert response.status_code == 302, response.content.decode()[:3000]
    version = template.versions.get()
    assert version.target_positions == ["sales", "key-accounts"]
    assert version.skills == [{"package": "@acme/pdf-tools", "tag": "latest", "policy": "manual"}]
    assert version.tool_permissions == {
        "memory_search": {"risk": "low", "confirmation": "never"},
        "im_send": {"risk": "medium", "confirmation": "high_risk"},
        "mcp__crm__get_contact": {"risk": "high", "confirmation": "always"},
        "http_request": {
            "risk": "medium",
            "confirmation": "high_risk",
            "allowed_hosts": ["api.example.com", "crm.example.com"],
        },
    }
    assert version.memory_policy == {
        "read_scopes": ["agent", "user", "position"],
        "write_scopes": ["agent", "user"],
        "retention_days": 90,
        "retrieve_kinds": ["fact", "preference", "requirement", "experience"],
    }
    assert version.hooks["assemble_context"] == [
        {"name": "skills", "enabled": True},
        {"name": "memory_retrieval", "enabled": True},
        {"name": "standing_memories", "enabled": False},
    ]
    assert version.hooks["process_memory"] == [{"name": "memory_write", "enabled": False}]
    assert "compact" not in version.hooks  # the defaults, left unconfigured
    assert version.model_settings["budget"] == {"max_steps": 6}  # kept as it was

    # Shown again as saved; the skill row is removed by ticking Remove.
    form = browser.get(edit_url(template)).context["form"]
    assert form["retention_days"].value() == 90
    assert form["retrieve_derived"].value() == ["experience"]
    data = picker_data(form)
    data["skill-0-DELETE"] = "on"
    assert browser.post(edit_url(template), data).status_code == 302
    version.refresh_from_db()
    assert version.skills == []
    assert version.memory_policy["retention_days"] == 90


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"retention_days": "-5"}, "retention_days", "greater than or equal to 1"),
        ({"skill-0-package": "@acme/pdf-tools"}, "requested", "Give a version range"),
        ({"risk-im_send": "extreme"}, "risk-im_send", "Select a valid choice"),
        # im_send is medium risk itself: a template cannot lower it, so low is not offered.
        ({"risk-im_send": "low"}, "risk-im_send", "Select a valid choice"),
        ({"target_positions": ["nowhere"]}, "target_positions", "Select a valid choice"),
    ],
)
def test_a_mistake_is_shown_on_its_field_and_nothing_is_stored(
    alice, template, pdf_skill, changes, field, message
):
    browser = client(alice)
    version = template.versions.get()
    before = {name: getattr(version, name) for name in version.CONTENT_FIELDS}
    data = picker_data(browser.get(edit_url(template)).context["form"])
    data.update(changes)
    data["sop"] = "A new SOP that must not be saved alone."
    response = browser.post(edit_url(template), data)
    assert response.status_code == 200
    form = response.context["form"]
    errors = (
        form.skill_formset.forms[0].errors.get(field)
        if field == "requested"
        else form.errors.get(field)
    )
    assert errors and message in " ".join(errors)
    assert message in response.content.decode().replace("&#x27;", "'")
    version.refresh_from_db()
    assert {name: getattr(version, name) for name in version.CONTENT_FIELDS} == before
    assert not AuditEvent.objects.filter(action="template.version_update").exists()


def test_a_service_refusal_lands_on_its_section(alice, template):
    version = template.versions.get()
    TemplateVersion.objects.filter(pk=version.pk).update(
        hooks={"compact": [{"name": "memory_dedup", "enabled": True, "config": {"k": 2}}]}
    )
    browser = client(alice)
    data = picker_data(browser.get(edit_url(template)).context["form"])
    data["hooks-compact"] = ["session_summary", "memory_dedup"]
    data["hooks-compact-on"] = ["session_summary", "memory_dedup"]
    assert browser.post(edit_url(template), data).status_code == 302
    version.refresh_from_db()
    # The hook's config is kept when it moves.
    assert version.hooks["compact"] == [
        {"name": "session_summary", "enabled": True},
        {"name": "memory_dedup", "enabled": True, "config": {"k": 2}},
    ]

    refused = browser.post(
        edit_url(template),
        {
            **data,
            "editor": "json",
            "model_settings": "{}",
            "skills": "[]",
            "tool_permissions": "{}",
            "memory_policy": json.dumps({"retention_days": -1}),
            "hooks": "{}",
            "target_positions": "",
        },
    )
    assert refused.status_code == 200
    assert "retention_days" in " ".join(refused.context["form"].errors["memory_policy"])
    version.refresh_from_db()
    assert version.memory_policy == {"read_scopes": ["agent", "user"], "write_scopes": ["agent"]}


def test_an_outsider_and_an_employee_cannot_open_the_editor(template, bob, charlie):
    assert client(bob).get(edit_url(template)).status_code == 403
    assert client(charlie).get(edit_url(template)).status_code in (403, 404)
