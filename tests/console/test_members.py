"""Members pages: directory search and filters, add, invite, edit, deactivate, IM accounts."""

from __future__ import annotations

import re

from django.urls import reverse

from cadre.governance.models import AuditEvent
from cadre.tenancy.models import IMIdentity, Invitation, Member
from tests.factories import DepartmentFactory, IMIdentityFactory, MemberFactory
from tests.refusals import nothing_changes


def test_members_list_searches_name_email_and_employee_number(alice, bob, make_member, browser):
    make_member(display_name="Zhang Wei", employee_no="E-1042", email="zw@acme.test")
    client = browser(alice)
    by_name = client.get(reverse("console:members"), {"q": "zhang"}).content.decode()
    assert "Zhang Wei" in by_name
    assert "Bob" not in by_name
    by_number = client.get(reverse("console:members"), {"q": "E-1042"}).content.decode()
    assert "Zhang Wei" in by_number
    by_email = client.get(reverse("console:members"), {"q": "bob@acme"}).content.decode()
    assert "Bob" in by_email
    assert "Zhang Wei" not in by_email


def test_members_list_filters_by_status_department_and_role(alice, make_member, browser):
    sales = DepartmentFactory(organization=alice.organization, name="Sales")
    make_member(display_name="Seller", department=sales)
    make_member(display_name="Gone", status=Member.Status.DEACTIVATED)
    make_member(display_name="Checker", roles=["auditor"])
    client = browser(alice)

    in_sales = client.get(reverse("console:members"), {"department": sales.pk}).content.decode()
    assert "Seller" in in_sales and "Checker" not in in_sales
    gone = client.get(reverse("console:members"), {"status": "deactivated"}).content.decode()
    assert "Gone" in gone and "Seller" not in gone
    auditors = client.get(reverse("console:members"), {"role": "auditor"}).content.decode()
    assert "Checker" in auditors and "Seller" not in auditors


def test_members_list_never_shows_another_organization(alice, charlie, browser):
    page = browser(alice).get(reverse("console:members")).content.decode()
    assert "Alice" in page
    assert "Charlie" not in page


def test_members_list_empty_search_says_so(alice, browser):
    page = browser(alice).get(reverse("console:members"), {"q": "nobody-by-this-name"})
    assert "No members match these filters" in page.content.decode()


def test_htmx_search_returns_only_the_results_fragment(alice, browser):
    page = browser(alice).get(reverse("console:members"), {"q": "ali"}, HTTP_HX_REQUEST="true")
    body = page.content.decode()
    assert body.lstrip().startswith('<div id="member-results">')
    assert "<html" not in body
    assert "Alice" in body


def test_members_list_paginates(alice, browser):
    for number in range(30):
        MemberFactory(organization=alice.organization, display_name=f"Person {number:02d}")
    client = browser(alice)
    first = client.get(reverse("console:members")).content.decode()
    assert "of 31" in first
    second = client.get(reverse("console:members"), {"page": 2}).content.decode()
    assert "Showing 26\u201331 of 31" in second


def test_members_list_query_count_does_not_grow_with_members(
    alice, browser, django_assert_max_num_queries
):
    department = DepartmentFactory(organization=alice.organization)
    for _ in range(25):
        MemberFactory(
            organization=alice.organization, department=department, roles=["employee", "auditor"]
        )
    client = browser(alice)
    with django_assert_max_num_queries(14):
        response = client.get(reverse("console:members"))
    assert response.status_code == 200
    assert response.content.decode().count('class="cell-title"') == 25


def test_add_member_creates_them_and_audits(alice, browser):
    department = DepartmentFactory(organization=alice.organization, name="Support")
    response = browser(alice).post(
        reverse("console:member_create"),
        {
            "display_name": "Li Na",
            "email": "lina@acme.test",
            "employee_no": "E-7",
            "department": department.pk,
            "roles": ["employee"],
        },
    )
    member = Member.objects.get(organization=alice.organization, email="lina@acme.test")
    assert response.status_code == 302
    assert response["Location"] == reverse("console:member", args=[member.pk])
    assert member.department == department
    assert member.user is None
    assert AuditEvent.objects.filter(action="member.create", target_id=str(member.pk)).exists()


def test_add_member_with_invalid_email_shows_error_and_creates_nothing(alice, browser):
    before = Member.objects.count()
    response = browser(alice).post(
        reverse("console:member_create"),
        {
            "display_name": "Bad",
            "email": "not-an-email",
            "roles": ["employee"],
        },
    )
    assert response.status_code == 200
    assert "Enter a valid email address." in response.content.decode()
    assert Member.objects.count() == before


def test_add_member_with_duplicate_email_shows_the_service_error(alice, bob, browser):
    before = Member.objects.count()
    response = browser(alice).post(
        reverse("console:member_create"),
        {
            "display_name": "Bob again",
            "email": "BOB@acme.test",
            "roles": ["employee"],
        },
    )
    assert response.status_code == 200
    assert "A member with this email or user name exists." in response.content.decode()
    assert Member.objects.count() == before


def test_roles_field_hidden_without_assign_roles(make_member, browser):
    # An HR lead with member.manage on a department but not member.assign_roles.
    from guardian.shortcuts import assign_perm

    hr = make_member(roles=["employee"])
    department = DepartmentFactory(organization=hr.organization)
    assign_perm("tenancy.member_manage", hr.user, department)
    page = browser(hr).get(reverse("console:member_create")).content.decode()
    assert 'name="display_name"' in page
    assert 'name="roles"' not in page


def test_department_choices_are_only_the_actors_organization(alice, charlie, browser):
    DepartmentFactory(organization=alice.organization, name="Acme Sales")
    DepartmentFactory(organization=charlie.organization, name="Globex Secret Lab")
    page = browser(alice).get(reverse("console:member_create")).content.decode()
    assert "Acme Sales" in page
    assert "Globex Secret Lab" not in page


def test_posting_another_organizations_department_is_rejected(alice, charlie, browser):
    foreign = DepartmentFactory(organization=charlie.organization)
    response = browser(alice).post(
        reverse("console:member_create"),
        {
            "display_name": "Sneaky",
            "department": foreign.pk,
            "roles": ["employee"],
        },
    )
    assert response.status_code == 200
    assert "Select a valid choice" in response.content.decode()
    assert not Member.objects.filter(display_name="Sneaky").exists()


def test_invite_shows_link_once_and_stores_only_its_hash(alice, browser):
    client = browser(alice)
    response = client.post(
        reverse("console:member_invite"),
        {
            "email": "new@acme.test",
            "display_name": "Newcomer",
            "roles": ["employee"],
        },
    )
    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"
    body = response.content.decode()
    match = re.search(r"http://testserver/invite/([A-Za-z0-9_\-]+)/", body)
    assert match, "the invitation link is shown"
    member = Member.objects.get(email="new@acme.test")
    assert member.status == Member.Status.INVITED
    invitation = Invitation.objects.get(member=member)
    assert match.group(1) not in invitation.token_hash
    assert AuditEvent.objects.filter(action="member.invite", target_id=str(member.pk)).exists()
    # The member page afterwards mentions the invitation but never the link.
    detail = client.get(reverse("console:member", args=[member.pk])).content.decode()
    # (the tests' mail backend, locmem, delivers: the link was e-mailed too)
    assert "Invitation e-mailed to new@acme.test" in detail
    assert match.group(1) not in detail


def test_invite_with_bad_email_shows_error(alice, browser):
    response = browser(alice).post(reverse("console:member_invite"), {"email": "nope"})
    assert response.status_code == 200
    assert "Enter a valid email address." in response.content.decode()
    assert not Invitation.objects.exists()


def test_invite_of_member_who_can_sign_in_is_refused(alice, bob, browser):
    response = browser(alice).post(
        reverse("console:member_invite"),
        {
            "email": "bob@acme.test",
            "roles": ["employee"],
        },
    )
    assert response.status_code == 200
    assert "This member can already sign in." in response.content.decode()
    assert not Invitation.objects.exists()


def test_edit_member_changes_fields_and_audits(alice, bob, browser):
    response = browser(alice).post(
        reverse("console:member_edit", args=[bob.pk]),
        {
            "display_name": "Robert",
            "email": "bob@acme.test",
            "title": "Engineer",
            "roles": ["employee", "auditor"],
        },
    )
    assert response.status_code == 302
    bob.refresh_from_db()
    assert bob.display_name == "Robert"
    assert bob.title == "Engineer"
    assert bob.roles == ["auditor", "employee"]
    event = AuditEvent.objects.get(action="member.update", target_id=str(bob.pk))
    assert event.changes["after"]["display_name"] == "Robert"


def test_edit_member_cannot_remove_the_last_owner(alice, browser):
    response = browser(alice).post(
        reverse("console:member_edit", args=[alice.pk]),
        {
            "display_name": "Alice",
            "email": "alice@acme.test",
            "roles": ["employee"],
        },
    )
    assert response.status_code == 200
    assert "at least one active owner" in response.content.decode()
    alice.refresh_from_db()
    assert alice.roles == ["owner"]


def test_employee_cannot_edit_members(bob, alice, browser):
    response = browser(bob).post(
        reverse("console:member_edit", args=[alice.pk]),
        {
            "display_name": "Hacked",
            "roles": ["employee"],
        },
    )
    assert response.status_code == 403
    alice.refresh_from_db()
    assert alice.display_name == "Alice"


def test_deactivate_asks_for_confirmation_then_deactivates(alice, bob, browser):
    client = browser(alice)
    confirm = client.get(reverse("console:member_deactivate", args=[bob.pk]))
    assert confirm.status_code == 200
    assert "Deactivate Bob?" in confirm.content.decode()
    bob.refresh_from_db()
    assert bob.status == Member.Status.ACTIVE

    response = client.post(
        reverse("console:member_deactivate", args=[bob.pk]), {"reason": "Left the company"}
    )
    assert response.status_code == 302
    bob.refresh_from_db()
    assert bob.status == Member.Status.DEACTIVATED
    event = AuditEvent.objects.get(action="member.deactivate", target_id=str(bob.pk))
    assert event.reason == "Left the company"
    # A deactivated member is signed out of the console in effect: no actor, no pages.
    assert browser(bob).get(reverse("console:home")).status_code == 403


def test_deactivating_yourself_is_refused_with_a_message(alice, make_member, browser):
    make_member(roles=["owner"])  # so that the last-owner rule is not what stops it
    response = browser(alice).post(reverse("console:member_deactivate", args=[alice.pk]), {})
    assert response.status_code == 200
    assert "You cannot deactivate yourself." in response.content.decode()


def test_reactivate_restores_a_member(alice, make_member, browser):
    gone = make_member(display_name="Gone", status=Member.Status.DEACTIVATED)
    response = browser(alice).post(reverse("console:member_reactivate", args=[gone.pk]))
    assert response.status_code == 302
    gone.refresh_from_db()
    assert gone.status == Member.Status.ACTIVE
    assert AuditEvent.objects.filter(action="member.reactivate").exists()


def test_reactivate_needs_post(alice, make_member, browser):
    gone = make_member(status=Member.Status.DEACTIVATED)
    with nothing_changes(gone):
        assert (
            browser(alice).get(reverse("console:member_reactivate", args=[gone.pk])).status_code
            == 405
        )


def test_link_and_unlink_im_identity(alice, bob, browser):
    client = browser(alice)
    response = client.post(
        reverse("console:identity_add", args=[bob.pk]),
        {
            "platform": "slack",
            "platform_user_id": "U024BE7LH",
            "tenant_key": "T1",
        },
    )
    assert response.status_code == 302
    identity = IMIdentity.objects.get(member=bob)
    assert identity.platform == "slack"
    assert "U024BE7LH" in client.get(reverse("console:member", args=[bob.pk])).content.decode()

    response = client.post(reverse("console:identity_remove", args=[bob.pk, identity.pk]))
    assert response.status_code == 302
    assert not IMIdentity.objects.filter(member=bob).exists()
    assert AuditEvent.objects.filter(action="member.identity_remove").exists()


def test_linking_an_already_mapped_account_shows_the_error(alice, bob, make_member, browser):
    other = make_member()
    IMIdentityFactory(member=other, platform="feishu", platform_user_id="ou_1")
    response = browser(alice).post(
        reverse("console:identity_add", args=[bob.pk]),
        {
            "platform": "feishu",
            "platform_user_id": "ou_1",
        },
    )
    assert response.status_code == 200
    assert "already mapped to a member" in response.content.decode()
    assert not IMIdentity.objects.filter(member=bob).exists()


def test_employee_sees_profile_without_management_buttons(bob, alice, browser):
    page = browser(bob).get(reverse("console:member", args=[alice.pk]))
    assert page.status_code == 200
    body = page.content.decode()
    assert "alice@acme.test" in body
    assert reverse("console:member_edit", args=[alice.pk]) not in body
    assert reverse("console:member_deactivate", args=[alice.pk]) not in body


def test_new_invitation_link_for_existing_member_and_withdrawal(alice, make_member, browser):
    member = make_member(display_name="Later", email="later@acme.test", user=None)
    client = browser(alice)
    response = client.post(reverse("console:member_reinvite", args=[member.pk]))
    assert response.status_code == 200
    assert re.search(r"/invite/[A-Za-z0-9_\-]+/", response.content.decode())
    invitation = Invitation.objects.get(member=member)
    assert invitation.state == "pending"

    response = client.post(reverse("console:invitation_revoke", args=[member.pk]))
    assert response.status_code == 302
    invitation.refresh_from_db()
    assert invitation.state == "revoked"
    assert AuditEvent.objects.filter(action__contains="invitation_revoke").exists()


def test_failed_edit_keeps_showing_the_saved_member(alice, bob, browser):
    response = browser(alice).post(
        reverse("console:member_edit", args=[bob.pk]),
        {
            "display_name": "Robert",
            "email": "alice@acme.test",
            "roles": ["employee"],
        },
    )
    body = response.content.decode()
    assert response.status_code == 200
    assert "A member with this email or user name exists." in body
    assert "<h1>Edit Bob</h1>" in body
    assert 'value="Robert"' in body  # what was typed stays in the form
    bob.refresh_from_db()
    assert (bob.display_name, bob.email) == ("Bob", "bob@acme.test")
