"""The console restricts in one place: `cadre.console.scoping` is the only console module that
calls `.restrict(` or filters by the actor's organization by hand; views and forms ask it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from django.urls import reverse

from cadre.console import scoping
from cadre.tenancy.actors import member_actor
from cadre.tenancy.models import Department
from tests.console.agents_setup import client
from tests.factories import DepartmentFactory

CONSOLE = Path(scoping.__file__).parent
LOOKUPS = {"filter", "exclude", "get", "get_or_create", "update_or_create"}
LOOKUP_FUNCTIONS = {"get_object_or_404", "get_list_or_404", "Q"}


def _is_actor_organization(node: ast.expr) -> bool:
    """`actor.organization`, `request.actor.organization`, `self.actor.organization_id`…"""
    if not isinstance(node, ast.Attribute) or node.attr not in ("organization", "organization_id"):
        return False
    base = node.value
    return (isinstance(base, ast.Name) and base.id == "actor") or (
        isinstance(base, ast.Attribute) and base.attr == "actor"
    )


def _called(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def scoping_by_hand(source: str) -> list[str]:
    """Each `.restrict(` call and each lookup on the actor's organization, as `line: code`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = _called(node)
        if isinstance(node.func, ast.Attribute) and name == "restrict":
            found.append(f"{node.lineno}: .restrict(")
        if name in LOOKUPS or name in LOOKUP_FUNCTIONS:
            for keyword in node.keywords:
                if (keyword.arg or "").startswith("organization") and _is_actor_organization(
                    keyword.value
                ):
                    found.append(f"{node.lineno}: {keyword.arg}={ast.unparse(keyword.value)}")
    return found


def test_the_check_finds_scoping_by_hand():
    source = (
        "a = Member.objects.restrict(request.actor, 'view')\n"
        "b = Run.objects.filter(organization=request.actor.organization, pk=1)\n"
        "c = get_object_or_404(Provider, organization=actor.organization, pk=1)\n"
        "d = Member.objects.exclude(organization_id=self.actor.organization_id)\n"
        "e = restricted(request, Member).filter(organization=member.organization)\n"
    )
    assert [hit.split(":")[0] for hit in scoping_by_hand(source)] == ["1", "2", "3", "4"]


def test_no_console_module_restricts_by_hand():
    offenders = {
        str(path.relative_to(CONSOLE)): hits
        for path in sorted(CONSOLE.rglob("*.py"))
        if path != Path(scoping.__file__)
        and (hits := scoping_by_hand(path.read_text(encoding="utf-8")))
    }
    assert offenders == {}, "use cadre.console.scoping (restricted, get_restricted_or_404, …)"


@pytest.mark.django_db
def test_restricted_scopes_a_model_or_a_queryset_to_the_actor(org_a, org_b, alice, charlie):
    mine = DepartmentFactory(organization=org_a, name="Sales")
    theirs = DepartmentFactory(organization=org_b, name="Sales")
    actor = member_actor(alice)
    assert mine in scoping.restricted_for(actor, Department)
    assert theirs not in scoping.restricted_for(actor, Department)
    narrowed = Department.objects.filter(name="Sales")
    assert list(scoping.restricted_for(actor, narrowed)) == [mine]
    assert list(scoping.restricted_for(None, Department)) == []
    assert list(scoping.in_organization_of(member_actor(charlie), narrowed)) == [theirs]


@pytest.mark.django_db
def test_outsider_gets_404_through_the_base(org_a, alice, charlie):
    department = DepartmentFactory(organization=org_a, name="Support")
    url = reverse("console:department", args=[department.pk])
    assert client(alice).get(url).status_code == 200
    assert client(charlie).get(url).status_code == 404
