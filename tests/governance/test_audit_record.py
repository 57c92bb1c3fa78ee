"""audit.record's own insert path: the event it returns is the row it stored, and what it stores
is cleaned (JSON-safe, secrets redacted, NUL stripped) whether or not the values need the JSON
round trip."""

from __future__ import annotations

import datetime
import json
import uuid
from decimal import Decimal

import pytest
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models

from cadre.governance import audit
from cadre.governance.models import AuditEvent
from cadre.observability import RequestContext, _request_context
from cadre.tenancy.actors import member_actor, system_actor
from tests.factories import MemberFactory


class _Color(models.TextChoices):
    RED = "red", "Red"


def _round_trip(value):
    """What `_plain` always did: the JSON round trip, then redaction."""
    return audit._redact(json.loads(json.dumps(value, cls=DjangoJSONEncoder, ensure_ascii=False)))


@pytest.mark.parametrize(
    "value",
    [
        {},
        [],
        "plain",
        None,
        {"after": {"status": "active", "n": 1, "ratio": 0.5, "ok": True, "none": None}},
        {"password": "hunter22", "nested": [{"api_key": "k", "token": "t"}, "x"], "ok": 1},
        {"Signing_Key": {"deep": "secret"}, "privateNote": "p", "label": "Private"},
        {"te\x00xt": "a\x00b", "list": ["c\x00", {"k\x00": "v\x00"}]},
        {"pass\x00word": "x"},
        # Not JSON's own types: the round trip decides.
        {"when": datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)},
        {"day": datetime.date(2026, 1, 2), "id": uuid.UUID(int=5), "amount": Decimal("1.50")},
        {"pair": (1, "two"), "color": _Color.RED},
        {1: "int key", "1": "str key", None: "none key"},
        {"nested": {"set_like": ({"token": "t"},)}},
        {"n": 1, "flag": True, "f": 1.0},
    ],
)
def test_plain_is_the_json_round_trip_redacted(value):
    plain = audit._plain(value)
    assert json.dumps(plain) == json.dumps(_round_trip(value))  # types and key order included
    assert "\x00" not in json.dumps(plain, ensure_ascii=False)


def test_plain_returns_a_copy(db):
    value = {"after": {"items": ["a"]}}
    plain = audit._plain(value)
    plain["after"]["items"].append("b")
    assert value == {"after": {"items": ["a"]}}


def _row(event_id: int) -> dict:
    stored = AuditEvent.objects.get(pk=event_id)
    return {field.attname: getattr(stored, field.attname) for field in AuditEvent._meta.fields}


def test_record_returns_the_row_it_stored(org_a, django_assert_num_queries):
    member = MemberFactory(organization=org_a, roles=["owner"])
    token = _request_context.set(
        RequestContext(request_id="req-\x00123456789", ip=" 10.0.0.1", user_agent="ua\x00/1")
    )
    try:
        event = audit.record(
            actor=member_actor(member),
            action="test.record",
            target=member,
            before={"status": "active", "password": "old", "when": datetime.date(2026, 1, 1)},
            after={"status": "inactive", "password": "new", "when": datetime.date(2026, 1, 2)},
            reason="because\x00",
        )
    finally:
        _request_context.reset(token)
    assert event.pk is not None
    assert (event._state.adding, event._state.db) == (False, "default")
    returned = {field.attname: getattr(event, field.attname) for field in AuditEvent._meta.fields}
    assert returned == _row(event.pk)
    assert event.changes == {  # both passwords redacted alike: no change to show
        "before": {"status": "active", "when": "2026-01-01"},
        "after": {"status": "inactive", "when": "2026-01-02"},
    }
    assert (event.request_id, event.user_agent, event.reason) == (
        "req-123456789",
        "ua/1",
        "because",
    )
    assert event.ip == "10.0.0.1"
    assert (event.sequence, event.prev_hash, event.hash) == (None, None, None)
    assert (event.target_type, event.target_id) == ("member", str(member.pk))
    with django_assert_num_queries(0):
        assert event.organization == org_a  # cached, as AuditEvent(organization=...) has it
    audit.seal(organization=org_a)
    assert (
        audit.verify_chain(org_a).items()
        >= {"ok": True, "checked": 1, "unsealed": 0, "broken": None}.items()
    )


def test_record_stores_changes_cleaned(org_a):
    event = audit.record(
        actor=system_actor(org_a),
        action="test.changes",
        changes={"te\x00xt": "a\x00b", "api_key": "k", "items": [{"password": 1}, "ü\x00"]},
    )
    expected = {"text": "ab", "api_key": "[redacted]", "items": [{"password": "[redacted]"}, "ü"]}
    assert event.changes == expected
    assert _row(event.pk)["changes"] == expected


def test_new_event_is_unsaved_and_saves_as_record_would(org_a):
    event = audit.new_event(actor=system_actor(org_a), action="test.new", after={"n": 1})
    assert event.pk is None and event._state.adding
    assert event.organization == org_a
    event.save(force_insert=True)
    stored = AuditEvent.objects.get(pk=event.pk)
    assert stored.changes == {"after": {"n": 1}} and stored.sequence is None


def test_record_needs_an_organization(db):
    with pytest.raises(ValueError, match="needs an organization"):
        audit.record(actor=system_actor(None), action="test.orphan")
