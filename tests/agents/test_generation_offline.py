"""Drafting a template from documents without a model: the draft keeps the documents' content —
headings, paragraphs (a "Purpose" section's text included), numbered steps and lists, in English
and Chinese, markdown or plain text — and names the role once ("Marketing assistant", never
"Marketing assistant assistant"); generating fills a template's open draft (a new template's v1)
and is refused, before any model is asked, while a version is in review."""

from __future__ import annotations

import pytest

from cadre.agents import generation, services
from cadre.agents.generation import offline_draft
from cadre.agents.models import TemplateVersion
from cadre.errors import Conflict
from cadre.governance.models import AuditEvent

MARKETING = """# Marketing playbook

## Purpose
This assistant helps the marketing team plan campaigns
and keep the brand voice consistent across channels.

## Campaign checklist
1. Define the audience and the one message they should remember.
2. Draft the copy in the brand voice.
3) Get legal review for any claim about prices.

## Rules
- Never publish a campaign without the brand lead's approval.
Do not share unreleased prices. Always cite the source of a statistic.
"""

SALES_ZH = """# 销售工作手册

## 目的
帮助销售团队跟进客户，
记录每次拜访的结果。

## 拜访流程
1、确认客户需求
2、准备报价单
3、约定下次跟进时间

## 边界
禁止向客户承诺交付日期。
"""

SUPPORT_TXT = """Purpose:
Support staff answer every customer ticket within one business day.

Escalation
==========
Billing problems go to finance; outages go to the on-call engineer.
"""


def test_paragraphs_steps_and_lists_are_kept_in_the_sop():
    draft = offline_draft("Marketing assistant", [("playbook.md", MARKETING)], "")
    sop = draft["sop"]
    assert "### Purpose" in sop
    # The paragraph, its two lines joined: the "Purpose" text is not lost.
    assert (
        "This assistant helps the marketing team plan campaigns and keep the brand voice "
        "consistent across channels." in sop
    )
    assert "1. Define the audience and the one message they should remember." in sop
    assert "3. Get legal review for any claim about prices." in sop
    assert "- Never publish a campaign without the brand lead's approval." in sop
    assert "Do not share unreleased prices. Always cite the source of a statistic." in sop
    assert sop.index("### Purpose") < sop.index("This assistant helps") < sop.index("1. Define")


def test_the_persona_names_the_role_once_and_carries_the_purpose():
    agent_md = offline_draft("Marketing assistant", [("playbook.md", MARKETING)], "")["agent_md"]
    assert "You are the Marketing assistant of {{member.display_name}}." in agent_md
    assert "assistant assistant" not in agent_md
    persona = agent_md.split("# Persona", 1)[1].split("# Instructions", 1)[0]
    assert "helps the marketing team plan campaigns and keep the brand voice" in persona
    # A rule that is no prohibition is an instruction; prohibitions are boundaries.
    instructions = agent_md.split("# Instructions", 1)[1].split("# Boundaries", 1)[0]
    assert "- Always cite the source of a statistic." in instructions
    assert "- Be ready to help with: Campaign checklist" in instructions
    assert "Be ready to help with: Purpose" not in instructions
    assert "Marketing playbook" not in instructions  # the document's title is no topic
    boundaries = agent_md.split("# Boundaries", 1)[1]
    assert "- Never publish a campaign without the brand lead's approval." in boundaries
    assert "- Do not share unreleased prices." in boundaries


@pytest.mark.parametrize(
    ("name", "persona"),
    [
        ("Sales", "You are the Sales assistant of {{member.display_name}}."),
        ("Support agent", "You are the Support agent of {{member.display_name}}."),
        ("HR Helper", "You are the HR Helper of {{member.display_name}}."),
        ("销售助手", "你是{{member.display_name}}的销售助手。"),
        ("销售", "你是{{member.display_name}}的销售助手。"),
    ],
)
def test_a_role_word_is_never_doubled(name, persona):
    agent_md = offline_draft(name, [("notes.md", "- Be kind")], "")["agent_md"]
    assert persona in agent_md
    assert "assistant assistant" not in agent_md.lower() and "助手助手" not in agent_md


def test_a_chinese_document_keeps_its_paragraphs_steps_and_boundaries():
    draft = offline_draft("销售助手", [("手册.md", SALES_ZH)], "")
    sop, agent_md = draft["sop"], draft["agent_md"]
    # The two lines of the paragraph join without a space between Chinese characters.
    assert "帮助销售团队跟进客户，记录每次拜访的结果。" in sop
    assert "1. 确认客户需求\n2. 准备报价单\n3. 约定下次跟进时间" in sop
    assert "帮助销售团队跟进客户，记录每次拜访的结果。" in agent_md.split("# Instructions")[0]
    assert "- 禁止向客户承诺交付日期。" in agent_md.split("# Boundaries", 1)[1]
    assert "- Be ready to help with: 拜访流程" in agent_md


def test_a_plain_text_document_with_labels_and_underlined_headings_is_kept():
    draft = offline_draft("Support", [("support.txt", SUPPORT_TXT)], "- Log every call")
    sop = draft["sop"]
    assert (
        "### Purpose\n\nSupport staff answer every customer ticket within one business day." in sop
    )
    assert "### Escalation\n\nBilling problems go to finance; outages go to the on-call" in sop
    assert "## From notes\n\n- Log every call" in sop
    assert "Support staff answer every customer ticket" in draft["agent_md"]


# --- where the draft goes --------------------------------------------------------------------


@pytest.mark.django_db
def test_a_new_templates_open_v1_is_filled_keeping_its_other_settings(owner, template):
    before = template.versions.get()
    version = generation.template_generate(
        actor=owner,
        template=template,
        documents=[("playbook.md", MARKETING.encode()), ("手册.md", SALES_ZH.encode())],
    )
    assert version.pk == before.pk and version.number == 1 and version.status == "draft"
    assert template.versions.count() == 1
    assert "This assistant helps the marketing team" in version.sop
    assert "帮助销售团队跟进客户" in version.sop
    assert version.model_settings == before.model_settings  # the rest of the draft is kept
    assert version.tool_permissions == before.tool_permissions
    assert version.generated_from["mode"] == "offline"
    assert [f["name"] for f in version.generated_from["files"]] == ["playbook.md", "手册.md"]
    assert AuditEvent.objects.filter(action="template.generate", target_id=str(version.pk)).exists()


@pytest.mark.django_db
def test_a_version_in_review_is_not_overwritten(owner, template):
    version = services.version_submit(actor=owner, version=template.versions.get())
    sop = version.sop
    with pytest.raises(Conflict) as refused:
        generation.template_generate(
            actor=owner, template=template, documents=[("playbook.md", MARKETING.encode())]
        )
    assert refused.value.code == "not_draft" and "withdraw it to draft" in refused.value.message
    version.refresh_from_db()
    assert version.sop == sop and version.status == TemplateVersion.Status.IN_REVIEW
    assert template.versions.count() == 1
    assert not AuditEvent.objects.filter(action="template.generate").exists()


@pytest.mark.django_db
def test_with_only_published_versions_a_new_draft_is_started(owner, template, published):
    version = generation.template_generate(
        actor=owner, template=template, documents=[("playbook.md", MARKETING.encode())]
    )
    assert version.number == 2 and version.status == "draft"
    published.refresh_from_db()
    assert "This assistant helps" not in published.sop
