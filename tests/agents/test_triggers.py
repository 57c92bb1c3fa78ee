"""Event triggers: HMAC signature over timestamp and body, freshness window, de-duplication
by event id, member mapping, and a run started with the event as input."""

from __future__ import annotations

import json
import time

import pytest
from rest_framework.test import APIClient

from cadre.agents.models import Run, TriggerEvent
from cadre.agents.runtime.lifecycle import execution as engine
from cadre.agents.runtime.lifecycle import triggers
from cadre.governance.models import AuditEvent
from tests.refusals import nothing_changes

pytestmark = pytest.mark.django_db


@pytest.fixture
def trigger(owner, deployment, bob):
    trigger, secret = triggers.trigger_create(
        actor=owner, name="CRM", deployment=deployment, member_field="owner_email"
    )
    trigger.plain_secret = secret
    return trigger


def post(trigger, payload, *, secret=None, timestamp=None, raw=None):
    body = raw if raw is not None else json.dumps(payload).encode()
    timestamp = str(int(time.time()) if timestamp is None else timestamp)
    signature = triggers.sign(secret or trigger.plain_secret, timestamp, body)
    return APIClient().generic(
        "POST",
        f"/api/v1/triggers/{trigger.pk}/events/",
        body,
        content_type="application/json",
        HTTP_X_CADRE_TIMESTAMP=timestamp,
        HTTP_X_CADRE_SIGNATURE=signature,
    )


EVENT = {
    "event_id": "evt-1",
    "type": "deal.won",
    "data": {"owner_email": "bob@acme.test", "deal": "ACME renewal", "amount": 12000},
}


def test_signed_event_starts_a_run_with_the_event_as_input(trigger, bob):
    response = post(trigger, EVENT)
    assert response.status_code == 202, response.json()
    run = Run.objects.get(pk=response.json()["run"])
    assert run.member_id == bob.pk and run.trigger == "event"
    assert run.input["event"]["data"]["deal"] == "ACME renewal"
    assert run.session.channel == "event"
    assert AuditEvent.objects.filter(action="trigger.event", target_id=str(run.pk)).exists()
    assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    run.refresh_from_db()
    assert run.output["text"].startswith("Offline model: ")


def test_replayed_event_is_a_no_op(trigger):
    first = post(trigger, EVENT)
    again = post(trigger, EVENT)
    assert again.status_code == 200
    assert again.json() == {"duplicate": True, "run": first.json()["run"], "event_id": "evt-1"}
    assert Run.objects.count() == 1 and TriggerEvent.objects.count() == 1


def test_bad_signature_stale_timestamp_and_unknown_trigger_are_refused(trigger):
    wrong = post(trigger, EVENT, secret="not-the-secret")
    assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "bad_signature"
    stale = post(trigger, EVENT, timestamp=int(time.time()) - 301)
    assert stale.status_code == 401 and stale.json()["error"]["code"] == "stale"
    future = post(
        trigger, EVENT, timestamp=int(time.time()) + 360
    )  # past the 300 s window even if the request is slow
    assert future.status_code == 401
    body = json.dumps(EVENT).encode()
    tampered = APIClient().generic(
        "POST",
        f"/api/v1/triggers/{trigger.pk}/events/",
        body + b" ",
        content_type="application/json",
        HTTP_X_CADRE_TIMESTAMP=str(int(time.time())),
        HTTP_X_CADRE_SIGNATURE=triggers.sign(trigger.plain_secret, str(int(time.time())), body),
    )
    assert tampered.status_code == 401
    missing = APIClient().post(f"/api/v1/triggers/{trigger.pk + 1000}/events/", {}, format="json")
    assert missing.status_code == 404
    assert not Run.objects.exists()


def test_event_needs_an_id_and_a_known_member(trigger):
    with nothing_changes(Run, TriggerEvent):
        assert post(trigger, {"type": "x", "data": {}}).status_code == 400
    unknown = post(trigger, {"event_id": "e2", "data": {"owner_email": "nobody@acme.test"}})
    assert unknown.status_code == 400 and unknown.json()["error"]["code"] == "unknown_member"
    with nothing_changes(Run, TriggerEvent):
        assert post(trigger, {}, raw=b"not json").status_code == 400


def test_triggers_api_shows_the_secret_once(client_for, alice, deployment, bob):
    api = client_for(alice)
    created = api.post(
        "/api/v1/triggers/",
        {"name": "ERP", "deployment": deployment.pk, "member": bob.pk},
        format="json",
    )
    assert created.status_code == 201, created.json()
    assert len(created.json()["secret"]) > 30
    listed = api.get("/api/v1/triggers/").json()["results"][0]
    assert "secret" not in listed and listed["endpoint"].endswith("/events/")
