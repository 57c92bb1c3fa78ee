"""The demo data of the first start: seeded once through audited services, labelled, usable at
once (an agent in Chat, a pending confirmation), and removed exactly by `demo_reset`."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from cadre.agents import services as agents
from cadre.agents.models import Agent, AgentTemplate, Deployment, Run, TemplateVersion
from cadre.agents.runtime.lifecycle import execution as engine
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.governance.audit import verify_chain
from cadre.governance.models import AuditEvent, Confirmation, PolicyChain
from cadre.memory import services as memory
from cadre.memory.models import Memory
from cadre.runtime.demo import demo_setup, describe
from cadre.runtime.demo_data import CONFIRMATION_REQUEST, EMPLOYEE_EMAIL, MARK
from cadre.runtime.models import DemoData
from cadre.tenancy import services as tenancy
from cadre.tenancy.actors import member_actor
from cadre.tenancy.models import Department, Member, User
from hub.models import SkillPackage, SkillVersion

pytestmark = pytest.mark.django_db
PASSPHRASE = "a-long-demo-passphrase-42"


@pytest.fixture
def account(monkeypatch):
    monkeypatch.setenv("CADRE_DEMO_PASSWORD", PASSPHRASE)
    return demo_setup()


def owner_of(account) -> Member:
    return Member.objects.get(organization=account.organization, email=account.email)


def test_first_start_seeds_labelled_demo_data_through_audited_services(account):
    organization = account.organization
    templates = AgentTemplate.objects.filter(organization=organization)
    assert templates.count() == 3 and all(t.name.endswith(MARK) for t in templates)
    assert all(t.versions.get().status == TemplateVersion.Status.PUBLISHED for t in templates)
    assert Deployment.objects.filter(organization=organization).count() == 3
    owner = owner_of(account)
    agent = Agent.objects.get(member=owner)  # the demo owner has one agent in Chat
    assert account.seed.agent == agent and agent.deployment.template.code == "demo-sales"
    assert agent.name == f"Sales assistant {MARK} · Demo Admin"  # labelled in Chat too
    employee = Member.objects.get(organization=organization, email=EMPLOYEE_EMAIL)
    assert employee.roles == ["employee"] and employee.status == Member.Status.ACTIVE
    assert employee.user.check_password(account.seed.employee_password)
    assert Agent.objects.filter(member=employee).count() == 1  # through their position
    memories = Memory.objects.filter(organization=organization)
    assert memories.count() == 3
    for item in memories:
        assert item.tags == ["demo"] and item.source_ref["demo"] is True
        assert item.provenance and item.provenance[0]["source_kind"] == item.source_kind
    version = SkillVersion.objects.get(package__organization=organization)
    assert version.status == SkillVersion.Status.PUBLISHED
    assert version.package.display_name.endswith(MARK)
    sales = templates.get(code="demo-sales")
    chain = sales.versions.get().policy_chain
    assert chain.scope == PolicyChain.Scope.TEMPLATE
    assert chain.plugins[0]["plugin"] == "masking" and chain.plugins[0]["enabled"] is True
    # The offline model and no provider: nothing is configured, nothing is pretended.
    assert account.provider is None
    assert sales.versions.get().model_settings["provider"] == "offline"

    actions = list(
        AuditEvent.objects.filter(organization=organization).values_list("action", flat=True)
    )
    for action, count in {
        "template.create": 3,
        "template.publish": 3,
        "deployment.create": 3,
        "memory.add": 3,
        "member.invite": 1,
        "member.invitation_accept": 1,
        "hub.version.publish": 1,
        "policy.chain_update": 1,
        "demo.seed": 1,
    }.items():
        assert actions.count(action) == count, action
    assert verify_chain(organization)["ok"]


def test_the_queued_demo_run_waits_on_a_confirmation_for_the_owner(account):
    run = Run.objects.get(agent=account.seed.agent)
    assert run.status == Run.Status.QUEUED and run.input["text"] == CONFIRMATION_REQUEST
    assert engine.run_execute(run.pk) == Run.Status.WAITING  # what the runs worker does
    confirmation = Confirmation.objects.get(run_id=run.pk)
    assert confirmation.status == Confirmation.Status.PENDING
    assert confirmation.tool == "task_create" and confirmation.requester == owner_of(account)


def test_both_sign_ins_are_printed_on_the_first_start_only(account, monkeypatch):
    first = "\n".join(describe(account, "http://127.0.0.1:8000/"))
    assert PASSPHRASE in first and EMPLOYEE_EMAIL in first
    assert account.seed.employee_password in first
    assert f"http://127.0.0.1:8000/chat/agents/{account.seed.agent.pk}/" in first
    assert "offline model" in first and "demo_reset" in first
    events = AuditEvent.objects.filter(organization=account.organization).count()

    again = demo_setup()

    later = "\n".join(describe(again))
    assert again.seed is None and PASSPHRASE not in later
    assert account.seed.employee_password not in later
    assert AuditEvent.objects.filter(organization=account.organization).count() == events
    assert AgentTemplate.objects.filter(organization=account.organization).count() == 3


def test_demo_reset_removes_exactly_the_demo_data_and_keeps_the_organizations_own(account):
    organization = account.organization
    owner = owner_of(account)
    actor = member_actor(owner)
    # What the admin made themselves, and what trying the demo left behind.
    own_template = agents.template_create(
        actor=actor, name="Our sales assistant", code="our-sales", preset="sales"
    )
    own_member = tenancy.member_create(
        actor=actor, display_name="Real Person", email="real@demo.local"
    )
    own_memory = memory.memory_add(
        actor=actor,
        scope="organization",
        kind="fact",
        content="Our office is in Porto.",
        source_kind="user_statement",
    )
    pending = Run.objects.get(agent=account.seed.agent)
    engine.run_execute(pending.pk)
    chat = runtime.run_start(actor=actor, agent=account.seed.agent, text="What is the discount?")
    engine.run_execute(chat.pk)
    employee = Member.objects.get(organization=organization, email=EMPLOYEE_EMAIL)
    demo_memories = list(Memory.objects.filter(tags=["demo"]).values_list("pk", flat=True))

    out = StringIO()
    call_command("demo_reset", stdout=out)

    assert "Demo data removed from Demo Co" in out.getvalue()
    assert list(AgentTemplate.objects.filter(organization=organization)) == [own_template]
    assert not Deployment.objects.filter(organization=organization).exists()
    assert not Agent.objects.filter(organization=organization).exists()
    assert not Run.objects.filter(organization=organization).exists()
    assert not Confirmation.objects.filter(organization=organization).exists()
    assert not Member.objects.filter(pk=employee.pk).exists()
    assert not User.objects.filter(email=EMPLOYEE_EMAIL).exists()
    assert not SkillPackage.objects.filter(organization=organization).exists()
    assert not PolicyChain.objects.filter(
        organization=organization, scope=PolicyChain.Scope.TEMPLATE
    ).exists()
    for pk in demo_memories:
        assert Memory.objects.get(pk=pk).status == Memory.Status.DELETED
    # The organization's own data stays.
    own_memory.refresh_from_db()
    assert own_memory.status == Memory.Status.ACTIVE
    assert Member.objects.filter(pk=own_member.pk).exists()
    assert Member.objects.filter(pk=owner.pk).exists() and owner.user.check_password(PASSPHRASE)
    assert Department.objects.filter(organization=organization).count() == 4
    assert own_template.versions.get().status == TemplateVersion.Status.DRAFT
    reset = AuditEvent.objects.get(organization=organization, action="demo.reset")
    assert reset.changes["removed"]["templates"] == 3
    assert verify_chain(organization)["ok"]

    # Said once: a second reset finds nothing, and a later start does not seed it again.
    out = StringIO()
    call_command("demo_reset", stdout=out)
    assert "No demo data in Demo Co" in out.getvalue()
    assert demo_setup().seed is None
    assert AgentTemplate.objects.filter(organization=organization).count() == 1
    assert DemoData.objects.get(organization=organization).reset_at is not None


def test_a_production_first_organization_can_leave_the_demo_data_out(monkeypatch):
    monkeypatch.setenv("CADRE_DEMO_PASSWORD", PASSPHRASE)
    out = StringIO()
    call_command("demo_setup", "--no-demo-data", stdout=out)

    organization = Member.objects.get(email="admin@demo.local").organization
    assert "Demo data added" not in out.getvalue()
    assert not AgentTemplate.objects.filter(organization=organization).exists()
    assert not Memory.objects.filter(organization=organization).exists()
    assert Member.objects.filter(organization=organization).count() == 1
    assert not DemoData.objects.filter(organization=organization).exists()


def test_an_organization_in_use_whose_data_clashes_starts_without_the_demo_data(monkeypatch):
    monkeypatch.setenv("CADRE_DEMO_PASSWORD", PASSPHRASE)
    demo_setup(samples=False)  # an install from before the demo data
    owner = Member.objects.get(email="admin@demo.local")
    agents.template_create(actor=member_actor(owner), name="Theirs", code="demo-sales")

    account = demo_setup()

    assert account.seed is None and "already exists" in account.samples_refused
    assert "Demo data not added: A template with this code" in "\n".join(describe(account))
    assert AgentTemplate.objects.filter(organization=owner.organization).count() == 1
    assert not Member.objects.filter(email=EMPLOYEE_EMAIL).exists()  # nothing half-made
    assert not DemoData.objects.filter(organization=owner.organization).exists()
