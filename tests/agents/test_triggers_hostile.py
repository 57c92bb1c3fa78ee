# ruff: noqa: F811 - the trigger fixture imported from test_triggers is a parameter here
"""Event triggers under hostile input: every refusal is a 4xx with an error code, and nothing
is stored, started or audited — an absurd timestamp before any signature is checked, and
signed bodies no database column or run could hold."""

from __future__ import annotations

import json
import time

import pytest
from rest_framework.test import APIClient

from cadre.agents.models import Run, TriggerEvent
from cadre.agents.runtime.lifecycle import triggers
from tests.agents.test_triggers import trigger  # noqa: F401 - the fixture
from tests.refusals import nothing_changes

pytestmark = pytest.mark.django_db


def post(trigger, body: bytes, *, timestamp: str | None = None, signature: str | None = None):
    timestamp = str(int(time.time())) if timestamp is None else timestamp
    if signature is None:
        signature = triggers.sign(trigger.plain_secret, timestamp, body)
    client = APIClient()
    client.raise_request_exception = False
    return client.generic(
        "POST",
        f"/api/v1/triggers/{trigger.pk}/events/",
        body,
        content_type="application/json",
        HTTP_X_CADRE_TIMESTAMP=timestamp,
        HTTP_X_CADRE_SIGNATURE=signature,
    )


def event(data: object, event_id: object = "e1") -> bytes:
    return json.dumps({"event_id": event_id, "type": "deal.won", "data": data}).encode()


BOB = "bob@acme.test"


@pytest.mark.parametrize(
    "timestamp", ["9" * 400, "-" + "9" * 400, "1" * 5000], ids=["huge", "huge-negative", "5000"]
)
def test_absurd_timestamp_is_401_before_the_signature(trigger, timestamp):
    with nothing_changes(Run, TriggerEvent):
        response = post(trigger, event({"owner_email": BOB}), timestamp=timestamp)
    assert response.status_code == 401, response.content
    assert response.json()["error"]["code"] in ("bad_signature", "stale")


def test_absurd_timestamp_is_401_even_when_signed(trigger):
    timestamp = "9" * 400
    with nothing_changes(Run, TriggerEvent):
        response = post(trigger, event({"owner_email": BOB}), timestamp=timestamp)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "stale"


@pytest.mark.parametrize(
    "body",
    [
        b"[" * 100_000 + b"]" * 100_000,
        event({"owner_email": BOB, "deep": json.loads("[" * 100 + "]" * 100)}),
        event({"owner_email": BOB}, event_id="e\x00"),
        event(["x"]),
        event("str"),
        event({"owner_email": f"bob{chr(0)}@acme.test"}),
        event({"owner_email": "\ud800"}),
        event({"owner_email": BOB, "n": "a\x00b"}),
        event({"owner_email": BOB, "n": "\ud800"}),
        event({"owner_email": BOB, "n": float("nan")}),
        event({"owner_email": BOB, "n": float("inf")}),
        event({"owner_email": BOB, "n": float("-inf")}),
        event({"owner_email": BOB, "n": 1}).replace(b'"n": 1', b'"n": 1e309'),
        event({"owner_email": BOB, "\x00key": 1}),
        json.dumps({"event_id": "e1", "type": "t\x00", "data": {"owner_email": BOB}}).encode(),
    ],
    ids=[
        "deep-body",
        "deep-data",
        "nul-event-id",
        "data-list",
        "data-str",
        "nul-member",
        "lone-surrogate-member",
        "nul-in-data",
        "lone-surrogate-in-data",
        "nan",
        "infinity",
        "minus-infinity",
        "1e309",
        "nul-key",
        "nul-type",
    ],
)
def test_signed_unusable_event_is_400_and_starts_nothing(trigger, body):
    with nothing_changes(Run, TriggerEvent):
        response = post(trigger, body)
    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] == "invalid"


def test_a_usable_event_after_refusals_still_starts_a_run(trigger, bob):
    post(trigger, event({"owner_email": BOB, "n": float("nan")}))
    response = post(trigger, event({"owner_email": BOB, "n": 1.5}))
    assert response.status_code == 202, response.content
    assert Run.objects.get().member_id == bob.pk
