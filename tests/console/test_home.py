"""The overview page: real counts, recent activity for auditors."""

from __future__ import annotations

from django.urls import reverse

from cadre.tenancy import services
from cadre.tenancy.actors import member_actor
from cadre.tenancy.models import Member
from tests.factories import DepartmentFactory, MemberFactory, PositionFactory


def test_overview_counts_what_exists(alice, bob, charlie, browser):
    org = alice.organization
    MemberFactory(organization=org, status=Member.Status.DEACTIVATED)
    MemberFactory(organization=org, status=Member.Status.INVITED, user=None)
    DepartmentFactory(organization=org)
    DepartmentFactory(organization=org, is_archived=True)
    PositionFactory(organization=org)
    MemberFactory(organization=charlie.organization)  # another organization: never counted
    services.api_key_create(actor=member_actor(alice), name="k", scopes=["org:read"])

    page = browser(alice).get(reverse("console:home")).content.decode()
    assert '?status=active">2</a>' in page  # alice and bob
    assert "1 invited · 1 deactivated" in page
    assert 'href="/departments/">1</a>' in page
    assert 'href="/positions/">1</a>' in page
    assert 'href="/api-keys/">1</a>' in page
    # Recent activity, in sentences (the audit log keeps the codes).
    assert "You created the API key k" in page
    assert "apikey.create" not in page


def test_employee_home_is_their_agents_not_the_organizations_figures(bob, browser):
    page = browser(bob).get(reverse("console:home")).content.decode()
    assert "Your agents" in page and "You have no agent yet" in page
    assert "Recent conversations" in page
    assert "Active members" not in page and "Active API keys" not in page
    assert "Recent activity" not in page and "Get started" not in page
    assert "Welcome back" not in page


def test_overview_and_navigation_announce_no_placeholder_areas(alice, browser):
    page = browser(alice).get(reverse("console:home")).content.decode()
    assert "/areas/" not in page
    assert "not built yet" not in page.lower() and "Coming to this console" not in page


def test_roles_are_required_when_offered(alice, browser):
    response = browser(alice).post(reverse("console:member_create"), {"display_name": "X"})
    assert response.status_code == 200
    assert "Choose at least one role" in response.content.decode()
    assert not Member.objects.filter(display_name="X").exists()
