"""Feedback corrections supersede what they contradict; history keeps the old state and
as_of (time travel) returns what was valid and known at a moment."""

from __future__ import annotations

import time

from django.utils import timezone

from cadre.governance.models import AuditEvent
from cadre.memory import selectors, services
from cadre.memory.models import Memory, MemoryVersion
from tests.memory.conftest import actor


def add(member, content, **fields):
    fields.setdefault("scope", "user")
    fields.setdefault("kind", "requirement")
    fields.setdefault("source_kind", "user_statement")
    return services.memory_add(actor=actor(member), content=content, **fields)


def contents(member, query, **options):
    return [
        hit.memory.content
        for hit in selectors.memory_search(actor=actor(member), query=query, **options).hits
    ]


def test_feedback_correction_supersedes_and_the_next_search_returns_the_new_state(bob):
    old = add(bob, "The weekly report goes to Zhang San, written in Chinese")
    unrelated = add(bob, "I prefer meetings after 10am", kind="preference")
    before_correction = timezone.now()
    time.sleep(0.01)

    result = services.memory_feedback(
        actor=actor(bob),
        text="That's wrong — the weekly report now goes to Li Wei, in English",
    )

    assert result.statement == "the weekly report now goes to Li Wei, in English"
    assert [memory.pk for memory in result.superseded] == [old.pk]
    new = result.created[0]
    assert new.scope_key == old.scope_key and new.kind == "requirement"
    old.refresh_from_db()
    assert old.status == "superseded" and old.superseded_by_id == new.pk
    assert old.valid_to == new.valid_from
    unrelated.refresh_from_db()
    assert unrelated.status == "active"

    assert contents(bob, "who gets the weekly report")[0] == new.content
    assert old.content not in contents(bob, "who gets the weekly report")

    correction = MemoryVersion.objects.get(memory=old, change="correction")
    assert correction.related_memory_id == new.pk and "Li Wei" in correction.reason
    assert [v.change for v in selectors.memory_history(actor(bob), old.pk)] == [
        "addition",
        "correction",
    ]
    event = AuditEvent.objects.get(action="memory.supersede", target_id=str(old.pk))
    assert "Li Wei" not in str(event.changes) and "Zhang" not in str(event.changes)

    # Time travel: before the correction the old statement was the valid one.
    assert contents(bob, "weekly report", as_of=before_correction) == [old.content]
    assert contents(bob, "weekly report", as_of=timezone.now())[0] == new.content


def test_feedback_in_chinese_corrects_a_chinese_memory(bob):
    old = add(bob, "周报发送给张三")
    result = services.memory_feedback(actor=actor(bob), text="不对，周报现在发给李伟")
    assert result.statement == "周报现在发给李伟"
    assert [memory.pk for memory in result.superseded] == [old.pk]
    assert contents(bob, "周报发给谁")[0] == "周报现在发给李伟"


def test_feedback_that_matches_nothing_changes_nothing_and_says_so(bob):
    add(bob, "I prefer tea in the afternoon", kind="preference")
    result = services.memory_feedback(
        actor=actor(bob), text="Actually, my car is parked on level B2"
    )
    assert result.superseded == [] and result.created == []
    assert result.message == "Nothing was changed: no stored memory says otherwise."
    assert not Memory.objects.filter(content__contains="level B2").exists()
    assert Memory.objects.get(content="I prefer tea in the afternoon").status == "active"


def test_feedback_does_not_supersede_memory_the_actor_may_not_change(chart):
    bob, erin = chart["bob"], chart["erin"]
    rule = add(
        bob,
        "The Sales weekly report goes to Zhang San",
        scope="department",
        scope_id=chart["sales"].pk,
    )
    result = services.memory_feedback(
        actor=actor(erin), text="Wrong: the Sales weekly report goes to Li Wei"
    )
    rule.refresh_from_db()
    assert rule.status == "active"
    assert result.superseded == [] and result.created == []
    assert result.outcome == "nothing_changed"


def test_as_of_hides_what_was_not_yet_recorded(bob):
    moment = timezone.now()
    time.sleep(0.01)
    add(bob, "The office wifi password rotates monthly", kind="fact")
    assert contents(bob, "office wifi", as_of=moment) == []
    assert contents(bob, "office wifi") == ["The office wifi password rotates monthly"]
