"""Who looked at my personal memories: every read of a member's personal memory by someone else
(an owner or IT admin holding `memory.personal`) is audited once per request and shown to that
member, on their Memory page and through the API; nobody else sees it, and one's own reads
leave nothing."""

from __future__ import annotations

from django.test import Client
from django.urls import reverse

from cadre.governance.audit_models import AuditEvent
from cadre.memory import selectors, services
from cadre.memory.personal_reads import ACTION
from tests.memory.conftest import actor


def add(member, content):
    return services.memory_add(
        actor=actor(member),
        content=content,
        scope="user",
        kind="fact",
        source_kind="user_statement",
    )


def reads():
    return AuditEvent.objects.filter(action=ACTION).order_by("id")


def console_for(member):
    client = Client()
    client.force_login(member.user)
    return client


def test_an_admins_api_read_of_a_members_memories_is_audited_once_and_shown_to_them(
    alice, bob, client_for
):
    first = add(bob, "My bonus target is 1.2 million yuan")
    add(bob, "I am moving to Hangzhou in May")
    admin = client_for(alice)

    listed = admin.get("/api/v1/memories/", {"scope": f"user:{bob.pk}"})
    assert listed.status_code == 200
    assert len(listed.json()["results"]) == 2

    events = list(reads())
    assert len(events) == 1  # one per request, not per row
    event = events[0]
    assert (event.actor_type, event.actor_id) == ("member", str(alice.pk))
    assert (event.target_type, event.target_id) == ("member", str(bob.pk))
    assert event.changes["route"] == "memory-list"
    assert event.changes["via"] == "api"
    assert event.changes["count"] == 2

    assert admin.get(f"/api/v1/memories/{first.pk}/").status_code == 200
    assert admin.get(f"/api/v1/memories/{first.pk}/history/").status_code == 200
    assert [e.changes["route"] for e in reads()] == [
        "memory-list",
        "memory-detail",
        "memory-history",
    ]

    log = client_for(bob).get("/api/v1/memories/access-log/")
    assert log.status_code == 200
    rows = log.json()["results"]
    assert [row["route"] for row in rows] == ["memory-history", "memory-detail", "memory-list"]
    assert rows[-1]["reader"] == "Alice"
    assert rows[-1]["count"] == 2
    assert rows[-1]["via"] == "api"
    assert rows[-1]["at"]


def test_an_admins_console_read_is_audited_and_listed_on_the_members_memory_page(alice, bob):
    secret = add(bob, "My bonus target is 1.2 million yuan")

    page = console_for(alice).get(reverse("console:memory"), {"scope": f"user:{bob.pk}"})
    assert page.status_code == 200
    assert secret.content in page.content.decode()
    events = list(reads())
    assert len(events) == 1
    assert events[0].target_id == str(bob.pk)
    assert events[0].changes["via"] == "console"
    assert events[0].changes["route"] == "console:memory"
    assert events[0].changes["count"] == 1

    own_page = console_for(bob).get(reverse("console:memory")).content.decode()
    assert 'data-testid="access-log-row"' in own_page
    assert "console:memory" in own_page and "Alice" in own_page


def test_an_admins_search_of_a_members_scope_is_audited(alice, bob):
    add(bob, "My bonus target is 1.2 million yuan")
    hits = selectors.memory_search(
        actor=actor(alice), query="bonus target", scope_keys=[f"user:{bob.pk}"]
    )
    assert len(hits) == 1
    # Outside a request the read is audited at once.
    event = reads().get()
    assert event.target_id == str(bob.pk)
    assert event.changes["count"] == 1


def test_a_colleague_never_sees_anothers_access_log(alice, bob, make_member, client_for):
    dave = make_member(display_name="Dave", email="dave@acme.test")
    add(bob, "My bonus target is 1.2 million yuan")
    client_for(alice).get("/api/v1/memories/", {"scope": f"user:{bob.pk}"})
    assert reads().count() == 1

    assert client_for(dave).get("/api/v1/memories/access-log/").json()["results"] == []
    page = console_for(dave).get(reverse("console:memory")).content.decode()
    assert 'data-testid="access-log-row"' not in page
    assert 'data-testid="access-log-empty"' in page


def test_reading_ones_own_memories_leaves_nothing(alice, bob, client_for):
    own = add(bob, "My bonus target is 1.2 million yuan")
    add(alice, "I prefer short answers")
    client = client_for(bob)
    assert client.get("/api/v1/memories/").status_code == 200
    assert client.get(f"/api/v1/memories/{own.pk}/").status_code == 200
    console_for(bob).get(reverse("console:memory"))
    # The owner reading her own personal memory is not a read of someone else's either.
    client_for(alice).get("/api/v1/memories/", {"scope": f"user:{alice.pk}"})

    assert not reads().exists()
    assert client.get("/api/v1/memories/access-log/").json()["results"] == []
