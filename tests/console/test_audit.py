"""Audit log pages: filters, pagination, the event page with its diff and chain fields."""

from __future__ import annotations

from datetime import timedelta

from django.urls import reverse
from django.utils import timezone

from cadre.governance import audit
from cadre.governance.models import AuditEvent
from cadre.tenancy import services
from cadre.tenancy.actors import member_actor, system_actor


def test_audit_log_lists_events_of_the_organization_only(alice, charlie, browser):
    services.department_create(actor=member_actor(alice), name="Acme Sales")
    services.department_create(actor=member_actor(charlie), name="Globex Lab")
    page = browser(alice).get(reverse("console:audit")).content.decode()
    assert "department.create" in page
    assert "Acme Sales" in page
    assert "Globex Lab" not in page


def test_audit_filters_by_action_prefix_actor_and_target_type(alice, bob, browser):
    actor = member_actor(alice)
    services.department_create(actor=actor, name="Sales")
    services.position_create(actor=actor, name="Seller")
    audit.record(
        actor=system_actor(alice.organization, label="nightly sync"),
        action="member.sync",
        target=bob,
    )
    client = browser(alice)

    positions = client.get(reverse("console:audit"), {"action": "position."}).content.decode()
    assert "position.create" in positions and "department.create" not in positions
    by_actor = client.get(reverse("console:audit"), {"actor": "nightly"}).content.decode()
    assert "member.sync" in by_actor and "position.create" not in by_actor
    departments = client.get(
        reverse("console:audit"), {"target_type": "department"}
    ).content.decode()
    assert "department.create" in departments and "member.sync" not in departments


def test_audit_target_types_read_as_words_not_model_names(alice, browser):
    from cadre.agents import services as agents

    actor = member_actor(alice)
    agents.template_create(actor=actor, name="Helpdesk", code="helpdesk")
    services.api_key_create(actor=actor, name="CI", scopes=["org:read"])
    page = browser(alice).get(reverse("console:audit")).content.decode()
    assert "Role template " in page
    assert '<option value="agenttemplate">Role template</option>' in page
    assert "API key " in page and '<option value="apikey">API key</option>' in page
    assert "agenttemplate " not in page and ">apikey<" not in page
    event = AuditEvent.objects.get(action="template.create")
    assert event.target_type == "agenttemplate"  # stored (and hashed) as recorded
    detail = browser(alice).get(reverse("console:audit_event", args=[event.pk])).content.decode()
    assert "Role template " in detail and "agenttemplate" not in detail


def test_audit_filters_by_date_range(alice, browser):
    services.department_create(actor=member_actor(alice), name="Sales")
    today = timezone.localdate()
    client = browser(alice)
    in_range = client.get(
        reverse("console:audit"), {"since": today.isoformat(), "until": today.isoformat()}
    ).content.decode()
    assert "department.create" in in_range
    earlier = (today - timedelta(days=3)).isoformat()
    before = client.get(reverse("console:audit"), {"since": earlier, "until": earlier})
    assert "department.create" not in before.content.decode()
    assert "No entries match these filters" in before.content.decode()


def test_reversed_date_range_is_explained(alice, browser):
    page = browser(alice).get(
        reverse("console:audit"), {"since": "2026-02-02", "until": "2026-01-01"}
    )
    assert page.status_code == 200
    assert "The end date is before the start date." in page.content.decode()


def test_audit_log_paginates_by_fifty(alice, browser):
    actor = member_actor(alice)
    for number in range(55):
        audit.record(actor=actor, action="test.event", target=("thing", number, f"T{number}"))
    client = browser(alice)
    first = client.get(reverse("console:audit")).content.decode()
    assert "Showing 1\u201350 of 55" in first
    second = client.get(reverse("console:audit"), {"page": 2}).content.decode()
    assert "Showing 51\u201355 of 55" in second


def test_event_page_shows_diff_and_chain_fields(alice, bob, browser):
    services.member_update(actor=member_actor(alice), member=bob, title="Engineer")
    audit.seal(organization=alice.organization)  # chain fields are set when sealed
    event = AuditEvent.objects.get(action="member.update")
    page = browser(alice).get(reverse("console:audit_event", args=[event.pk])).content.decode()
    assert "member.update" in page
    assert "Engineer" in page
    assert event.hash in page
    assert event.prev_hash in page
    assert 'class="before"' in page and 'class="after"' in page


def test_employee_and_outsider_cannot_read_events(alice, bob, charlie, browser):
    services.department_create(actor=member_actor(alice), name="Sales")
    event = AuditEvent.objects.get(action="department.create")
    url = reverse("console:audit_event", args=[event.pk])
    assert browser(bob).get(url).status_code == 403
    assert browser(charlie).get(url).status_code == 404
