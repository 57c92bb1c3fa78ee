"""Registry: for each model served under /api/v1/, how to make one object of an organization.

The cross-tenant sweep (tests/api/test_cross_tenant.py) discovers every route from the URL
resolver; a detail route whose model has no entry here fails the sweep, so a new endpoint is
never silently left out. Add an entry when you add an API for a new model.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import timedelta

from django.utils import timezone
from guardian.models import UserObjectPermission

from cadre.governance.models import AuditEvent
from cadre.tenancy import services
from cadre.tenancy.actors import member_actor
from cadre.tenancy.models import (
    ApiKey,
    Department,
    IMIdentity,
    Invitation,
    Member,
    Position,
)
from tests.factories import DepartmentFactory, IMIdentityFactory, MemberFactory, PositionFactory
from tests.skills.factories import tenant_factories as skills_factories

_counter = itertools.count(1)


def _member(owner: Member) -> Member:
    return MemberFactory(organization=owner.organization)


def _invitation(owner: Member) -> Invitation:
    _, invitation, _ = services.member_invite(
        actor=member_actor(owner), email=f"invitee{Invitation.objects.count()}@example.test"
    )
    return invitation


def _api_key(owner: Member) -> ApiKey:
    key, _ = services.api_key_create(actor=member_actor(owner), name="sweep", scopes=["org:read"])
    return key


def _audit_event(owner: Member) -> AuditEvent:
    department = services.department_create(actor=member_actor(owner), name="Audited dept")
    return AuditEvent.objects.filter(target_type="department", target_id=str(department.pk)).get()


def _grant(owner: Member) -> UserObjectPermission:
    department = DepartmentFactory(organization=owner.organization)
    grantee = MemberFactory(organization=owner.organization)
    services.object_grant(
        actor=member_actor(owner), member=grantee, permission="member.manage", target=department
    )
    return UserObjectPermission.objects.get(user=grantee.user, object_pk=str(department.pk))


def _memory(owner: Member):
    import hashlib

    from cadre.memory.models import Memory

    content = f"Acme's fiscal year starts in April ({Memory.objects.count()})."
    return Memory.objects.create(
        organization=owner.organization,
        scope="organization",
        scope_key="organization",
        content=content,
        search_text=content,
        content_hash=hashlib.sha256(content.encode()).hexdigest(),
    )


def _memory_task(owner: Member):
    from cadre.memory.models import MemoryTask

    return MemoryTask.objects.create(
        organization=owner.organization,
        kind="enrich",
        idempotency_key=f"sweep-{MemoryTask.objects.count()}-{owner.organization_id}",
    )


def _context_record(owner: Member):
    from cadre.memory.models import ContextRecord

    return ContextRecord.objects.create(organization=owner.organization, query="fiscal year")


def _masking_rule(owner: Member):
    from cadre.governance.models import MaskingRule

    return MaskingRule.objects.create(
        organization=owner.organization,
        name=f"Codename {MaskingRule.objects.count()}",
        entity_type="PROJECT",
        kind="pattern",
        pattern=r"PRJ-\d{4}",
    )


def agents_world(owner: Member, member: Member | None = None) -> dict:
    """A published template deployed to `member` (the owner unless given), with a run of that
    member's agent, a rollout and a trigger, all arranged by the owner.

    Made fresh on every call: a sweep request may change state (stop, cancel, publish). The
    authorization matrix passes another member to have a transcript that is not the owner's."""
    from cadre.agents import services as agents
    from cadre.agents.runtime.lifecycle import services as runtime
    from cadre.agents.runtime.lifecycle.triggers import trigger_create

    actor = member_actor(owner)
    member = member or owner
    n = next(_counter)
    position = PositionFactory(organization=owner.organization)
    member.positions.add(position)
    template = agents.template_create(
        actor=actor,
        name=f"Sweep role {n}",
        code=f"sweep-role-{n}",
        agent_md="# Persona",
        model_settings={"provider": "offline", "model": "offline-1"},
    )
    first = template.versions.get()
    agents.version_submit(actor=actor, version=first)
    agents.version_publish(actor=actor, version=first, reason="sweep")
    deployment = agents.deployment_create(
        actor=actor, name=f"Sweep {n}", template=template, positions=[position]
    )
    agent = deployment.agents.get(member=member)
    run = runtime.run_start(actor=member_actor(member), agent=agent, text="hello")
    second = agents.version_draft(actor=actor, template=template)
    second = agents.version_submit(actor=actor, version=second)
    second = agents.version_publish(actor=actor, version=second, reason="sweep")
    rollout = agents.rollout_start(actor=actor, deployment=deployment, version=second)
    draft = agents.version_draft(actor=actor, template=template)
    trigger, _ = trigger_create(
        actor=actor, name=f"Sweep trigger {n}", deployment=deployment, member=member
    )
    provider = agents.provider_config_create(
        actor=actor, name=f"Sweep provider {n}", kind="offline"
    )
    return {
        "template": template,
        "version": draft,
        "deployment": deployment,
        "agent": agent,
        "session": run.session,
        "run": run,
        "rollout": rollout,
        "trigger": trigger,
        "provider": provider,
    }


def _agents_factory(key: str) -> Callable[[Member], object]:
    return lambda owner: agents_world(owner)[key]


def _agent_subscription(owner: Member):
    from cadre.agents.models import AgentSubscription

    subscriber, publisher = agents_world(owner)["agent"], agents_world(owner)["agent"]
    return AgentSubscription.objects.create(
        organization=owner.organization, subscriber=subscriber, publisher=publisher
    )


def _connector(owner: Member):
    from connectors.base.services import connector_create

    return connector_create(
        actor=member_actor(owner),
        platform="webhook",
        name=f"sweep {next(_counter)}",
        credentials={"signing_secret": "sweep-secret-0123456789"},
    )


def _mcp_server(owner: Member):
    from cadre.agents.mcp_tools import mcp_server_create

    return mcp_server_create(
        actor=member_actor(owner),
        name=f"sweep-{next(_counter)}",
        transport="streamable_http",
        url="https://mcp.example.test/mcp",
        credentials={"Authorization": "Bearer sweep"},
    )


def _budget(owner: Member):
    from cadre.governance.models import Budget

    return Budget.objects.create(
        organization=owner.organization,
        scope=Budget.Scope.MEMBER,
        member=_member(owner),
        period=Budget.Period.MONTHLY,
        metric=Budget.Metric.TOKENS,
        limit=1000,
    )


def _usage_record(owner: Member):
    from cadre.governance.models import UsageRecord

    return UsageRecord.objects.create(
        organization=owner.organization,
        member=owner,
        purpose="run",
        model="sweep-model",
        status=UsageRecord.Status.SETTLED,
        input_tokens=10,
        output_tokens=5,
    )


def _eval_suite(owner: Member):
    from cadre.agents.evaluation.services import suite_create

    return suite_create(actor=member_actor(owner), name=f"Sweep suite {next(_counter)}")


def _eval_case(owner: Member):
    from cadre.agents.evaluation.services import case_create

    return case_create(actor=member_actor(owner), suite=_eval_suite(owner), data={"input": "hi"})


def _eval_run(owner: Member):
    from cadre.agents.evaluation.models import EvalRun

    case = _eval_case(owner)
    return EvalRun.objects.create(
        organization=owner.organization, suite=case.suite, candidate={"kind": "current"}
    )


def _lazy_models() -> dict[type, Callable[[Member], object]]:
    """Other apps' models, imported here so this module loads whatever exists yet."""
    from cadre.agents.evaluation.models import EvalCase, EvalRun, EvalSuite
    from cadre.agents.models import (
        Agent,
        AgentSubscription,
        AgentTemplate,
        Deployment,
        EventTrigger,
        McpServer,
        ModelProviderConfig,
        Rollout,
        Run,
        Session,
        TemplateVersion,
    )
    from cadre.governance.models import (
        Alert,
        AlertRule,
        AuditExport,
        Budget,
        Confirmation,
        MaskingRule,
        PolicyChain,
        UsageRecord,
    )
    from cadre.memory.models import ContextRecord, Memory, MemoryTask
    from connectors.models import (
        Connector,
        ConnectorBinding,
        DirectoryConflict,
        DirectoryDepartmentLink,
        DirectorySync,
        DirectoryUserLink,
        UnmappedIdentity,
    )

    return {
        Memory: _memory,
        MemoryTask: _memory_task,
        ContextRecord: _context_record,
        MaskingRule: _masking_rule,
        Budget: _budget,
        UsageRecord: _usage_record,
        AgentTemplate: _agents_factory("template"),
        TemplateVersion: _agents_factory("version"),
        Deployment: _agents_factory("deployment"),
        Agent: _agents_factory("agent"),
        Session: _agents_factory("session"),
        Run: _agents_factory("run"),
        Rollout: _agents_factory("rollout"),
        EventTrigger: _agents_factory("trigger"),
        ModelProviderConfig: _agents_factory("provider"),
        McpServer: _mcp_server,
        AgentSubscription: _agent_subscription,
        EvalSuite: _eval_suite,
        EvalCase: _eval_case,
        EvalRun: _eval_run,
        Connector: _connector,
        ConnectorBinding: lambda o: ConnectorBinding.objects.create(
            organization=o.organization, connector=_connector(o), name="sweep"
        ),
        UnmappedIdentity: lambda o: UnmappedIdentity.objects.create(
            organization=o.organization,
            connector=_connector(o),
            platform_user_id=f"u-{next(_counter)}",
        ),
        DirectorySync: lambda o: DirectorySync.objects.create(
            organization=o.organization, connector=_connector(o), status="succeeded"
        ),
        DirectoryConflict: lambda o: DirectoryConflict.objects.create(
            organization=o.organization,
            connector=_connector(o),
            kind="local_edit",
            platform_user_id=f"u-{next(_counter)}",
            member=o,
            fields=["title"],
        ),
        DirectoryUserLink: lambda o: DirectoryUserLink.objects.create(
            organization=o.organization,
            connector=_connector(o),
            platform_user_id=f"u-{next(_counter)}",
            member=_member(o),
        ),
        DirectoryDepartmentLink: lambda o: DirectoryDepartmentLink.objects.create(
            organization=o.organization,
            connector=_connector(o),
            platform_department_id=f"d-{next(_counter)}",
            department=DepartmentFactory(organization=o.organization),
        ),
        AuditExport: lambda o: AuditExport.objects.create(
            organization=o.organization, requested_by=o, formats=["jsonl"]
        ),
        PolicyChain: lambda o: PolicyChain.objects.get_or_create(
            organization=o.organization, scope="organization"
        )[0],
        Confirmation: lambda o: Confirmation.objects.create(
            organization=o.organization,
            idempotency_key=f"sweep:{next(_counter)}",
            requester=o,
            tool="im_send",
            summary="sweep",
            risk_level="high",
            decider_ids=[o.pk],
            expires_at=timezone.now() + timedelta(hours=1),
        ),
        AlertRule: lambda o: AlertRule.objects.create(
            organization=o.organization, name=f"sweep-{next(_counter)}", kind="denied_spike"
        ),
        Alert: lambda o: Alert.objects.create(
            organization=o.organization,
            fingerprint=f"sweep-{next(_counter)}",
            severity="warning",
            title="sweep",
        ),
    }


# model -> factory(owner of the organization) -> a saved object of that organization
FACTORIES: dict[type, Callable[[Member], object]] = {
    **_lazy_models(),
    Department: lambda owner: DepartmentFactory(organization=owner.organization),
    Position: lambda owner: PositionFactory(organization=owner.organization),
    Member: _member,
    Invitation: _invitation,
    IMIdentity: lambda owner: IMIdentityFactory(member=_member(owner)),
    ApiKey: _api_key,
    AuditEvent: _audit_event,
    UserObjectPermission: _grant,
    **skills_factories(),
}


# --- routes keyed by something other than a model's pk -----------------------------------


def _hub_skill(owner: Member) -> dict:
    """kwargs naming an organization-visible skill of the owner's organization."""
    from hub.tests.factories import publish

    n = next(_counter)
    version = publish(owner, name=f"sweep-skill-{n}", visibility="organization")
    package = version.package
    return {
        "namespace": package.namespace.handle,
        "name": package.name,
        "slug": package.name,
        "version": version.version,
        "tag": "latest",
        "path": "SKILL.md",
    }


def _hub_upload_ticket(owner: Member) -> dict:
    import secrets
    from datetime import timedelta

    from django.utils import timezone

    from hub.models import UploadTicket

    ticket = UploadTicket.objects.create(
        organization=owner.organization,
        ticket=secrets.token_urlsafe(16),
        path="SKILL.md",
        size=3,
        sha256="0" * 64,
        created_by=owner,
        expires_at=timezone.now() + timedelta(hours=1),
    )
    return {"ticket": ticket.ticket}


def _hub_install(owner: Member) -> dict:
    from hub.tests.agent_setup import install_and_run

    return install_and_run(owner)  # {"pk": a skill install, "run_id": a run with it}


# route name -> factory(owner) -> the URL kwargs of one object of the owner's organization
ROUTE_KWARGS: dict[str, Callable[[Member], dict]] = {
    "hub-skill": _hub_skill,
    "hub-skill-deprecate": _hub_skill,
    "hub-skill-download": _hub_skill,
    "hub-skill-tag": _hub_skill,
    "hub-skill-templates": _hub_skill,
    "hub-versions": _hub_skill,
    "hub-version": _hub_skill,
    "hub-version-review": _hub_skill,
    "hub-version-yank": _hub_skill,
    "hub-version-unyank": _hub_skill,
    "hub-version-file": _hub_skill,
    "clawhub-skill": _hub_skill,
    "clawhub-versions": _hub_skill,
    "clawhub-version": _hub_skill,
    "clawhub-file": _hub_skill,
    "clawhub-moderation": _hub_skill,
    "clawhub-tag": _hub_skill,
    "clawhub-upload": _hub_upload_ticket,
    "hub-install": _hub_install,
    "hub-install-apply": _hub_install,
    "hub-install-rollback": _hub_install,
    "hub-run-skills": _hub_install,
    "hub-run-feedback": _hub_install,
}
