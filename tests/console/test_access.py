"""Who may open which console page: allowed roles see it, others get 403, anonymous a sign-in."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.factories import DepartmentFactory

PAGES_FOR_EVERY_MEMBER = [
    ("console:home", "Overview"),
    ("console:members", "Members"),
    ("console:departments", "Departments"),
    ("console:positions", "Positions"),
    ("console:organization", "Organization"),
]

ADMIN_PAGES = [
    ("console:audit", "audit.view"),
    ("console:api_keys", "apikey.view"),
    ("console:api_key_create", "apikey.manage"),
    ("console:member_create", "member.manage"),
    ("console:member_invite", "member.manage"),
    ("console:department_create", "department.manage"),
    ("console:position_create", "position.manage"),
]


@pytest.mark.parametrize(("url_name", "text"), PAGES_FOR_EVERY_MEMBER)
def test_employee_sees_directory_pages(bob, browser, url_name, text):
    response = browser(bob).get(reverse(url_name))
    assert response.status_code == 200
    assert text in response.content.decode()


@pytest.mark.parametrize(("url_name", "permission"), ADMIN_PAGES)
def test_employee_is_denied_admin_pages(bob, browser, url_name, permission):
    response = browser(bob).get(reverse(url_name))
    assert response.status_code == 403
    assert permission in response.content.decode()


@pytest.mark.parametrize(("url_name", "permission"), ADMIN_PAGES)
def test_owner_opens_admin_pages(alice, browser, url_name, permission):
    response = browser(alice).get(reverse(url_name))
    assert response.status_code == 200


@pytest.mark.parametrize(
    "url_name",
    [name for name, _ in PAGES_FOR_EVERY_MEMBER] + [name for name, _ in ADMIN_PAGES],
)
def test_anonymous_is_sent_to_sign_in(browser, db, url_name):
    url = reverse(url_name)
    response = browser().get(url)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("console:login"))
    assert "next=" in response["Location"]


def test_auditor_reads_audit_log_and_keys_but_cannot_create_keys(make_member, browser):
    auditor = make_member(roles=["auditor"])
    client = browser(auditor)
    assert client.get(reverse("console:audit")).status_code == 200
    listing = client.get(reverse("console:api_keys"))
    assert listing.status_code == 200
    assert "Create API key" not in listing.content.decode()
    assert client.get(reverse("console:api_key_create")).status_code == 403


def test_navigation_shows_only_permitted_areas(bob, alice, browser):
    employee_page = browser(bob).get(reverse("console:home")).content.decode()
    owner_page = browser(alice).get(reverse("console:home")).content.decode()
    assert reverse("console:audit") not in employee_page
    assert reverse("console:api_keys") not in employee_page
    assert reverse("console:audit") in owner_page
    assert reverse("console:api_keys") in owner_page


def test_outsider_gets_404_for_other_org_pages(alice, charlie, browser):
    department = DepartmentFactory(organization=alice.organization, name="Sales")
    client = browser(charlie)
    assert client.get(reverse("console:member", args=[alice.pk])).status_code == 404
    assert client.get(reverse("console:member_edit", args=[alice.pk])).status_code == 404
    assert client.get(reverse("console:department", args=[department.pk])).status_code == 404
    assert client.get(reverse("console:department_edit", args=[department.pk])).status_code == 404
    # and the page is the console's own error page, not a bare one
    page = client.get(reverse("console:member", args=[alice.pk])).content.decode()
    assert "This page does not exist" in page


def test_user_without_membership_is_told_so(browser, db):
    from tests.factories import UserFactory

    user = UserFactory()
    client = browser()
    client.force_login(user)
    response = client.get(reverse("console:home"))
    assert response.status_code == 403
    assert "not a member of an active organization" in response.content.decode()


def test_auditors_find_the_governance_pages_they_may_read(make_member, browser):
    page = browser(make_member(roles=["auditor"])).get(reverse("console:home")).content.decode()
    assert f'href="{reverse("console:confirmations")}"' in page
    assert f'href="{reverse("console:alerts")}"' in page
    employee = browser(make_member(roles=["employee"])).get(reverse("console:home"))
    assert f'href="{reverse("console:alerts")}"' not in employee.content.decode()
