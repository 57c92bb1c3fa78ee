"""A demo-like organization for the console's page tests: the demo `make up` creates (in
English or in Chinese), plus one of each object it lacks (an API key, OIDC and SAML identity
providers, a connector, a budget, an alert rule, an evaluation suite and run, a skill
candidate...), made through the services; and the console pages that name an object, from the
authorization matrix (tests/authorization/matrix.py), with the object each one shows."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from django.utils import timezone

from cadre.agents import services as agents
from cadre.agents.evaluation import services as evaluation
from cadre.agents.mcp_tools import mcp_server_create
from cadre.agents.models import AgentTemplate, ModelProviderConfig, Run
from cadre.agents.runtime.lifecycle import execution as engine
from cadre.governance.alerts import alert_rule_create
from cadre.governance.budgets import budget_create
from cadre.governance.export.jobs import audit_export_create
from cadre.governance.models import Alert, AuditEvent, Budget, Confirmation
from cadre.memory.models import Memory
from cadre.runtime.demo import demo_setup
from cadre.runtime.demo_data import EMPLOYEE_EMAIL, SKILL_NAME
from cadre.skills import services as skills
from cadre.tenancy import services as tenancy
from cadre.tenancy.actors import member_actor
from cadre.tenancy.models import Department, IdentityProvider, Member, Position
from connectors.base.services import connector_create
from connectors.models import UnmappedIdentity
from hub.models import SkillVersion
from hub.tests.agent_setup import install_and_run
from tests.authorization.matrix import declarations
from tests.authorization.test_matrix import ROUTES
from tests.conftest import PASSWORD
from tests.skills.conftest import skill_md

# GET routes with parameters that are not console pages a signed-in owner opens.
NOT_PAGES = {
    "console:identity_provider_test": "starts a sign-in at the identity provider (off-site)",
    "console:audit_export_download": "a file download (the signed bundle), not a page",
    "console:member_reinvite": "an action (POST): a GET goes back to the member's page",
}
# Routes that answer a piece of a page (htmx), not a whole page in the console's layout.
FRAGMENTS = {
    "console:connector_directory": "the connector page's directory card, polled while a sync runs",
}
# Pages that need more than their object, and what.
QUERIES: dict[str, Callable[[dict], str]] = {
    # which template the skill goes into: the package page's picker adds it
    "console:hub_template_install": lambda world: f"?template={world['template'][0][1].pk}",
}
# (page, variant) -> where it sends the owner instead, and why that is right.
REDIRECTS: dict[tuple[str, str], tuple[str, str]] = {
    ("console:template_version_edit", "published"): (
        "console:template_version",
        "a published version is read-only: its edit link opens the version",
    ),
}


# What the builder names, in the organization's language (Chinese names in the English demo
# too, to see CJK text drawn in the screenshots).
WORDS = {
    "en": {
        "summary": "Send the Q3 price list to the sales team",
        "sales": "Sales",
        "position": "Account Executive",
        "key": "CI pipeline",
        "connector": "Helpdesk webhook",
        "suite": "Pricing answers",
        "case": "What is the standard discount?",
        "rule": "Denied calls spike",
        "alert": "Denied tool calls spiked",
        "skill": "Check a quote before it is sent.",
        "step": "One",
        "provider": "Offline",
    },
    "zh-hans": {
        "summary": "把第三季度价格表发给销售团队",
        "sales": "销售部",
        "position": "客户经理",
        "key": "持续集成流水线",
        "connector": "服务台回调",
        "suite": "报价问答",
        "case": "标准折扣是多少？",
        "rule": "拒绝调用激增",
        "alert": "被拒绝的工具调用激增",
        "skill": "发送报价前逐项核对。",
        "step": "核对价格",
        "provider": "离线模型",
    },
}


def demo_like_organization(monkeypatch, language: str = "en") -> dict:
    """The demo organization with its queued run executed (the run waits on the owner's
    confirmation), and one of each object the demo does not have, made through the services."""
    monkeypatch.setenv("CADRE_DEMO_PASSWORD", PASSWORD)
    account = demo_setup(language=language)
    words = WORDS[language]
    org = account.organization
    owner = Member.objects.get(organization=org, email=account.email)
    actor = member_actor(owner)
    run = Run.objects.get(agent=account.seed.agent)
    engine.run_execute(run.pk)  # what the runs worker does first
    run.refresh_from_db()
    confirmation = Confirmation.objects.filter(organization=org, run_id=run.pk).first()
    if confirmation is None:  # the demo's send was refused before asking anyone
        confirmation = Confirmation.objects.create(
            organization=org,
            idempotency_key=f"detail-pages:{run.pk}",
            requester=owner,
            agent_id=run.agent_id,
            run_id=run.pk,
            tool="im_send",
            summary=words["summary"],
            risk_level="high",
            decider_ids=[owner.pk],
            expires_at=timezone.now() + timedelta(hours=1),
        )

    # Chinese names, to see CJK text drawn in the screenshots.
    sales = Department.objects.get(organization=org, name=words["sales"])
    east = tenancy.department_create(actor=actor, name="华东销售部", parent=sales)
    wang = tenancy.member_create(
        actor=actor,
        email="wang.xiaoming@demo.local",
        display_name="王小明",
        roles=["employee"],
        department=east,
        positions=[Position.objects.get(organization=org, name=words["position"])],
    )
    _, _, _ = tenancy.member_invite(actor=actor, email="new.hire@demo.local")
    invited = Member.objects.get(organization=org, email="new.hire@demo.local")
    key, _ = tenancy.api_key_create(actor=actor, name=words["key"], scopes=["org:read"])
    oidc = IdentityProvider.objects.create(
        organization=org,
        name="Okta",
        slug="okta",
        issuer="https://demo.okta.example",
        client_id="cadre-demo",
        client_secret="demo-secret",
    )
    saml = IdentityProvider.objects.create(
        organization=org,
        name="Azure AD (SAML)",
        slug="azure-saml",
        kind="saml",
        saml_entity_id="https://sts.windows.example/demo/",
        group_roles=[{"value": "cadre-admins", "roles": ["it_admin"]}],
        saml_metadata_read_at=timezone.now(),  # as saving its metadata does
    )
    connector = connector_create(
        actor=actor,
        platform="webhook",
        name=words["connector"],
        credentials={"signing_secret": "demo-secret-0123456789"},
    )
    unmapped = UnmappedIdentity.objects.create(
        organization=org,
        connector=connector,
        platform_user_id="u-4711",
        display_name="李雷",
    )
    support = AgentTemplate.objects.get(organization=org, code="demo-support")
    draft = agents.version_draft(actor=actor, template=support)
    suite = evaluation.suite_create(actor=actor, name=words["suite"], template=support)
    evaluation.case_create(actor=actor, suite=suite, data={"input": words["case"]})
    eval_run = evaluation.eval_run_start(actor=actor, suite=suite, candidate={"kind": "current"})
    evaluation.eval_run_execute(eval_run.pk)
    budget = budget_create(
        actor=actor,
        scope=Budget.Scope.DEPARTMENT,
        department=sales,
        period=Budget.Period.MONTHLY,
        metric=Budget.Metric.TOKENS,
        limit=200_000,
    )
    rule = alert_rule_create(actor=actor, name=words["rule"], kind="denied_spike")
    alert = Alert.objects.create(
        organization=org,
        rule=rule,
        fingerprint="demo-denied-spike",
        severity="warning",
        title=words["alert"],
    )
    export = audit_export_create(actor=actor, formats=["jsonl"])
    files = {"SKILL.md": skill_md("quote-checklist", words["skill"], [words["step"]])}
    candidate = skills.candidate_create(
        actor=actor, source="upload", files=files, requested_by=owner
    )
    mcp = mcp_server_create(
        actor=actor,
        name="crm",
        transport="streamable_http",
        url="https://mcp.example.test/mcp",
        credentials={"Authorization": "Bearer demo"},
    )
    provider = account.provider or ModelProviderConfig.objects.filter(organization=org).first()
    if provider is None:
        provider = agents.provider_config_create(
            actor=actor, name=words["provider"], kind="offline"
        )
    skill = SkillVersion.objects.get(package__organization=org, package__name=SKILL_NAME)
    template = run.agent.deployment.template
    version = template.versions.get(number=1)
    shared = Memory.objects.get(organization=org, scope="organization", kind="requirement")
    personal = Memory.objects.get(organization=org, scope="user")
    return {
        "org": org,
        "owner": owner,
        "member": [
            ("employee", Member.objects.get(organization=org, email=EMPLOYEE_EMAIL)),
            ("chinese", wang),
        ],
        "invited_member": [("invited", invited)],
        "department": [("sales", sales), ("chinese", east)],
        "position": [("account-executive", wang.positions.get())],
        "audit_event": [
            ("demo-seed", AuditEvent.objects.get(organization=org, action="demo.seed")),
            ("budget", AuditEvent.objects.filter(organization=org, target_type="budget").last()),
        ],
        "budget": [("sales", budget)],
        "api_key": [("ci", key)],
        "idp": [("oidc", oidc), ("saml", saml)],
        "memory": [("shared", shared)],
        "personal_memory": [("own", personal)],
        "template": [("sales", template), ("support", support)],
        "template_version": [("published", version), ("draft", draft)],
        "deployment": [("sales", run.agent.deployment)],
        "subject_agent": [("owner", run.agent)],
        "subject_session": [("owner", run.session)],
        "subject_run": [("waiting", run)],
        "eval_suite": [("pricing", suite)],
        "eval_run": [("pricing", eval_run)],
        "confirmation": [("demo", confirmation)],
        "alert": [("denied", alert)],
        "alert_rule": [("denied", rule)],
        "audit_export": [("jsonl", export)],
        "connector": [("webhook", connector)],
        "connector_unmapped": [("unmapped", unmapped)],
        "hub_install": [("installed", install_and_run(owner))],
        "hub_package": [("demo", skill)],
        "provider": [("default", provider)],
        "mcp_server": [("crm", mcp)],
        "skill_candidate": [("upload", candidate)],
    }


def _hub_kwargs(version) -> dict:
    package = version.package
    return {
        "namespace": package.namespace.handle,
        "name": package.name,
        "version": version.version,
        "file_path": "SKILL.md",
    }


# matrix object key -> the URL kwargs of one object (every route's kwargs are taken from them)
OBJECTS: dict[str, Callable[[object], dict]] = {
    "member": lambda obj: {"pk": obj.pk},
    "invited_member": lambda obj: {"pk": obj.pk},
    "department": lambda obj: {"pk": obj.pk},
    "position": lambda obj: {"pk": obj.pk},
    "audit_event": lambda obj: {"pk": obj.pk},
    "budget": lambda obj: {"pk": obj.pk},
    "api_key": lambda obj: {"pk": obj.pk},
    "idp": lambda obj: {"pk": obj.pk},
    "memory": lambda obj: {"pk": obj.pk},
    "personal_memory": lambda obj: {"pk": obj.pk},
    "template": lambda obj: {"pk": obj.pk},
    "template_version": lambda obj: {"pk": obj.template_id, "number": obj.number},
    "deployment": lambda obj: {"pk": obj.pk},
    "subject_agent": lambda obj: {"pk": obj.pk},
    "subject_session": lambda obj: {"pk": obj.pk},
    "subject_run": lambda obj: {"pk": obj.pk},
    "eval_suite": lambda obj: {"pk": obj.pk},
    "eval_run": lambda obj: {"pk": obj.pk},
    "confirmation": lambda obj: {"pk": obj.pk},
    "alert": lambda obj: {"pk": obj.pk},
    "alert_rule": lambda obj: {"pk": obj.pk},
    "audit_export": lambda obj: {"pk": obj.pk},
    "connector": lambda obj: {"pk": obj.pk},
    "connector_unmapped": lambda obj: {"pk": obj.connector_id, "unmapped_pk": obj.pk},
    "hub_install": lambda obj: {"pk": obj["pk"]},
    "hub_package": _hub_kwargs,
    "provider": lambda obj: {"pk": obj.pk},
    "mcp_server": lambda obj: {"pk": obj.pk},
    "skill_candidate": lambda obj: {"pk": obj.pk},
}


def detail_pages() -> list[tuple[str, str]]:
    """(URL name, matrix object key) of every console page that names an object."""
    found = []
    for declaration in declarations():
        route = ROUTES[declaration.route]
        if (
            declaration.method == "GET"
            and declaration.route.startswith("console:")
            and route.kwargs
            and declaration.rule != "public"  # sign-in protocol endpoints and the invitation
            and declaration.route not in NOT_PAGES
        ):
            found.append((declaration.route, declaration.object))
    return found
