"""Departments and positions pages: the tree, create/edit/archive with their error messages."""

from __future__ import annotations

from django.urls import reverse

from cadre.governance.models import AuditEvent
from cadre.tenancy.models import Department, Position
from tests.factories import DepartmentFactory, MemberFactory, PositionFactory


def test_tree_lists_children_under_their_parent(alice, browser):
    org = alice.organization
    sales = DepartmentFactory(organization=org, name="Sales")
    DepartmentFactory(organization=org, name="East", parent=sales)
    DepartmentFactory(organization=org, name="Accounting")
    page = browser(alice).get(reverse("console:departments")).content.decode()
    # Parents before children; siblings by name (Accounting < Sales; East under Sales).
    assert page.index("Accounting") < page.index("Sales") < page.index("East")
    assert "padding-left: 22px" in page  # East is indented one level


def test_empty_tree_shows_an_empty_state(alice, browser):
    page = browser(alice).get(reverse("console:departments")).content.decode()
    assert "No departments yet" in page
    assert reverse("console:department_create") in page


def test_create_department_with_parent(alice, browser):
    sales = DepartmentFactory(organization=alice.organization, name="Sales")
    response = browser(alice).post(
        reverse("console:department_create"), {"name": "West", "parent": sales.pk}
    )
    west = Department.objects.get(name="West")
    assert response.status_code == 302
    assert response["Location"] == reverse("console:department", args=[west.pk])
    assert west.parent == sales
    assert AuditEvent.objects.filter(action="department.create", target_id=str(west.pk)).exists()


def test_duplicate_name_at_same_level_shows_error_and_creates_nothing(alice, browser):
    DepartmentFactory(organization=alice.organization, name="Sales")
    response = browser(alice).post(reverse("console:department_create"), {"name": "sales"})
    assert response.status_code == 200
    assert "A department with this name exists at this level." in response.content.decode()
    assert Department.objects.filter(organization=alice.organization).count() == 1


def test_same_name_under_another_parent_is_fine(alice, browser):
    org = alice.organization
    sales = DepartmentFactory(organization=org, name="Sales")
    DepartmentFactory(organization=org, name="Support")
    response = browser(alice).post(
        reverse("console:department_create"), {"name": "Support", "parent": sales.pk}
    )
    assert response.status_code == 302


def test_missing_name_is_a_field_error(alice, browser):
    response = browser(alice).post(reverse("console:department_create"), {"name": ""})
    assert response.status_code == 200
    assert "This field is required." in response.content.decode()
    assert not Department.objects.exists()


def test_edit_form_does_not_offer_moving_under_own_subtree(alice, browser):
    org = alice.organization
    sales = DepartmentFactory(organization=org, name="Sales")
    east = DepartmentFactory(organization=org, name="East", parent=sales)
    DepartmentFactory(organization=org, name="Finance")
    page = browser(alice).get(reverse("console:department_edit", args=[sales.pk]))
    body = page.content.decode()
    assert f'<option value="{east.pk}"' not in body
    assert "Finance" in body
    # and posting it anyway is refused by validation
    response = browser(alice).post(
        reverse("console:department_edit", args=[sales.pk]), {"name": "Sales", "parent": east.pk}
    )
    assert response.status_code == 200
    sales.refresh_from_db()
    assert sales.parent is None


def test_rename_department(alice, browser):
    sales = DepartmentFactory(organization=alice.organization, name="Sales")
    response = browser(alice).post(
        reverse("console:department_edit", args=[sales.pk]), {"name": "Revenue"}
    )
    assert response.status_code == 302
    sales.refresh_from_db()
    assert sales.name == "Revenue"
    assert AuditEvent.objects.filter(action="department.update").exists()


def test_archive_department_with_members_shows_why_not(alice, browser):
    sales = DepartmentFactory(organization=alice.organization, name="Sales")
    MemberFactory(organization=alice.organization, department=sales)
    response = browser(alice).post(reverse("console:department_archive", args=[sales.pk]))
    assert response.status_code == 409
    assert "Move its members to another department first." in response.content.decode()
    sales.refresh_from_db()
    assert not sales.is_archived


def test_archive_then_restore_department(alice, browser):
    sales = DepartmentFactory(organization=alice.organization, name="Sales")
    client = browser(alice)
    assert client.get(reverse("console:department_archive", args=[sales.pk])).status_code == 200
    assert client.post(reverse("console:department_archive", args=[sales.pk])).status_code == 302
    sales.refresh_from_db()
    assert sales.is_archived
    flash = client.get(reverse("console:departments")).content.decode()
    assert "Department “Sales” was archived." in flash
    assert "Sales" not in client.get(reverse("console:departments")).content.decode()
    archived = client.get(reverse("console:departments"), {"archived": "1"}).content.decode()
    assert "Sales" in archived
    client.post(reverse("console:department_restore", args=[sales.pk]))
    sales.refresh_from_db()
    assert not sales.is_archived


def test_department_detail_lists_its_members(alice, browser):
    sales = DepartmentFactory(organization=alice.organization, name="Sales")
    MemberFactory(organization=alice.organization, department=sales, display_name="Seller")
    page = browser(alice).get(reverse("console:department", args=[sales.pk])).content.decode()
    assert "Seller" in page


def test_employee_sees_tree_without_manage_buttons(alice, bob, browser):
    DepartmentFactory(organization=alice.organization, name="Sales")
    page = browser(bob).get(reverse("console:departments")).content.decode()
    assert "Sales" in page
    assert reverse("console:department_create") not in page
    assert browser(bob).post(reverse("console:department_create"), {"name": "X"}).status_code == 403
    assert not Department.objects.filter(name="X").exists()


def test_create_position_derives_code(alice, browser):
    response = browser(alice).post(
        reverse("console:position_create"), {"name": "Key account sales"}
    )
    assert response.status_code == 302
    position = Position.objects.get(name="Key account sales")
    assert position.code == "key-account-sales"
    assert AuditEvent.objects.filter(action="position.create").exists()


def test_duplicate_position_code_shows_error(alice, browser):
    PositionFactory(organization=alice.organization, name="Sales", code="sales")
    response = browser(alice).post(reverse("console:position_create"), {"name": "Sales"})
    assert response.status_code == 200
    assert "exists" in response.content.decode()
    assert Position.objects.filter(organization=alice.organization).count() == 1


def test_position_list_edit_and_archive(alice, browser):
    position = PositionFactory(organization=alice.organization, name="Support engineer")
    client = browser(alice)
    assert "Support engineer" in client.get(reverse("console:positions")).content.decode()
    response = client.post(
        reverse("console:position_edit", args=[position.pk]),
        {"name": "Support lead", "code": position.code},
    )
    assert response.status_code == 302
    position.refresh_from_db()
    assert position.name == "Support lead"
    client.post(reverse("console:position_archive", args=[position.pk]))
    position.refresh_from_db()
    assert position.is_archived
    client.get(reverse("console:positions"))  # shows (and consumes) the flash message
    assert "Support lead" not in client.get(reverse("console:positions")).content.decode()


def test_business_admin_manages_positions_but_not_departments(make_member, browser):
    business = make_member(roles=["business_admin"])
    client = browser(business)
    assert client.get(reverse("console:position_create")).status_code == 200
    assert client.get(reverse("console:department_create")).status_code == 403


def test_outsider_cannot_edit_positions(alice, charlie, browser):
    position = PositionFactory(organization=alice.organization)
    assert (
        browser(charlie).get(reverse("console:position_edit", args=[position.pk])).status_code
        == 404
    )
