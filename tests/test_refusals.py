"""`nothing_changes` notices a stored row, a changed object, an audit event and queued work."""

from __future__ import annotations

import pytest
from django.db import transaction

from cadre.tenancy import services
from cadre.tenancy.actors import member_actor
from cadre.tenancy.models import Department
from tests.factories import DepartmentFactory
from tests.refusals import nothing_changes


def test_a_new_row_of_a_watched_model_fails(alice):
    with (
        pytest.raises(AssertionError, match="Department"),
        nothing_changes(Department, audit=False),
    ):
        DepartmentFactory(organization=alice.organization)


def test_a_changed_object_fails(alice):
    department = DepartmentFactory(organization=alice.organization)
    with (
        pytest.raises(AssertionError, match=f"Department #{department.pk}"),
        nothing_changes(department, audit=False),
    ):
        Department.objects.filter(pk=department.pk).update(name="Renamed")


def test_an_audit_event_fails_unless_told_otherwise(alice):
    with pytest.raises(AssertionError, match="AuditEvent"), nothing_changes():
        services.department_create(actor=member_actor(alice), name="Audited")


def test_work_queued_for_after_the_commit_fails(db):
    with pytest.raises(AssertionError, match="queued"), nothing_changes():
        transaction.on_commit(lambda: None)


def test_a_block_that_changes_nothing_passes(alice):
    department = DepartmentFactory(organization=alice.organization)
    with nothing_changes(Department, department):
        Department.objects.filter(pk=department.pk).exists()
