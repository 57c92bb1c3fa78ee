"""Memory Viewer selectors and endpoints: exact figures on a known set of memories, merges,
corrections, a deletion and context records; who sees what; the trail."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from cadre.agents import ratings as ports
from cadre.memory import services
from cadre.memory.models import ContextRecord, ContextRecordItem, Memory, MemoryVersion
from tests.conftest import actor_for

TIMELINE = "/api/v1/memory-viewer/timeline/"
HEATMAP = "/api/v1/memory-viewer/heatmap/"
QUALITY = "/api/v1/memory-viewer/quality/"


def _add(actor, content, *, kind="fact", scope="user"):
    return services.memory_add(
        actor=actor, scope=scope, kind=kind, content=content, source_kind="user_statement"
    )


def _age(memory, days):
    """Move a memory's writing (row, validity and addition version) `days` back."""
    moment = timezone.now() - timedelta(days=days)
    Memory.objects.filter(pk=memory.pk).update(created_at=moment, valid_from=moment)
    MemoryVersion.objects.filter(memory=memory, change=MemoryVersion.Change.ADDITION).update(
        created_at=moment
    )


def _call(org, run_id, *, at, items, kind=ContextRecord.Kind.MODEL_CALL):
    record = ContextRecord.objects.create(
        organization=org, kind=kind, run_id=run_id, step_id="0", created_at=at
    )
    for rank, (memory, status) in enumerate(items, start=1):
        ContextRecordItem.objects.create(
            context=record, memory=memory, memory_version=1, rank=rank, score=1.0, status=status
        )
    return record


@pytest.fixture
def known(org_a, alice, bob):
    """Bob: tea (2 days ago, then corrected and written again), office (2 days ago) into
    which office2 (yesterday) was merged, a deleted phone note (today); the organization's
    expense rule (today); Alice's private note. Two model calls and one API search."""
    b, a = actor_for(bob), actor_for(alice)
    tea = _add(b, "Bob prefers tea in the afternoon", kind="preference")
    office = _add(b, "Bob's office is in Shanghai")
    office2 = _add(b, "Bob works from the Shanghai office")
    _age(tea, 2)
    _age(office, 2)
    _age(office2, 1)
    _add(b, "Bob prefers tea in the afternoon", kind="preference")  # exact duplicate
    services.memory_merge(
        actor=b, survivor=office, absorbed=office2, reason="same office", judge="rules"
    )
    tea.refresh_from_db()
    services.memory_update(
        actor=b,
        memory=tea,
        expected_version=tea.version,
        content="Bob prefers green tea in the afternoon",
    )
    rule = _add(a, "Expense reports are due on Friday", kind="requirement", scope="organization")
    secret = _add(a, "Alice keeps the spare key in the drawer")
    gone = _add(b, "Bob's old phone number")
    services.memory_delete(actor=b, memory=gone)
    now = timezone.now()
    sent, withheld = ContextRecordItem.Status.SENT, ContextRecordItem.Status.WITHHELD
    _call(org_a, "101", at=now, items=[(tea, sent), (office, withheld)])
    _call(org_a, "102", at=now - timedelta(days=1, hours=1), items=[(tea, sent), (rule, sent)])
    _call(org_a, "", at=now, items=[(office, sent)], kind=ContextRecord.Kind.SEARCH)
    _call(org_a, "103", at=now, items=[(secret, sent)])
    return {"tea": tea, "office": office, "office2": office2, "rule": rule, "gone": gone}


def _days_ago(days):
    return (timezone.now() - timedelta(days=days)).date().isoformat()


def _by_day(rows, field):
    return {(row["t"][:10], row[field]): row["count"] for row in rows}


def test_timeline_counts_additions_by_kind_and_every_event(known, bob, client_for):
    body = client_for(bob).get(TIMELINE, {"bucket": "day"}).json()
    today = _days_ago(0)
    assert _by_day(body["by_kind"], "kind") == {
        (_days_ago(2), "fact"): 1,
        (_days_ago(2), "preference"): 1,
        (_days_ago(1), "fact"): 1,
        (today, "fact"): 1,  # the deleted note was still added
        (today, "requirement"): 1,
    }
    assert _by_day(body["by_event"], "event") == {
        (_days_ago(2), "added"): 2,
        (_days_ago(1), "added"): 1,
        (today, "added"): 2,
        (today, "merged"): 2,  # the exact duplicate and the near-duplicate merge
        (today, "superseded"): 1,  # office2, absorbed
        (today, "corrected"): 1,
        (today, "deleted"): 1,
    }
    # The deleted note and Alice's private note are not points; validity spans are.
    assert body["points_total"] == 4
    assert {p["id"] for p in body["points"]} == {
        known[name].pk for name in ("tea", "office", "office2", "rule")
    }
    assert all("valid_from" in p and "valid_to" in p for p in body["points"])


def test_timeline_as_of_shows_the_set_as_it_was(known, bob, client_for):
    moment = (timezone.now() - timedelta(hours=36)).isoformat()
    body = client_for(bob).get(TIMELINE, {"as_of": moment}).json()
    assert body["as_of"]["count"] == 2
    assert body["as_of"]["by_kind"] == {"fact": 1, "preference": 1}
    # Which: tea and office (two days old); office2 was written yesterday.
    assert sorted(body["as_of"]["memory_ids"]) == sorted([known["tea"].pk, known["office"].pk])


def test_timeline_as_of_a_day_ago_includes_what_was_later_merged_away(known, bob, client_for):
    moment = (timezone.now() - timedelta(hours=12)).isoformat()
    body = client_for(bob).get(TIMELINE, {"as_of": moment}).json()
    # office2 was still valid then (merged into office today); the rule and the deleted
    # phone note were written today; Alice's private note is not Bob's to see.
    assert body["as_of"]["count"] == 3
    assert body["as_of"]["by_kind"] == {"fact": 2, "preference": 1}
    assert sorted(body["as_of"]["memory_ids"]) == sorted(
        known[name].pk for name in ("tea", "office", "office2")
    )


def test_quality_figures_have_exact_values_and_definitions(known, bob, client_for):
    body = client_for(bob).get(QUALITY).json()
    figures = {figure["key"]: figure for figure in body["figures"]}
    assert len(figures["memories_added"]["series"]) == 30
    assert figures["memories_added"]["value"] == 5
    # received = 5 added + 1 exact duplicate absorbed
    assert figures["exact_duplicate_rate"]["value"] == round(1 / 6, 4)
    assert figures["exact_duplicate_rate"]["denominator"] == 6
    assert figures["near_duplicate_rate"]["value"] == round(1 / 6, 4)
    assert figures["merge_count"]["value"] == 2
    assert figures["compression_rate"]["value"] == round(2 / 6, 4)
    assert figures["correction_rate"]["value"] == 0.2  # tea, of 5 added
    assert {p["day"]: p["value"] for p in figures["correction_rate"]["series"]}[_days_ago(2)] == 0.5
    assert figures["deletion_rate"]["value"] == 0.2
    for figure in figures.values():
        assert figure["definition"] and figure["name"]
    # Nothing rated the runs, and extraction is not priced: no signal, no number.
    recall = figures["recall_hit_rate"]
    assert (recall["signal"], recall["value"], recall["series"]) == (False, None, [])
    assert "of 2 model calls" in recall["note"]
    assert figures["extraction_cost"]["signal"] is False
    assert figures["skill_success_rate"]["signal"] is False
    assert figures["association_strength"]["signal"] is False


def test_recall_hit_rate_counts_only_rated_calls(known, bob, client_for):
    ratings = {"test": lambda org, runs: {"101": "success", "102": "failure", "103": "success"}}
    with ports.RUN_OUTCOMES.overridden(ratings):
        body = client_for(bob).get(QUALITY).json()
    recall = {f["key"]: f for f in body["figures"]}["recall_hit_rate"]
    # Run 103 was sent only Alice's private note: not one of Bob's calls.
    assert (recall["signal"], recall["value"]) == (True, 0.5)
    assert (recall["numerator"], recall["denominator"]) == (1, 2)


def test_heatmap_counts_retrievals_and_sends(known, bob, client_for):
    body = client_for(bob).get(HEATMAP, {"unused_days": 1}).json()
    today, yesterday = _days_ago(0), _days_ago(1)
    cells = {(r["day"], r["kind"]): (r["retrieved"], r["sent"]) for r in body["by_kind"]}
    assert cells == {
        (today, "preference"): (1, 1),
        (today, "fact"): (2, 0),  # withheld from a call, and an API search: not sent
        (yesterday, "preference"): (1, 1),
        (yesterday, "requirement"): (1, 1),
    }
    tea, office, rule = known["tea"].pk, known["office"].pk, known["rule"].pk
    assert [row["id"] for row in body["hottest"]] == [tea, rule, office]
    assert [row["id"] for row in body["coldest"]] == [office, rule, tea]
    assert body["hottest"][0]["sent"] == 2
    # Active, older than a day, not sent to a model call in the last day: only the office.
    assert body["unused"]["count"] == 1
    assert [m["id"] for m in body["unused"]["memories"]] == [office]


def test_a_member_sees_only_their_scopes_and_an_outsider_nothing(
    known, alice, bob, charlie, client_for
):
    alice_points = client_for(alice).get(TIMELINE).json()["points_total"]
    assert alice_points == 5  # the owner also reads Bob's personal memory and her own
    narrowed = client_for(bob).get(TIMELINE, {"member": alice.pk}).json()
    assert narrowed["points_total"] == 0 and narrowed["by_kind"] == []
    heat = client_for(bob).get(HEATMAP, {"scope": f"user:{alice.pk}"}).json()
    assert heat["by_kind"] == [] and heat["hottest"] == []
    for url in (TIMELINE, HEATMAP, QUALITY):
        response = client_for(charlie).get(url)
        assert response.status_code == 200
        assert "Shanghai" not in response.content.decode()
    outsider = client_for(charlie).get(TIMELINE).json()
    assert outsider["points"] == [] and outsider["by_event"] == []
    quality = client_for(charlie).get(QUALITY).json()
    assert {f["key"]: f["value"] for f in quality["figures"]}["memories_added"] == 0


def test_trail_lists_versions_merges_and_calls(known, alice, bob, charlie, client_for):
    office = known["office"]
    body = client_for(alice).get(f"/api/v1/memories/{office.pk}/trail/").json()
    assert [v["change"] for v in body["versions"]] == ["addition", "merge"]
    assert body["merge_count"] == 1
    assert [m["id"] for m in body["merged"]] == [known["office2"].pk]
    assert body["merged"][0]["preview"] == "Bob works from the Shanghai office"
    assert body["model_call_count"] == 2
    assert [(c["status"], c["kind"]) for c in body["withheld"]] == [("withheld", "model_call")]
    assert body["origin"]["source_kind"] == "user_statement"
    tea = client_for(alice).get(f"/api/v1/memories/{known['tea'].pk}/trail/").json()
    assert [v["change"] for v in tea["versions"]] == ["addition", "merge", "correction"]
    assert tea["model_call_count"] == 2
    assert client_for(charlie).get(f"/api/v1/memories/{office.pk}/trail/").status_code == 404
    deleted = client_for(bob).get(f"/api/v1/memories/{known['gone'].pk}/trail/")
    assert deleted.status_code == 404


@pytest.mark.parametrize(
    ("url", "params", "field"),
    [
        (TIMELINE, {"bucket": "year"}, "bucket"),
        (TIMELINE, {"since": "2026-02-01T00:00:00Z", "until": "2026-01-01T00:00:00Z"}, "since"),
        (HEATMAP, {"days": "0"}, "days"),
        (QUALITY, {"kind": "gossip"}, "kind"),
        (TIMELINE, {"scope": "galaxy:1"}, "scope"),
        ("/api/v1/memory-viewer/map/", {"sample": "0"}, "sample"),
    ],
)
def test_bad_viewer_parameters_get_a_400_envelope(bob, client_for, url, params, field):
    response = client_for(bob).get(url, params)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] and field in str(error["details"])


def test_viewer_endpoints_are_in_the_schema(alice, client_for):
    schema = client_for(alice).get("/api/schema/", {"format": "json"}).json()
    for path in ("timeline", "heatmap", "quality", "map"):
        operation = schema["paths"][f"/api/v1/memory-viewer/{path}/"]["get"]
        assert "$ref" in str(operation["responses"]["200"])
    assert "/api/v1/memories/{id}/trail/" in schema["paths"]
    assert "Figure" in schema["components"]["schemas"]


def test_figures_are_cached_per_actor_until_a_write(
    known, alice, bob, client_for, django_capture_on_commit_callbacks
):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    first = client_for(bob).get(HEATMAP).json()
    with CaptureQueriesContext(connection) as queries:
        again = client_for(bob).get(HEATMAP).json()
    assert again == first
    assert not [q for q in queries if "memory_contextrecorditem" in q["sql"]]
    # Alice reads her private note's call: her figures are hers, never Bob's cached ones.
    hers = client_for(alice).get(HEATMAP).json()
    assert {row["id"] for row in hers["hottest"]} - {row["id"] for row in first["hottest"]}
    with django_capture_on_commit_callbacks(execute=True):
        _call(
            known["office"].organization,
            "104",
            at=timezone.now(),
            items=[(known["office"], ContextRecordItem.Status.SENT)],
        )
    after = client_for(bob).get(HEATMAP).json()
    sent = {row["id"]: row["sent"] for row in after["hottest"]}
    assert (
        sent[known["office"].pk]
        == 1
        != {r["id"]: r["sent"] for r in first["hottest"]}[known["office"].pk]
    )
