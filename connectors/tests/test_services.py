"""Connector configuration (audited, secrets encrypted, never audited) and identity resolution."""

from __future__ import annotations

import pytest
from django.db import connection

from cadre.errors import Conflict, InvalidInput, NotPermitted
from cadre.governance.models import AuditEvent
from cadre.tenancy.actors import member_actor
from cadre.tenancy.models import IMIdentity
from connectors.base import ParsedEvent, identities, services
from connectors.models import ConnectorNotice, UnmappedIdentity
from connectors.tests.helpers import make_connector
from tests.factories import IMIdentityFactory, PositionFactory

pytestmark = pytest.mark.django_db

CREDS = {
    "app_id": "cli_a1",
    "app_secret": "s3cr3t-app",
    "encrypt_key": "enc-key-1",
    "verification_token": "vt-1",
}


def test_create_stores_credentials_encrypted_and_audits_without_them(alice):
    connector = make_connector(alice, "feishu", CREDS, {"api_base_url": "http://x"})
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT credentials_encrypted FROM connectors_connector WHERE id = %s", [connector.pk]
        )
        raw = cursor.fetchone()[0]
    assert "s3cr3t-app" not in raw and "enc-key-1" not in raw
    connector.refresh_from_db()
    assert connector.credentials["app_secret"] == "s3cr3t-app"
    event = AuditEvent.objects.get(action="connector.create")
    assert "s3cr3t-app" not in str(event.changes)
    assert event.changes["after"]["platform"] == "feishu"
    assert len(connector.public_id) >= 20


def test_rotate_replaces_secrets_and_audits_only_the_fact(alice):
    connector = make_connector(alice, "feishu", CREDS)
    services.connector_rotate_credentials(
        actor=member_actor(alice),
        connector=connector,
        credentials={**CREDS, "app_secret": "new-secret"},
    )
    connector.refresh_from_db()
    assert connector.credentials["app_secret"] == "new-secret"
    event = AuditEvent.objects.get(action="connector.rotate_credentials")
    assert "new-secret" not in str(event.changes) and "s3cr3t" not in str(event.changes)


def test_missing_or_unknown_credentials_are_refused_with_field_details(alice):
    with pytest.raises(InvalidInput) as error:
        make_connector(alice, "feishu", {"app_id": "x", "bogus": "y"})
    assert "app_secret" in error.value.details and "bogus" in error.value.details


def test_unknown_platform_is_refused(alice):
    with pytest.raises(InvalidInput):
        make_connector(alice, "telegraph", {})


def test_duplicate_name_is_a_conflict(alice):
    make_connector(alice, "feishu", CREDS, name="Main")
    with pytest.raises(Conflict):
        make_connector(alice, "feishu", CREDS, name="Main")


def test_employee_cannot_manage_connectors(bob):
    with pytest.raises(NotPermitted):
        make_connector(bob, "feishu", CREDS)


def test_update_and_binding_are_audited(alice, bob):
    connector = make_connector(alice, "feishu", CREDS)
    actor = member_actor(alice)
    services.connector_update(actor=actor, connector=connector, status="disabled")
    position = PositionFactory(organization=alice.organization)
    binding = services.binding_create(
        actor=actor, connector=connector, positions=[position], members=[bob], chat_ids=["oc_1"]
    )
    assert list(binding.positions.all()) == [position]
    actions = set(AuditEvent.objects.values_list("action", flat=True))
    assert {"connector.update", "connector.bind"} <= actions


def test_binding_refuses_objects_of_another_organization(alice, charlie):
    connector = make_connector(alice, "feishu", CREDS)
    with pytest.raises(InvalidInput):
        services.binding_create(actor=member_actor(alice), connector=connector, members=[charlie])


def test_identity_resolves_by_platform_user_id_first(alice, bob):
    connector = make_connector(alice, "feishu", CREDS)
    IMIdentityFactory(member=bob, platform="feishu", platform_user_id="ou_bob")
    assert identities.identity_resolve(connector, platform_user_id="ou_bob") == bob


def test_identity_resolves_by_email_then_remembers_the_link(alice, bob):
    connector = make_connector(alice, "feishu", CREDS)
    member = identities.identity_resolve(
        connector, platform_user_id="ou_new", email="BOB@acme.test"
    )
    assert member == bob
    assert IMIdentity.objects.filter(member=bob, platform_user_id="ou_new").exists()
    assert AuditEvent.objects.filter(action="member.identity_add").exists()


def test_identity_resolves_by_mobile_with_country_code(alice, make_member):
    carol = make_member(display_name="Carol", mobile="138-0013-8000")
    connector = make_connector(alice, "feishu", CREDS)
    member = identities.identity_resolve(
        connector, platform_user_id="ou_c", mobile="+86 13800138000"
    )
    assert member == carol


def test_identity_never_crosses_organizations(alice, charlie):
    connector = make_connector(alice, "feishu", CREDS)
    IMIdentityFactory(member=charlie, platform="feishu", platform_user_id="ou_charlie")
    assert (
        identities.identity_resolve(
            connector, platform_user_id="ou_charlie", email="charlie@globex.test"
        )
        is None
    )


def test_deactivated_member_does_not_resolve(alice, bob):
    connector = make_connector(alice, "feishu", CREDS)
    IMIdentityFactory(member=bob, platform="feishu", platform_user_id="ou_bob")
    bob.status = "deactivated"
    bob.save()
    assert identities.identity_resolve(connector, platform_user_id="ou_bob") is None


def test_unmapped_user_is_queued_once_and_admins_notified_once(alice):
    connector = make_connector(alice, "feishu", CREDS)
    event = ParsedEvent(event_key="e", sender_id="ou_x", sender_name="Xavier")
    identities.unmapped_record(connector, event)
    identities.unmapped_record(connector, event)
    row = UnmappedIdentity.objects.get()
    assert (row.platform_user_id, row.message_count) == ("ou_x", 2)
    assert ConnectorNotice.objects.filter(kind="unmapped_user").count() == 1


def test_doctor_reports_a_missing_extra_for_long_connection_mode(alice):
    from connectors.base.health import doctor_checks
    from connectors.feishu import FeishuPlatform

    make_connector(alice, "feishu", CREDS, {"mode": "long_connection"})
    make_connector(alice, "webhook", {"signing_secret": "s"})
    checks = {c.name: c for c in doctor_checks()}
    feishu = checks["connector feishu test"]
    if FeishuPlatform.extra_installed():
        assert feishu.status == "OK"
    else:
        assert feishu.status == "FAIL" and "cadre[feishu]" in feishu.fix
    assert checks["connector webhook test"].status == "OK"


def test_doctor_runs_the_connector_checks_that_connectors_registers(alice):
    from cadre.checks import APP_CHECKS
    from cadre.runtime.doctor import run_checks
    from connectors.base.health import doctor_checks

    make_connector(alice, "webhook", {"signing_secret": "s"})
    assert APP_CHECKS.get("connectors") is doctor_checks
    [check] = [c for c in run_checks() if c.name == "connector webhook test"]
    assert check.status == "OK"


def test_prune_keeps_recent_and_unhandled_events(alice):
    from datetime import timedelta

    from django.utils import timezone

    from connectors.models import InboundEvent
    from connectors.tasks import inbound_events_prune

    connector = make_connector(alice, "webhook", {"signing_secret": "s"})
    old = timezone.now() - timedelta(days=30)
    for key, status, when in [
        ("old-done", "processed", old),
        ("old-queued", "queued", old),
        ("new-done", "processed", timezone.now()),
    ]:
        InboundEvent.objects.create(
            organization=alice.organization,
            connector=connector,
            event_key=key,
            status=status,
            received_at=when,
        )
    assert inbound_events_prune() == 1
    assert set(InboundEvent.objects.values_list("event_key", flat=True)) == {
        "old-queued",
        "new-done",
    }
