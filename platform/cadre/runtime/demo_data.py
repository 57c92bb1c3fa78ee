"""Demo Co's sample data: what a newcomer tries in the first minutes, and its removal.

Seeded once per organization (a DemoData row remembers it, also after a reset), all through the
apps' services so every object is audited like any other change: published role templates from
the presets, dispatched so the demo owner has an agent in Chat; a second person (an account
executive) to try reviews and confirmations with; memories with their provenance; a published
Hub skill; a template policy chain with masking on; a run waiting on a confirmation. Each object
is labelled "(demo)" and listed in the DemoData row, so `demo_reset` removes exactly these (and
what the demo agents produced) and nothing the organization created itself.

The texts exist in English and in Simplified Chinese (`DemoTexts`): an organization whose
default language is Chinese (the demo organization `make up` creates for a Chinese-speaking
installer) gets the Chinese ones, the presets' Chinese texts included.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from cadre.agents import services as agents
from cadre.agents.models import Agent, AgentTemplate, Deployment, ModelProviderConfig
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.agents.template_policy import template_policy_chain_set
from cadre.governance import audit
from cadre.governance.models import Confirmation, PolicyChain
from cadre.memory import selectors as memory_selectors
from cadre.memory import services as memory
from cadre.runtime.models import DemoData
from cadre.tenancy import services as tenancy
from cadre.tenancy.actors import member_actor, system_actor
from cadre.tenancy.languages import organization_language
from cadre.tenancy.models import Member, Organization, Position, User
from hub import services as hub
from hub.bundles import bundle_from_files
from hub.models import SkillPackage

MARK = "(demo)"
NOTE = "Demo data, removed by `cadre manage demo_reset`."
EMPLOYEE_EMAIL = "employee@demo.local"
EMPLOYEE_NAME = f"Dana Example {MARK}"
EMPLOYEE_POSITION = "Account Executive"
SKILL_NAME = "meeting-brief"
# The request the demo run makes: the offline model's rule for it calls task_create, which the
# demo Sales template holds for a person's confirmation (`DEMO_TOOL_POLICY`). Not a message to
# the staff: a fresh install has no IM connector, and a send that cannot succeed is refused
# before anyone is asked (records.delivery.message_unreachable).
CONFIRMATION_REQUEST = "remind me to send the Q3 price list to the sales team"
DEMO_TOOL_POLICY = {"task_create": {"risk": "medium", "confirmation": "always"}}

# (preset, template name, code, who gets an agent: "owner" and/or position names)
TEMPLATES: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    ("sales", f"Sales assistant {MARK}", "demo-sales", ("owner", EMPLOYEE_POSITION)),
    ("customer_service", f"Support assistant {MARK}", "demo-support", ("Support Specialist",)),
    ("it_operations", f"IT assistant {MARK}", "demo-it-ops", ("Site Reliability Engineer",)),
)

# (scope, kind, content, source_kind, source_ref)
MEMORIES: tuple[tuple[str, str, str, str, dict], ...] = (
    (
        "organization",
        "requirement",
        "Demo Co's standard discount is 5 percent; a discount above 10 percent needs the sales "
        "lead's approval.",
        "import",
        {"document": f"Demo Co sales handbook {MARK}", "section": "Pricing"},
    ),
    (
        "organization",
        "fact",
        "Demo Co support answers from 08:00 to 18:00 CET on weekdays; urgent tickets go to the "
        "on-call engineer.",
        "import",
        {"document": f"Demo Co support handbook {MARK}", "section": "Hours"},
    ),
    (
        "user",
        "preference",
        "The demo admin prefers answers as short bullet points.",
        "user_statement",
        {"said_in": f"onboarding chat {MARK}"},
    ),
)

SKILL_MD = f"""---
name: {SKILL_NAME}
description: Prepare a one-page brief before a customer meeting {MARK}.
---
# Meeting brief {MARK}

1. List the account's open quotes, last orders and known contacts.
2. Note the customer's preferences from memory.
3. End with the next best action and one question to ask.
"""


@dataclass(frozen=True)
class DemoTexts:
    """Everything the sample data says, in one language (the identifiers stay the same)."""

    language: str
    mark: str
    note: str
    employee_name: str
    employee_position: str
    confirmation_request: str
    templates: tuple[tuple[str, str, str, tuple[str, ...]], ...]
    memories: tuple[tuple[str, str, str, str, dict], ...]
    skill_md: str
    skill_display_name: str
    skill_review_note: str
    publish_reason: str


ENGLISH = DemoTexts(
    language="en",
    mark=MARK,
    note=NOTE,
    employee_name=EMPLOYEE_NAME,
    employee_position=EMPLOYEE_POSITION,
    confirmation_request=CONFIRMATION_REQUEST,
    templates=TEMPLATES,
    memories=MEMORIES,
    skill_md=SKILL_MD,
    skill_display_name=f"Meeting brief {MARK}",
    skill_review_note=f"sample skill {MARK}",
    publish_reason=f"sample template {MARK}",
)

MARK_ZH = "（演示）"
EMPLOYEE_POSITION_ZH = "客户经理"
CHINESE = DemoTexts(
    language="zh-hans",
    mark=MARK_ZH,
    note="演示数据，可用 `cadre manage demo_reset` 删除。",
    employee_name=f"王芳{MARK_ZH}",
    employee_position=EMPLOYEE_POSITION_ZH,
    # The offline model's Chinese rule for it calls task_create, as in English.
    confirmation_request="提醒我把第三季度价目表发给销售团队",
    templates=(
        ("sales", f"销售助理{MARK_ZH}", "demo-sales", ("owner", EMPLOYEE_POSITION_ZH)),
        ("customer_service", f"客服助理{MARK_ZH}", "demo-support", ("技术支持专员",)),
        ("it_operations", f"IT 助理{MARK_ZH}", "demo-it-ops", ("站点可靠性工程师",)),
    ),
    memories=(
        (
            "organization",
            "requirement",
            "演示公司的标准折扣为 5%；超过 10% 的折扣需要销售负责人审批。",
            "import",
            {"document": f"演示公司销售手册{MARK_ZH}", "section": "定价"},
        ),
        (
            "organization",
            "fact",
            "演示公司客服的服务时间为工作日 9:00 至 18:00（北京时间）；紧急工单转给值班工程师。",
            "import",
            {"document": f"演示公司客服手册{MARK_ZH}", "section": "服务时间"},
        ),
        (
            "user",
            "preference",
            "演示管理员希望回答以简短的要点列出。",
            "user_statement",
            {"said_in": f"入职对话{MARK_ZH}"},
        ),
    ),
    skill_md=f"""---
name: {SKILL_NAME}
description: 在客户会议前准备一页纸的简报{MARK_ZH}。
---
# 会议简报{MARK_ZH}

1. 列出该客户的未结报价、最近订单和已知联系人。
2. 从记忆中整理客户的偏好。
3. 最后给出下一步最佳行动，以及一个要问客户的问题。
""",
    skill_display_name=f"会议简报{MARK_ZH}",
    skill_review_note=f"示例技能{MARK_ZH}",
    publish_reason=f"示例模板{MARK_ZH}",
)


def demo_texts(language: str) -> DemoTexts:
    """The sample data's texts in `language` ("zh-hans", "zh-..." → Chinese, else English)."""
    return CHINESE if language.lower().startswith("zh") else ENGLISH


@dataclass(frozen=True)
class DemoSeed:
    employee_email: str
    employee_password: str | None  # set only when this run created the account
    agent: Agent | None  # the owner's demo agent


def _record(items: list[dict], obj) -> None:
    items.append({"type": obj._meta.label_lower, "id": obj.pk})


def _model_settings(preset: dict, provider: ModelProviderConfig | None) -> dict:
    settings = dict(preset.get("model_settings") or {})
    if provider is not None:
        settings.update(
            provider=provider.kind, model=provider.default_model, provider_config=provider.pk
        )
    return settings


def _employee(owner_actor, items: list[dict], texts: DemoTexts) -> tuple[Member, str | None]:
    position = Position.objects.filter(
        organization=owner_actor.organization, name=texts.employee_position
    ).first()
    member, _, token = tenancy.member_invite(
        actor=owner_actor,
        email=EMPLOYEE_EMAIL,
        display_name=texts.employee_name,
        roles=["employee"],
        department=position.department if position else None,
        positions=[position] if position else None,
    )
    existing = User.objects.filter(email=EMPLOYEE_EMAIL).first()
    password = None if existing else secrets.token_urlsafe(12)
    member = tenancy.invitation_accept(
        token=token, password=password, display_name=texts.employee_name, user=existing
    )
    _record(items, member)
    if existing is None:
        _record(items, member.user)
    return member, password


def _skill(owner_actor, items: list[dict], texts: DemoTexts) -> None:
    outcome = hub.package_publish(
        actor=owner_actor,
        bundle=bundle_from_files({"SKILL.md": texts.skill_md.encode()}, folder_name=SKILL_NAME),
        version="1.0.0",
        name=SKILL_NAME,
        changelog=texts.note,
        display_name=texts.skill_display_name,
        review_note=texts.skill_review_note,
    )
    _record(items, outcome.version.package)


@transaction.atomic
def demo_data_seed(
    *, organization: Organization, owner: Member, provider: ModelProviderConfig | None = None
) -> DemoSeed | None:
    """Seed the sample data once; None when this organization has had it before."""
    Organization.objects.select_for_update().filter(pk=organization.pk).first()
    if DemoData.objects.filter(organization=organization).exists():
        return None
    actor = member_actor(owner)
    texts = demo_texts(organization_language(organization))
    items: list[dict] = []
    employee, password = _employee(actor, items, texts)
    owner_agent = None
    for preset_key, name, code, targets in texts.templates:
        preset = agents.presets(texts.language)[preset_key]
        template = agents.template_create(
            actor=actor,
            name=name,
            code=code,
            # Chinese sentences follow each other without a space
            description=(" " if texts.language == "en" else "").join(
                (preset["description"], texts.note)
            ),
            preset=preset_key,
            model_settings=_model_settings(preset, provider),
        )
        _record(items, template)
        if preset_key == "sales":
            chain = template_policy_chain_set(
                actor=actor,
                template=template,
                plugins=[{"plugin": "masking", "config": {"default": "pseudonymize"}}],
            )
            _record(items, chain)
        version = template.versions.get()
        if version.name != name:  # a preset's own name would hide the "(demo)" label in Chat
            version = agents.version_update(actor=actor, version=version, name=name)
        if preset_key == "sales":  # its agent asks before it adds a task (the demo's request)
            version = agents.version_update(
                actor=actor,
                version=version,
                tool_permissions={**version.tool_permissions, **DEMO_TOOL_POLICY},
            )
        agents.version_submit(actor=actor, version=version)
        agents.version_publish(actor=actor, version=version, reason=texts.publish_reason)
        positions = list(
            Position.objects.filter(organization=organization, name__in=targets).order_by("pk")
        )
        deployment = agents.deployment_create(
            actor=actor,
            name=name,
            template=template,
            positions=positions,
            members=[owner] if "owner" in targets else [],
        )
        if "owner" in targets:
            owner_agent = deployment.agents.get(member=owner)
    for scope, kind, content, source_kind, source_ref in texts.memories:
        written = memory.memory_add(
            actor=actor,
            scope=scope,
            kind=kind,
            content=content,
            source_kind=source_kind,
            source_ref={**source_ref, "demo": True},
            tags=["demo"],
        )
        _record(items, written)
    _skill(actor, items, texts)
    # Queued now, executed by the runs worker once `cadre up` starts it: the offline model asks
    # to message the whole staff, and the run waits for the owner's decision.
    pending = runtime.run_start(actor=actor, agent=owner_agent, text=texts.confirmation_request)
    _record(items, pending)
    DemoData.objects.create(organization=organization, items=items)
    audit.record(
        actor=actor,
        action="demo.seed",
        target=organization,
        after={"items": len(items), "employee": employee.pk},
    )
    return DemoSeed(EMPLOYEE_EMAIL, password, owner_agent)


@transaction.atomic
def demo_reset(*, organization: Organization) -> dict[str, int] | None:
    """Remove the demo data (and what the demo agents produced: their sessions, runs,
    confirmations and memories); None when there is none. The organization's own data stays."""
    data = (
        DemoData.objects.select_for_update()
        .filter(organization=organization, reset_at=None)
        .first()
    )
    if data is None:
        return None
    actor = system_actor(organization, label="demo_reset")
    templates = AgentTemplate.objects.filter(
        organization=organization, pk__in=data.ids("agents.agenttemplate")
    )
    deployments = Deployment.objects.filter(organization=organization, template__in=templates)
    agent_ids = list(Agent.objects.filter(deployment__in=deployments).values_list("pk", flat=True))
    # The demo's memories, through the memory gate as a named system reader (purged, shown
    # to no one: not audited as a read; each purge is audited by memory_purge_now).
    reader = memory_selectors.system_reader(
        organization, job="demo_reset", reason="purge the demo data's memories"
    )
    memories = (
        memory_selectors.memory_queryset(reader, with_deleted=True)
        .filter(purged_at=None)
        .filter(
            Q(pk__in=data.ids("memory.memory"))
            | Q(scope_key__in=[f"agent:{pk}" for pk in agent_ids])
        )
    )
    removed = {"memories": 0}
    for item in memories.order_by("pk"):
        memory.memory_purge_now(actor=actor, memory=item, reason=f"demo data removed {MARK}")
        removed["memories"] += 1
    confirmations = Confirmation.objects.filter(organization=organization, agent_id__in=agent_ids)
    removed["confirmations"] = confirmations.count()
    confirmations.delete()
    removed["agents"] = len(agent_ids)
    removed["deployments"] = deployments.count()
    deployments.delete()
    removed["templates"] = templates.count()
    templates.delete()
    PolicyChain.objects.filter(
        organization=organization,
        scope=PolicyChain.Scope.TEMPLATE,
        pk__in=data.ids("governance.policychain"),
    ).delete()
    packages = SkillPackage.objects.filter(
        organization=organization, pk__in=data.ids("hub.skillpackage")
    )
    removed["skills"] = packages.count()
    packages.delete()
    members = Member.objects.filter(organization=organization, pk__in=data.ids("tenancy.member"))
    removed["members"] = members.count()
    members.delete()
    # The account the demo created, unless it has since joined another organization.
    User.objects.filter(pk__in=data.ids("tenancy.user"), memberships__isnull=True).delete()
    data.reset_at = timezone.now()
    data.save(update_fields=["reset_at"])
    audit.record(
        actor=actor, action="demo.reset", target=organization, changes={"removed": removed}
    )
    return removed
