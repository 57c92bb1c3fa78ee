# ruff: noqa: F811 - the fixtures imported from test_browser_navigation are parameters
"""Every detail and edit page of the console opened in a real browser (Debian's Chromium) by
the owner of a demo-like organization (the demo `make up` creates, plus what it lacks: an API
key, OIDC and SAML identity providers, a connector, a budget, an alert rule, an evaluation
suite and run, a skill candidate...), each with a real object: a 200 on the URL asked for, no
server error, no template source ("{{" or "{%") and no "None"/"undefined" where a value
belongs, no JavaScript error and no failed request.

The pages come from the URLconf: every console route with parameters that the authorization
matrix (tests/authorization/matrix.py) declares for GET and that is not public. Its object key
there picks the object here (OBJECTS), so a new page on an object already named is opened
without touching this test; a page naming a new kind of object fails until OBJECTS says which
object it shows. A route that is not a page says why in NOT_PAGES.
Screenshots in var/screenshots/detail-*.png."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.urls import reverse
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
from tests.console.test_browser_chat import expect, sign_in_through_the_form
from tests.console.test_browser_navigation import (  # noqa: F401 - fixtures
    LAYOUT_PROBLEMS,
    SHOTS,
    browser_page,
    chromium,
    live_server_url,
    page,
)
from tests.skills.conftest import skill_md

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

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

# Text that means the server failed or a value went missing on the way to the page.
SERVER_ERROR = re.compile(
    r"Server Error|Internal Server Error|Traceback|Exception Value|Page not found"
)
MISSING_VALUE = re.compile(r"\bNone\b|\bundefined\b|\bNaN\b|\[object Object\]")
TEMPLATE_SOURCE = re.compile(r"\{\{|\{%")
# A page's visible text, less what shows a template's source on purpose: the persona and
# instructions of a role template carry "{{member.display_name}}" placeholders, shown as written
# in the editor's fields and in the version's source view.
VISIBLE_TEXT = """() => {
  const copy = document.body.cloneNode(true);
  for (const source of copy.querySelectorAll("textarea, input, [data-template-source]")) {
    source.remove();
  }
  for (const help of copy.querySelectorAll(".help")) {
    if (help.textContent.includes("Placeholders:")) help.remove();
  }
  return copy.innerText;
}"""


def _demo_like_organization(monkeypatch) -> dict:
    """The demo organization with its queued run executed (the run waits on the owner's
    confirmation), and one of each object the demo does not have, made through the services."""
    monkeypatch.setenv("CADRE_DEMO_PASSWORD", PASSWORD)
    account = demo_setup()
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
            summary="Send the Q3 price list to the sales team",
            risk_level="high",
            decider_ids=[owner.pk],
            expires_at=timezone.now() + timedelta(hours=1),
        )

    # Chinese names, to see CJK text drawn in the screenshots.
    sales = Department.objects.get(organization=org, name="Sales")
    east = tenancy.department_create(actor=actor, name="华东销售部", parent=sales)
    wang = tenancy.member_create(
        actor=actor,
        email="wang.xiaoming@demo.local",
        display_name="王小明",
        roles=["employee"],
        department=east,
        positions=[Position.objects.get(organization=org, name="Account Executive")],
    )
    _, _, _ = tenancy.member_invite(actor=actor, email="new.hire@demo.local")
    invited = Member.objects.get(organization=org, email="new.hire@demo.local")
    key, _ = tenancy.api_key_create(actor=actor, name="CI pipeline", scopes=["org:read"])
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
        name="Helpdesk webhook",
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
    suite = evaluation.suite_create(actor=actor, name="Pricing answers", template=support)
    evaluation.case_create(
        actor=actor, suite=suite, data={"input": "What is the standard discount?"}
    )
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
    rule = alert_rule_create(actor=actor, name="Denied calls spike", kind="denied_spike")
    alert = Alert.objects.create(
        organization=org,
        rule=rule,
        fingerprint="demo-denied-spike",
        severity="warning",
        title="Denied tool calls spiked",
    )
    export = audit_export_create(actor=actor, formats=["jsonl"])
    files = {"SKILL.md": skill_md("quote-checklist", "Check a quote before it is sent.", ["One"])}
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
        provider = agents.provider_config_create(actor=actor, name="Offline", kind="offline")
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


def test_every_console_page_naming_an_object_is_opened():
    pages = detail_pages()
    missing = sorted({key for _, key in pages} - set(OBJECTS))
    assert not missing, f"say in OBJECTS which object these pages show: {missing}"
    names = {name for name, _ in pages}
    # The pages the issue names are among them.
    for name in ("member", "member_edit", "department", "department_edit", "position_edit"):
        assert f"console:{name}" in names
    for name in ("api_key_revoke", "identity_provider_edit", "audit_event", "budget_edit"):
        assert f"console:{name}" in names
    explained = set(NOT_PAGES) | set(FRAGMENTS) | set(QUERIES) | {name for name, _ in REDIRECTS}
    assert explained <= set(ROUTES)


def test_an_owner_opens_every_detail_and_edit_page(page, monkeypatch):
    world = _demo_like_organization(monkeypatch)
    sign_in_through_the_form(page, world["owner"].user.email)
    expect(page.locator(".sidebar")).to_be_visible()

    for stale in SHOTS.glob("detail-*.png"):  # a page no longer opened leaves no picture
        stale.unlink()
    report: dict[str, list[str]] = {}
    opened = 0
    for name, key in detail_pages():
        route = ROUTES[name]
        for variant, obj in world[key]:
            kwargs = OBJECTS[key](obj)
            url = reverse(name, kwargs={arg: kwargs[arg] for arg in route.kwargs})
            landing = url
            if (name, variant) in REDIRECTS:
                landing = reverse(REDIRECTS[name, variant][0], kwargs=kwargs)
            if name in QUERIES:
                url = landing = url + QUERIES[name](world)
            label = f"{name.removeprefix('console:')}-{variant}"
            page.problems.clear()
            response = page.goto(url)
            page.wait_for_load_state("networkidle")
            opened += 1
            shot = SHOTS / f"detail-{label.replace('_', '-')}.png"
            page.screenshot(path=shot, full_page=True)
            problems = page.problems + page.evaluate(LAYOUT_PROBLEMS)
            if response.status != 200:
                problems.append(f"status {response.status}")
            if not page.url.endswith(landing):
                problems.append(f"redirected to {page.url}")
            fragment = name in FRAGMENTS
            if (page.locator(".sidebar").count() == 1) == fragment:
                problems.append("not a fragment" if fragment else "not in the console layout")
            text = page.evaluate(VISIBLE_TEXT)
            for pattern, what in (
                (SERVER_ERROR, "server error"),
                (TEMPLATE_SOURCE, "template source"),
                (MISSING_VALUE, "missing value"),
            ):
                for match in pattern.finditer(text):
                    around = text[max(0, match.start() - 60) : match.end() + 60]
                    problems.append(f"{what}: …{around.strip()!r}…")
            if problems:
                report[f"{label} ({url})"] = problems
    assert opened >= 40
    assert not report, "\n".join(f"{page}: {problems}" for page, problems in report.items())
