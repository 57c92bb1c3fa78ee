# ruff: noqa: F811 - the fixtures imported from tests.console.agents_setup are parameters here
"""Role templates in the console: who may open which page, create from a preset, edit a draft
with validated JSON, diff, submit and publish (audited), and drafting from documents."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from cadre.agents.models import AgentTemplate, TemplateVersion
from cadre.governance.models import AuditEvent
from tests.console.agents_setup import (  # noqa: F401 - fixtures
    client,
    owner,
    published,
    template,
)

pytestmark = pytest.mark.django_db


def test_templates_list_is_read_by_employees_but_only_managers_create(template, bob, make_member):
    admin = make_member(roles=["business_admin"])
    listing = client(admin).get(reverse("console:templates"))
    assert listing.status_code == 200
    assert "Sales assistant" in listing.content.decode()
    assert reverse("console:template_create") in listing.content.decode()
    as_employee = client(bob).get(reverse("console:templates"))
    assert as_employee.status_code == 200
    assert reverse("console:template_create") not in as_employee.content.decode()
    assert client(bob).get(reverse("console:template_create")).status_code == 403
    version_edit = reverse("console:template_version_edit", args=[template.pk, 1])
    assert client(bob).get(version_edit).status_code == 403
    no_roles = make_member(roles=[])
    assert client(no_roles).get(reverse("console:templates")).status_code == 403


def test_htmx_search_returns_only_the_results(template, alice):
    response = client(alice).get(
        reverse("console:templates"), {"q": "nothing-like-it"}, HTTP_HX_REQUEST="true"
    )
    page = response.content.decode()
    assert page.startswith('<div id="template-results">')
    assert "No template matches" in page


def test_outsider_gets_404_for_every_template_page(template, charlie):
    outsider = client(charlie)
    for url in [
        reverse("console:template", args=[template.pk]),
        reverse("console:template_version", args=[template.pk, 1]),
        reverse("console:template_version_edit", args=[template.pk, 1]),
        reverse("console:template_diff", args=[template.pk]) + "?a=1&b=1",
        reverse("console:template_generate", args=[template.pk]),
    ]:
        assert outsider.get(url).status_code == 404, url
    submit = reverse("console:template_version_action", args=[template.pk, 1, "submit"])
    assert outsider.post(submit).status_code == 404
    assert template.versions.get().status == TemplateVersion.Status.DRAFT


def test_create_from_a_preset_fills_the_first_draft(alice):
    response = client(alice).post(
        reverse("console:template_create"),
        {"name": "Field sales", "code": "field-sales", "preset": "sales"},
    )
    template = AgentTemplate.objects.get(code="field-sales")
    assert response.status_code == 302
    assert response["Location"] == reverse("console:template", args=[template.pk])
    version = template.versions.get()
    assert template.preset == "sales"
    assert version.status == TemplateVersion.Status.DRAFT
    assert version.sop.strip() and version.tool_permissions


def test_duplicate_code_is_shown_on_the_form(template, alice):
    response = client(alice).post(
        reverse("console:template_create"), {"name": "Again", "code": "sales-assistant"}
    )
    assert response.status_code == 200
    assert "already exists" in response.content.decode()
    assert AgentTemplate.objects.filter(code="sales-assistant").count() == 1


def _edit_data(version, **changes) -> dict:
    data = {
        "name": version.name,
        "target_positions": ", ".join(version.target_positions),
        "sop": version.sop,
        "agent_md": version.agent_md,
        "user_md_template": version.user_md_template,
        "model_settings": json.dumps(version.model_settings),
        "skills": json.dumps(version.skills),
        "tool_permissions": json.dumps(version.tool_permissions),
        "memory_policy": json.dumps(version.memory_policy),
        "hooks": json.dumps(version.hooks),
        "change_note": "",
    }
    data.update(changes)
    return data


def test_edit_diff_submit_and_publish_through_the_console(alice, template, published):
    browser = client(alice)
    started = browser.post(reverse("console:template_new_draft", args=[template.pk]))
    assert started["Location"] == reverse("console:template_version_edit", args=[template.pk, 2])
    draft = template.versions.get(number=2)
    edit_url = reverse("console:template_version_edit", args=[template.pk, 2])

    broken = browser.post(edit_url, _edit_data(draft, tool_permissions='{"im_send": '))
    assert broken.status_code == 200
    assert "Not valid JSON" in broken.content.decode()
    unknown = browser.post(edit_url, _edit_data(draft, tool_permissions='{"teleport": {}}'))
    assert "unknown tool" in unknown.content.decode()
    draft.refresh_from_db()
    assert "teleport" not in draft.tool_permissions

    saved = browser.post(
        edit_url,
        _edit_data(
            draft,
            sop="# SOP\n## Pricing\nStandard discount is 8 percent.\n<script>alert(1)</script>\n",
            memory_policy='{"read_scopes": ["agent"], "write_scopes": ["agent"]}',
            target_positions="sales, key-accounts",
        ),
    )
    assert saved.status_code == 302
    draft.refresh_from_db()
    assert "8 percent" in draft.sop
    assert draft.memory_policy == {"read_scopes": ["agent"], "write_scopes": ["agent"]}
    assert draft.target_positions == ["sales", "key-accounts"]

    diff_url = reverse("console:template_diff", args=[template.pk])
    split = browser.get(diff_url, {"a": 1, "b": 2}).content.decode()
    assert "diff_add" in split or "diff_chg" in split
    assert "v1" in split and "v2" in split and "discount" in split  # the sop, side by side
    assert "<code>sop</code>" in split and "<code>memory_policy</code>" in split
    assert "tool_permissions" not in split  # unchanged fields are not listed
    assert "<script>alert" not in split and "&lt;script&gt;alert" in split  # escaped
    unified = browser.get(diff_url, {"a": 1, "b": 2, "layout": "unified"}).content.decode()
    assert "-Standard discount is 5 percent." in unified
    assert "+Standard discount is 8 percent." in unified
    assert "<script>alert" not in unified

    action = "console:template_version_action"
    assert browser.post(reverse(action, args=[template.pk, 2, "submit"])).status_code == 302
    published_now = browser.post(
        reverse(action, args=[template.pk, 2, "publish"]), {"reason": "reviewed by sales"}
    )
    assert published_now.status_code == 302
    draft.refresh_from_db()
    assert draft.status == TemplateVersion.Status.PUBLISHED
    event = AuditEvent.objects.get(action="template.publish", target_id=str(draft.pk))
    assert event.reason == "reviewed by sales"
    # published: the edit page refuses and says why
    refused = browser.get(edit_url, follow=True)
    assert "Only a draft can be edited" in refused.content.decode()
    detail = browser.get(reverse("console:template", args=[template.pk])).content.decode()
    assert detail.count('badge badge-published">Published') == 2


def test_publishing_a_draft_directly_is_refused_with_a_message(alice, template):
    browser = client(alice)
    url = reverse("console:template_version_action", args=[template.pk, 1, "publish"])
    page = browser.post(url, follow=True).content.decode()
    assert "cannot be publish" in page
    assert template.versions.get().status == TemplateVersion.Status.DRAFT


def test_generate_from_documents_makes_an_offline_draft(alice, template, published):
    document = SimpleUploadedFile(
        "playbook.md",
        b"# Discovery\n- Ask about the budget\n- Never promise delivery dates\n",
        content_type="text/markdown",
    )
    response = client(alice).post(
        reverse("console:template_generate", args=[template.pk]),
        {"files": [document], "notes": ""},
    )
    assert response.status_code == 302
    version = template.versions.get(number=2)
    assert version.generated_from["mode"] == "offline"
    assert version.generated_from["files"][0]["name"] == "playbook.md"
    assert "Never promise delivery dates" in version.agent_md
    page = client(alice).get(response["Location"]).content.decode()
    assert "Generated from documents" in page and "offline" in page


def test_generate_rejects_unsupported_files_and_empty_forms(alice, template):
    url = reverse("console:template_generate", args=[template.pk])
    empty = client(alice).post(url, {"notes": "  "})
    assert "Upload at least one document" in empty.content.decode()
    exe = SimpleUploadedFile("tool.exe", b"MZ", content_type="application/octet-stream")
    bad = client(alice).post(url, {"files": [exe]})
    assert bad.status_code == 200
    assert "only md, txt, docx and pdf" in bad.content.decode()
    assert template.versions.count() == 1
