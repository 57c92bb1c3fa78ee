"""Organization page and the organization switcher."""

from __future__ import annotations

from django.urls import reverse

from cadre.governance.models import AuditEvent
from cadre.tenancy.middleware import SESSION_KEY
from tests.factories import MemberFactory, OrganizationFactory


def test_owner_edits_organization_settings(alice, browser):
    response = browser(alice).post(
        reverse("console:organization"),
        {
            "name": "Acme Group",
            "locale": "zh-hans",
            "time_zone": "Asia/Shanghai",
        },
    )
    assert response.status_code == 302
    organization = alice.organization
    organization.refresh_from_db()
    assert (organization.name, organization.locale, organization.time_zone) == (
        "Acme Group",
        "zh-hans",
        "Asia/Shanghai",
    )
    assert AuditEvent.objects.filter(action="organization.update").exists()


def test_unknown_time_zone_is_a_field_error(alice, browser):
    response = browser(alice).post(
        reverse("console:organization"),
        {
            "name": "Acme",
            "locale": "en",
            "time_zone": "Mars/Olympus",
        },
    )
    assert response.status_code == 200
    assert "Select a valid choice" in response.content.decode()
    alice.organization.refresh_from_db()
    assert alice.organization.time_zone == "UTC"


def test_it_admin_sees_settings_read_only(make_member, browser):
    admin = make_member(roles=["it_admin"])
    page = browser(admin).get(reverse("console:organization"))
    assert page.status_code == 200
    assert "Only owners can change these settings." in page.content.decode()
    denied = browser(admin).post(reverse("console:organization"), {"name": "Taken over"})
    assert denied.status_code == 403
    admin.organization.refresh_from_db()
    assert admin.organization.name == "Acme"


def test_switcher_lists_and_switches_to_own_organizations(alice, browser):
    other = OrganizationFactory(name="Initech")
    MemberFactory(
        organization=other,
        user=alice.user,
        email=alice.email,
        display_name="Alice",
        roles=["employee"],
    )
    client = browser(alice)
    home = client.get(reverse("console:home")).content.decode()
    assert "Initech" in home

    response = client.post(reverse("console:switch_organization"), {"organization": other.pk})
    assert response.status_code == 302
    assert client.session[SESSION_KEY] == other.pk
    page = client.get(reverse("console:home")).content.decode()
    # An employee there: their own home, at Initech.
    assert "Your agents and your conversations at Initech." in page
    # As an employee of Initech, Acme's admin pages are no longer reachable.
    assert client.get(reverse("console:audit")).status_code == 403


def test_switcher_refuses_an_organization_the_user_is_not_in(alice, charlie, browser):
    client = browser(alice)
    response = client.post(
        reverse("console:switch_organization"), {"organization": charlie.organization.pk}
    )
    assert response.status_code == 404
    assert client.session[SESSION_KEY] == alice.organization.pk


def test_switcher_refuses_a_deactivated_membership(alice, browser):
    other = OrganizationFactory(name="Initech")
    MemberFactory(organization=other, user=alice.user, email=alice.email, status="deactivated")
    client = browser(alice)
    assert "Initech" not in client.get(reverse("console:home")).content.decode()
    response = client.post(reverse("console:switch_organization"), {"organization": other.pk})
    assert response.status_code == 404


def test_switcher_needs_post(alice, browser):
    response = browser(alice).get(reverse("console:switch_organization"))
    assert response.status_code == 405
