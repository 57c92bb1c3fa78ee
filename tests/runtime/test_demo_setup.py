"""The demo organization is created once, through audited services, and never twice."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import CommandError

from cadre.governance.audit import verify_chain
from cadre.governance.models import AuditEvent
from cadre.runtime.demo import DEMO_STRUCTURE, demo_setup
from cadre.tenancy.models import Department, Member, Organization, Position, User

pytestmark = pytest.mark.django_db


def run_command() -> str:
    out = StringIO()
    call_command("demo_setup", stdout=out)
    return out.getvalue()


def test_first_run_creates_the_owner_with_a_printed_password(monkeypatch):
    monkeypatch.delenv("CADRE_DEMO_PASSWORD", raising=False)
    monkeypatch.delenv("CADRE_DEMO_EMAIL", raising=False)
    output = run_command()

    organization = Organization.objects.get(slug="demo")
    assert organization.name == "Demo Co"
    owner = Member.objects.get(organization=organization, roles__contains=["owner"])
    assert owner.email == "admin@demo.local"
    password = output.split("password:")[1].split()[0]
    assert User.objects.get(email="admin@demo.local").check_password(password)
    assert "shown only once" in output


def test_first_run_seeds_departments_and_positions_through_audited_services(monkeypatch):
    monkeypatch.setenv("CADRE_DEMO_PASSWORD", "a-long-demo-passphrase-42")
    account = demo_setup()

    organization = account.organization
    departments = set(
        Department.objects.filter(organization=organization).values_list("name", flat=True)
    )
    assert departments == set(DEMO_STRUCTURE)
    positions = Position.objects.filter(organization=organization)
    assert positions.count() == sum(len(names) for names in DEMO_STRUCTURE.values())
    assert all(position.department_id for position in positions)

    actions = list(
        AuditEvent.objects.filter(organization=organization).values_list("action", flat=True)
    )
    assert actions.count("organization.create") == 1
    assert actions.count("member.create") == 2  # the owner and the demo colleague
    assert actions.count("department.create") == len(DEMO_STRUCTURE)
    assert actions.count("position.create") == positions.count()
    assert verify_chain(organization)["ok"]


def test_second_run_changes_nothing_and_says_the_account_exists(monkeypatch):
    monkeypatch.setenv("CADRE_DEMO_PASSWORD", "a-long-demo-passphrase-42")
    first = demo_setup()
    events = AuditEvent.objects.filter(organization=first.organization).count()

    output = run_command()

    assert "exists" in output
    assert "a-long-demo-passphrase-42" not in output
    assert Organization.objects.filter(slug="demo").count() == 1
    assert Member.objects.filter(organization=first.organization).count() == 2
    assert AuditEvent.objects.filter(organization=first.organization).count() == events
    assert User.objects.get(email="admin@demo.local").check_password("a-long-demo-passphrase-42")


def test_chosen_email_and_password_are_used(monkeypatch):
    monkeypatch.setenv("CADRE_DEMO_EMAIL", "Boss@Example.test")
    monkeypatch.setenv("CADRE_DEMO_PASSWORD", "a-long-demo-passphrase-42")
    account = demo_setup()
    assert account.email == "boss@example.test"
    assert account.password_generated is False
    assert User.objects.get(email="boss@example.test").check_password("a-long-demo-passphrase-42")


def test_a_weak_chosen_password_is_refused_naming_the_variable(monkeypatch):
    monkeypatch.setenv("CADRE_DEMO_PASSWORD", "short")
    with pytest.raises(ImproperlyConfigured, match=r"^CADRE_DEMO_PASSWORD: "):
        demo_setup()
    with pytest.raises(CommandError, match="CADRE_DEMO_PASSWORD"):
        run_command()
    assert not Organization.objects.filter(slug="demo").exists()


def test_an_existing_account_keeps_its_password_and_none_is_shown(monkeypatch):
    User.objects.create_user("admin@demo.local", "their-own-password-77")
    monkeypatch.delenv("CADRE_DEMO_PASSWORD", raising=False)
    monkeypatch.delenv("CADRE_DEMO_EMAIL", raising=False)

    output = run_command()

    owner_lines, colleague_lines = output.split("Demo data added")
    assert "password:" not in owner_lines  # only the new colleague's, which this run chose
    assert colleague_lines.count("password:") == 1
    assert "existing account admin@demo.local" in owner_lines
    assert User.objects.get(email="admin@demo.local").check_password("their-own-password-77")
