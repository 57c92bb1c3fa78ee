"""Alerts in the console (filters, acknowledge and resolve audited, rules and channels with
the webhook restriction) and the audit export started from the console, followed and
downloaded as a bundle that verifies."""

from __future__ import annotations

import io
import tarfile

import pytest
from django.urls import reverse

from cadre.governance import alerts, export
from cadre.governance.models import Alert, AlertRule, AuditEvent, AuditExport, PolicyDecision
from cadre.tenancy.actors import member_actor

pytestmark = pytest.mark.django_db


@pytest.fixture
def eager_celery():
    from cadre.celery import app

    previous = (app.conf.task_always_eager, app.conf.task_eager_propagates)
    app.conf.task_always_eager = app.conf.task_eager_propagates = True
    yield
    app.conf.task_always_eager, app.conf.task_eager_propagates = previous


def _alert(member, *, name="denials", severity="warning") -> Alert:
    rule = alerts.alert_rule_create(
        actor=member_actor(member),
        name=name,
        kind="denied_spike",
        params={"threshold": 0},
        severity=severity,
    )
    PolicyDecision.objects.create(
        organization=member.organization, stage="tool_call", plugin="tool_access", action="deny"
    )
    [alert] = alerts.alert_rule_evaluate(rule)
    return alert


# --- alerts ---------------------------------------------------------------------------------


def test_alerts_filter_by_severity_and_state(alice, make_member, browser):
    warning = _alert(alice, name="w", severity="warning")
    critical = _alert(alice, name="c", severity="critical")
    alerts.alert_acknowledge(actor=member_actor(alice), alert=critical)
    client = browser(make_member(roles=["auditor"]))

    def listed(**params) -> set[int]:
        page = client.get(reverse("console:alerts"), params).content.decode()
        return {a.pk for a in (warning, critical) if reverse("console:alert", args=[a.pk]) in page}

    assert listed() == {warning.pk, critical.pk}
    assert listed(severity="critical") == {critical.pk}
    assert listed(status="open") == {warning.pk}
    assert listed(status="acknowledged", severity="warning") == set()
    assert client.get(reverse("console:alerts"), {"status": "nonsense"}).status_code == 200


def test_acknowledge_and_resolve_are_audited(alice, browser):
    alert = _alert(alice)
    client = browser(alice)
    acked = client.post(
        reverse("console:alert_acknowledge", args=[alert.pk]), {"note": "looking into it"}
    )
    assert acked.status_code == 302
    alert.refresh_from_db()
    assert alert.status == "acknowledged" and alert.acknowledged_by_id == alice.pk
    event = AuditEvent.objects.get(action="alert.acknowledge")
    assert event.reason == "looking into it" and event.actor_label == alice.display_name
    resolved = client.post(reverse("console:alert_resolve", args=[alert.pk]), {"note": "fixed"})
    assert resolved.status_code == 302
    alert.refresh_from_db()
    assert alert.status == "resolved" and alert.resolved_by_id == alice.pk
    assert AuditEvent.objects.get(action="alert.resolve").changes["after"] == {"status": "resolved"}
    # resolving twice is refused with a message, not an error page
    again = client.post(reverse("console:alert_resolve", args=[alert.pk]), follow=True)
    assert "already resolved" in again.content.decode()
    assert AuditEvent.objects.filter(action="alert.resolve").count() == 1


def test_reading_alerts_is_not_handling_them(alice, make_member, charlie, browser):
    alert = _alert(alice)
    auditor = browser(make_member(roles=["auditor"]))
    page = auditor.get(reverse("console:alert", args=[alert.pk]))
    assert page.status_code == 200
    assert reverse("console:alert_acknowledge", args=[alert.pk]) not in page.content.decode()
    assert auditor.post(reverse("console:alert_acknowledge", args=[alert.pk])).status_code == 403
    outsider = browser(charlie)
    assert outsider.get(reverse("console:alert", args=[alert.pk])).status_code == 404
    assert outsider.post(reverse("console:alert_resolve", args=[alert.pk])).status_code == 404
    rule = alert.rule
    assert outsider.get(reverse("console:alert_rule_edit", args=[rule.pk])).status_code == 404
    alert.refresh_from_db()
    assert alert.status == "open"


def _rule_form(**overrides) -> dict:
    data = {
        "name": "Denied spike",
        "kind": "denied_spike",
        "severity": "critical",
        "params": '{"threshold": 20, "window_minutes": 30}',
        "is_active": "on",
        "email_to": "soc@acme.test, it@acme.test",
        "webhook_url": "",
        "webhook_secret": "",
    }
    data.update(overrides)
    return data


def test_rules_and_channels_are_created_and_edited(alice, bob, browser, settings):
    settings.CADRE_ALERT_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    client = browser(alice)
    created = client.post(
        reverse("console:alert_rule_create"),
        _rule_form(
            webhook_url="http://127.0.0.1:9/hook", webhook_secret="s3cret", im_members=[bob.pk]
        ),
    )
    assert created.status_code == 302
    rule = AlertRule.objects.get(name="Denied spike")
    assert rule.params == {"threshold": 20, "window_minutes": 30} and rule.severity == "critical"
    kinds = [channel["kind"] for channel in rule.channels]
    assert kinds == ["email", "webhook", "im"]
    assert rule.channels[0]["to"] == ["soc@acme.test", "it@acme.test"]
    assert rule.channels[2]["members"] == [bob.pk]
    stored_secret = rule.channels[1]["secret"]
    assert stored_secret and "s3cret" not in stored_secret  # encrypted
    listing = client.get(reverse("console:alert_rules")).content.decode()
    assert "webhook: http://127.0.0.1:9/hook (signed)" in listing and "IM: Bob" in listing
    # edit without retyping the secret: it is kept
    edited = client.post(
        reverse("console:alert_rule_edit", args=[rule.pk]),
        _rule_form(name="Denied spike (30 min)", webhook_url="http://127.0.0.1:9/hook"),
    )
    assert edited.status_code == 302
    rule.refresh_from_db()
    assert rule.name == "Denied spike (30 min)"
    assert [c["kind"] for c in rule.channels] == ["email", "webhook"]
    assert rule.channels[1]["secret"] == stored_secret
    assert AuditEvent.objects.filter(action="alert_rule.update").count() == 1
    deleted = client.post(reverse("console:alert_rule_delete", args=[rule.pk]))
    assert deleted.status_code == 302 and not AlertRule.objects.exists()
    assert AuditEvent.objects.filter(action="alert_rule.delete").count() == 1


def test_rule_form_errors_are_clear(alice, browser):
    client = browser(alice)
    response = client.post(
        reverse("console:alert_rule_create"),
        _rule_form(params='{"threshold": ', email_to="not-an-address"),
    )
    assert response.status_code == 400
    page = response.content.decode()
    assert "Not valid JSON (line 1" in page
    assert "“not-an-address” is not an e-mail address." in page
    assert not AlertRule.objects.exists()


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:8000/hook", "http://10.1.2.3/hook", "http://169.254.169.254/latest"],
)
def test_console_refuses_internal_webhooks_unless_allowed(alice, browser, settings, url):
    settings.CADRE_ALERT_WEBHOOK_ALLOWED_HOSTS = []
    client = browser(alice)
    response = client.post(reverse("console:alert_rule_create"), _rule_form(webhook_url=url))
    assert response.status_code == 400
    assert "resolves to the internal address" in response.content.decode()
    assert not AlertRule.objects.exists()
    settings.CADRE_ALERT_WEBHOOK_ALLOWED_HOSTS = ["*"]
    allowed = client.post(reverse("console:alert_rule_create"), _rule_form(webhook_url=url))
    if url.startswith("http://169.254."):
        # Link-local (cloud metadata): no setting allows it.
        assert allowed.status_code == 400 and "never calls" in allowed.content.decode()
        assert not AlertRule.objects.exists()
        return
    assert allowed.status_code == 302
    assert AlertRule.objects.get().channels[-1]["url"] == url


def test_console_refuses_non_http_webhooks(alice, browser):
    response = browser(alice).post(
        reverse("console:alert_rule_create"), _rule_form(webhook_url="file:///etc/passwd")
    )
    assert response.status_code == 400
    assert "must use http or https" in response.content.decode()


# --- audit export ---------------------------------------------------------------------------


def test_audit_log_links_to_the_export_with_its_filters(alice, browser):
    page = browser(alice).get(reverse("console:audit"), {"action": "member."}).content.decode()
    assert f"{reverse('console:audit_exports')}?action=member." in page
    form = browser(alice).get(reverse("console:audit_exports"), {"action": "member."})
    assert 'value="member."' in form.content.decode()


def test_an_export_started_in_the_console_completes_and_downloads_a_verified_bundle(
    alice, bob, browser, eager_celery, django_capture_on_commit_callbacks, tmp_path, settings
):
    settings.DATA_DIR = tmp_path
    alerts.alert_rule_create(actor=member_actor(alice), name="r1", kind="denied_spike")
    alerts.alert_rule_create(actor=member_actor(alice), name="r2", kind="bulk_exports")
    client = browser(alice)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            reverse("console:audit_exports"),
            {"action": "alert_rule.", "formats": ["jsonl", "csv", "ocsf"], "mask": "on"},
        )
    assert response.status_code == 302
    job = AuditExport.objects.get()
    assert response["Location"] == reverse("console:audit_export", args=[job.pk])
    assert job.status == "completed" and job.rows_written == 2
    assert job.filters == {"action": "alert_rule."}
    page = client.get(response["Location"]).content.decode()
    assert "Download the signed bundle" in page and "hx-trigger" not in page
    download = client.get(reverse("console:audit_export_download", args=[job.pk]))
    assert download.status_code == 200 and download["Content-Type"] == "application/x-tar"
    bundle = tmp_path / "bundle.tar"
    bundle.write_bytes(b"".join(download.streaming_content))
    report = export.verify_bundle(bundle)
    assert report.ok, [str(problem) for problem in report.problems]
    assert report.rows == 2
    with tarfile.open(bundle) as archive:
        names = {name.rsplit("/", 1)[-1] for name in archive.getnames()}
        jsonl = archive.extractfile(
            next(
                m
                for m in archive.getmembers()
                if m.name.endswith(".jsonl") and "ocsf" not in m.name
            )
        )
        lines = io.TextIOWrapper(jsonl, encoding="utf-8").read().splitlines()
    assert {
        "audit.jsonl",
        "audit.csv",
        "audit.ocsf.jsonl",
        "manifest.json",
        "manifest.sig",
    } <= names
    assert len(lines) == 2 and all('"alert_rule.create"' in line for line in lines)


def test_a_running_export_is_polled_until_it_finishes(alice, browser, tmp_path, settings):
    settings.DATA_DIR = tmp_path
    job = export.audit_export_create(actor=member_actor(alice), formats=["jsonl"])
    client = browser(alice)
    url = reverse("console:audit_export", args=[job.pk])
    polling = client.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert polling.startswith('<div id="export-status"') and 'hx-trigger="every 2s"' in polling
    assert client.get(reverse("console:audit_export_download", args=[job.pk])).status_code == 302
    export.audit_export_run(export_id=job.pk)  # what the Celery task does
    done = client.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert "hx-trigger" not in done and "Download the signed bundle" in done


def test_export_form_errors_and_permissions(
    alice, make_member, charlie, browser, tmp_path, settings
):
    settings.DATA_DIR = tmp_path
    auditor = browser(make_member(roles=["auditor"]))
    unmasked = auditor.post(reverse("console:audit_exports"), {"formats": ["jsonl"]})
    assert unmasked.status_code == 400  # mask unticked: needs policy.manage
    assert "policy.manage" in unmasked.content.decode()
    backwards = auditor.post(
        reverse("console:audit_exports"),
        {"formats": ["jsonl"], "mask": "on", "since": "2026-05-02", "until": "2026-05-01"},
    )
    assert backwards.status_code == 400
    assert "The end date is before the start date." in backwards.content.decode()
    no_format = auditor.post(reverse("console:audit_exports"), {"mask": "on"})
    assert "Choose at least one format." in no_format.content.decode()
    assert not AuditExport.objects.exists()
    job = export.audit_export_create(actor=member_actor(alice), formats=["jsonl"])
    outsider = browser(charlie)
    assert outsider.get(reverse("console:audit_export", args=[job.pk])).status_code == 404
    assert outsider.get(reverse("console:audit_export_download", args=[job.pk])).status_code == 404


def test_the_alert_list_costs_the_same_queries_however_long_it_is(alice, browser):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client = browser(alice)
    _alert(alice, name="first")
    client.get(reverse("console:alerts"))
    with CaptureQueriesContext(connection) as one:
        client.get(reverse("console:alerts"))
    for index in range(4):
        alert = _alert(alice, name=f"more {index}")
        alerts.alert_acknowledge(actor=member_actor(alice), alert=alert)
    with CaptureQueriesContext(connection) as five:
        client.get(reverse("console:alerts"))
    assert len(five.captured_queries) == len(one.captured_queries)
