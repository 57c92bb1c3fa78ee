"""Anomaly alerting: rules firing, grouping by fingerprint, acknowledge/resolve, channels."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.core import mail
from django.utils import timezone

from cadre.errors import Conflict, InvalidInput, NotPermitted
from cadre.governance import alerts, audit, notifications
from cadre.governance.models import Alert, AuditEvent, AuditExport, PolicyDecision
from cadre.tenancy.actors import member_actor


@pytest.fixture(autouse=True)
def eager_celery():
    from cadre.celery import app

    previous = (app.conf.task_always_eager, app.conf.task_eager_propagates)
    app.conf.task_always_eager = app.conf.task_eager_propagates = True
    yield
    app.conf.task_always_eager, app.conf.task_eager_propagates = previous


def _rule(alice, kind, params=None, channels=None, name=None):
    return alerts.alert_rule_create(
        actor=member_actor(alice),
        name=name or kind,
        kind=kind,
        params=params or {},
        channels=channels or [],
    )


def _denials(org, count, plugin="tool_access"):
    PolicyDecision.objects.bulk_create(
        [
            PolicyDecision(organization=org, stage="tool_call", plugin=plugin, action="deny")
            for _ in range(count)
        ]
    )


def test_denied_spike_fires_once_and_groups_repeats(alice):
    rule = _rule(alice, "denied_spike", {"threshold": 3})
    org = alice.organization
    _denials(org, 3)
    assert alerts.alert_rule_evaluate(rule) == []
    _denials(org, 2)
    [alert] = alerts.alert_rule_evaluate(rule)
    assert alert.status == "open" and alert.count == 1 and alert.details["count"] == 5
    [again] = alerts.alert_rule_evaluate(rule)
    assert again.pk == alert.pk and again.count == 2  # grouped, not a new alert
    assert Alert.objects.count() == 1
    assert AuditEvent.objects.filter(action="alert.open").count() == 1


def test_resolved_alert_reopens_as_a_new_one(alice):
    rule = _rule(alice, "denied_spike", {"threshold": 0})
    _denials(alice.organization, 1)
    [alert] = alerts.alert_rule_evaluate(rule)
    actor = member_actor(alice)
    alerts.alert_acknowledge(actor=actor, alert=alert, note="looking")
    with pytest.raises(Conflict):
        alerts.alert_acknowledge(actor=actor, alert=alert)
    alerts.alert_resolve(actor=actor, alert=alert, note="false positive")
    [fresh] = alerts.alert_rule_evaluate(rule)
    assert fresh.pk != alert.pk and fresh.status == "open"
    actions = list(
        AuditEvent.objects.filter(action__startswith="alert.")
        .order_by("sequence")
        .values_list("action", flat=True)
    )
    assert actions == ["alert.open", "alert.acknowledge", "alert.resolve", "alert.open"]


def test_by_plugin_grouping(alice):
    rule = _rule(alice, "denied_spike", {"threshold": 1, "by_plugin": True})
    _denials(alice.organization, 2, "tool_access")
    _denials(alice.organization, 2, "rate_limit")
    _denials(alice.organization, 1, "masking")
    fired = alerts.alert_rule_evaluate(rule)
    assert sorted(a.details["plugin"] for a in fired) == ["rate_limit", "tool_access"]


def test_high_risk_requests_per_member(alice, bob):
    from cadre.governance import confirmations
    from cadre.governance.risk import classify

    rule = _rule(alice, "high_risk_requests", {"threshold": 2})
    for number in range(3):
        confirmations.confirmation_create(
            organization=bob.organization,
            tool="crm_delete",
            arguments={"id": number},
            assessment=classify(tool="crm_delete", arguments={"id": number}),
            idempotency_key=f"alert-test:{number}",
            requester=bob,
        )
    [alert] = alerts.alert_rule_evaluate(rule)
    assert alert.details["member"] == bob.pk and alert.details["count"] == 3


def test_bulk_exports_and_off_hours(alice):
    org = alice.organization
    exports = _rule(alice, "bulk_exports", {"threshold": 1, "max_rows": 100})
    AuditExport.objects.create(
        organization=org, requested_by=alice, formats=["jsonl"], total_rows=500
    )
    [alert] = alerts.alert_rule_evaluate(exports)
    assert alert.details["rows"] == 500
    night = _rule(
        alice,
        "off_hours",
        {"threshold": 1, "start_hour": 8, "end_hour": 20, "window_minutes": 60 * 24 * 365 * 10},
    )
    actor = member_actor(alice)
    audit.record(actor=actor, action="member.update", target=("member", 1))
    audit.record(actor=actor, action="member.update", target=("member", 2))
    hour = timezone.now().astimezone(UTC).hour
    weekday = timezone.now().astimezone(UTC).weekday()
    fired = alerts.alert_rule_evaluate(night)
    outside = weekday > 4 or not (8 <= hour < 20)
    # member events of alice (the rule creation events count too)
    assert bool(fired) == outside
    quiet = alerts.alert_rule_evaluate(
        _rule(
            alice,
            "off_hours",
            {"threshold": 1, "start_hour": 0, "end_hour": 24, "weekdays": [0, 1, 2, 3, 4, 5, 6]},
            name="never",
        )
    )
    assert quiet == []
    assert isinstance(datetime.now(UTC), datetime)


def test_signature_failures_and_skill_success_drop(alice):
    from cadre.tenancy.actors import system_actor

    org = alice.organization
    system = system_actor(org)
    for _ in range(3):
        audit.record(
            actor=system, action="connector.signature_failed", target=("connector", 9, "Feishu")
        )
    [sig] = alerts.alert_rule_evaluate(_rule(alice, "signature_failures", {"threshold": 2}))
    assert sig.details["target"] == "connector:9"
    for number in range(10):
        audit.record(
            actor=system,
            action="skill.outcome",
            target=("skill", 4),
            changes={"skill": "acme/quotes", "success": number < 3},
        )
    [skill] = alerts.alert_rule_evaluate(
        _rule(alice, "skill_success_drop", {"min_uses": 10, "min_rate": 0.5})
    )
    assert skill.details == {
        "skill": "acme/quotes",
        "uses": 10,
        "success_rate": 0.3,
        "group": "skill:acme/quotes",
    }


def test_invalid_rules_and_permissions(alice, bob):
    with pytest.raises(InvalidInput):
        _rule(alice, "not_a_kind")
    with pytest.raises(InvalidInput):
        _rule(alice, "denied_spike", channels=[{"kind": "webhook", "url": "ftp://x"}])
    with pytest.raises(NotPermitted):
        alerts.alert_rule_create(actor=member_actor(bob), name="x", kind="denied_spike")


# --- channels -------------------------------------------------------------------------------


class _Receiver(BaseHTTPRequestHandler):
    received: list = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).received.append((dict(self.headers), body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def webhook_server():
    _Receiver.received = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook", _Receiver.received
    server.shutdown()


@pytest.mark.django_db(transaction=True)
def test_new_alert_is_emailed_and_posted_to_a_signed_webhook(alice, settings, webhook_server):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    settings.CADRE_ALERT_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]  # the loopback test receiver
    url, received = webhook_server
    rule = _rule(
        alice,
        "denied_spike",
        {"threshold": 0},
        channels=[
            {"kind": "email", "to": ["soc@acme.test"]},
            {"kind": "webhook", "url": url, "secret": "s3cret"},
        ],
    )
    assert "s3cret" not in json.dumps(rule.channels)  # stored encrypted
    _denials(alice.organization, 1)
    alerts.alert_rules_evaluate()
    assert len(mail.outbox) == 1 and "Spike of denied requests" in mail.outbox[0].subject
    assert len(received) == 1
    headers, body = received[0]
    assert headers["X-Cadre-Signature"] == notifications.webhook_signature(
        "s3cret", headers["X-Cadre-Timestamp"], body
    )
    assert json.loads(body)["rule"] == rule.name
    alerts.alert_rules_evaluate()  # grouped: no second notification
    assert len(mail.outbox) == 1 and len(received) == 1


@pytest.mark.django_db(transaction=True)
def test_an_alert_with_an_im_channel_fires_when_no_im_delivery_is_registered(alice, bob, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    rule = _rule(
        alice,
        "denied_spike",
        {"threshold": 0},
        channels=[{"kind": "im", "members": [bob.pk]}, {"kind": "email", "to": ["soc@acme"]}],
    )
    _denials(alice.organization, 1)
    built_in = {k: v for k, v in notifications.ALERT_CHANNELS.items() if k != "im"}
    with notifications.ALERT_CHANNELS.overridden(built_in):
        [alert] = alerts.alert_rule_evaluate(rule)  # both channels notified on commit
        assert notifications.alert_deliver(alert_id=alert.pk, channel_index=0) == "skipped"
    assert len(mail.outbox) == 1  # the email channel still delivered


def test_api_alerts(alice, bob, charlie, make_member, client_for):
    rule = _rule(
        alice,
        "denied_spike",
        {"threshold": 0},
        channels=[{"kind": "webhook", "url": "https://x.test", "secret": "hidden"}],
    )
    _denials(alice.organization, 1)
    [alert] = alerts.alert_rule_evaluate(rule)
    client = client_for(alice)
    rules = client.get("/api/v1/alert-rules/").json()["results"]
    assert rules[0]["channels"][0]["secret"] == "********"
    created = client.post(
        "/api/v1/alert-rules/",
        {"name": "exports", "kind": "bulk_exports", "params": {"threshold": 2}},
        format="json",
    )
    assert created.status_code == 201
    auditor = make_member(roles=["auditor"])
    assert client_for(auditor).get(f"/api/v1/alerts/{alert.pk}/").status_code == 200
    assert (
        client_for(auditor)
        .post(f"/api/v1/alerts/{alert.pk}/acknowledge/", {}, format="json")
        .status_code
        == 403
    )
    assert client_for(bob).get("/api/v1/alerts/").status_code == 403
    assert client_for(charlie).get(f"/api/v1/alerts/{alert.pk}/").status_code == 404
    resolved = client.post(f"/api/v1/alerts/{alert.pk}/resolve/", {"note": "fixed"}, format="json")
    assert resolved.status_code == 200 and resolved.json()["status"] == "resolved"
    assert timedelta(0) <= timezone.now() - alert.first_seen_at
