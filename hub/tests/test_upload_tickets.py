"""The periodic cleanup of the ClawHub publish flow's upload tickets: expired (abandoned)
tickets and their staged bytes go, fresh ones stay usable, one audit count per organization."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from cadre.celery import app as celery_app
from cadre.governance.models import AuditEvent
from hub import tasks
from hub.models import UploadTicket
from hub.tests.skill_samples import skill_files

pytestmark = pytest.mark.django_db


def _ticket(client, path: str, content: bytes, *, send: bool = True) -> str:
    """Ask for a ticket through the API and (unless `send` is False) upload its bytes."""
    response = client.post(
        "/api/v1/skills/-/upload-url",
        {"path": path, "size": len(content), "sha256": hashlib.sha256(content).hexdigest()},
        format="json",
    )
    assert response.status_code == 200, response.content
    ticket = response.json()
    if send:
        url = ticket["uploadUrl"].removeprefix("http://testserver")
        sent = client.post(url, data=content, content_type="application/octet-stream")
        assert sent.status_code == 200, sent.content
    return ticket["uploadTicket"]


def _age(ticket: str, minutes: int = 31) -> None:
    """As if the ticket had been asked for `minutes` ago (tickets live 30 minutes)."""
    created = timezone.now() - timedelta(minutes=minutes)
    UploadTicket.objects.filter(ticket=ticket).update(
        created_at=created, expires_at=created + timedelta(minutes=30)
    )


def _purges():
    return AuditEvent.objects.filter(action="hub.upload_ticket.purge")


def test_an_expired_ticket_and_its_bytes_are_removed_and_a_fresh_one_kept(alice, key_client, org_a):
    org_a.settings = {"hub": {"publish_without_review": True}}
    org_a.save()
    client = key_client(alice, ["hub:publish"])
    abandoned = _ticket(client, "SKILL.md", b"an abandoned publish\n")
    _age(abandoned)
    fresh = {path: _ticket(client, path, content) for path, content in skill_files().items()}

    assert tasks.upload_tickets_purge() == 1

    assert not UploadTicket.objects.filter(ticket=abandoned).exists()
    kept = UploadTicket.objects.filter(ticket__in=fresh.values())
    assert kept.count() == 3
    assert bytes(kept.get(path="SKILL.md").content) == skill_files()["SKILL.md"]
    # The kept tickets still publish.
    response = client.post(
        "/api/v1/skills",
        {
            "slug": "pdf-tools",
            "version": "1.0.0",
            "files": [
                {
                    "path": path,
                    "size": len(content),
                    "sha256": hashlib.sha256(content).hexdigest(),
                    "storageId": fresh[path],
                    "uploadTicket": fresh[path],
                }
                for path, content in skill_files().items()
            ],
        },
        format="json",
    )
    assert response.status_code == 200, response.content
    assert response.json()["publicationStatus"] == "published"
    assert not UploadTicket.objects.exists()  # consumed by the publish


def test_the_cleanup_is_audited_as_one_count_per_organization(alice, charlie, key_client):
    acme, globex = key_client(alice, ["hub:publish"]), key_client(charlie, ["hub:publish"])
    staged = [_ticket(acme, f"references/{n}.md", b"x" * (10 + n)) for n in range(2)]
    never_sent = _ticket(acme, "SKILL.md", b"never sent", send=False)
    foreign = _ticket(globex, "SKILL.md", b"globex bytes")
    for ticket in [*staged, never_sent, foreign]:
        _age(ticket)

    assert tasks.upload_tickets_purge() == 4

    assert not UploadTicket.objects.exists()
    events = {event.organization_id: event for event in _purges()}
    assert set(events) == {alice.organization_id, charlie.organization_id}
    acme_event = events[alice.organization_id]
    assert acme_event.actor_type == "system"
    assert acme_event.changes["removed"] == 3
    assert acme_event.changes["with_staged_bytes"] == 2
    assert acme_event.changes["staged_bytes"] == 10 + 11
    assert events[charlie.organization_id].changes["removed"] == 1
    assert events[charlie.organization_id].changes["staged_bytes"] == len(b"globex bytes")


def test_the_cleanup_is_idempotent(alice, key_client):
    client = key_client(alice, ["hub:publish"])
    _age(_ticket(client, "SKILL.md", b"old"))
    fresh = _ticket(client, "SKILL.md", b"new")

    assert tasks.upload_tickets_purge() == 1
    assert tasks.upload_tickets_purge() == 0
    assert _purges().count() == 1  # the empty second run records nothing
    assert list(UploadTicket.objects.values_list("ticket", flat=True)) == [fresh]


def test_asking_for_a_ticket_no_longer_deletes_other_tickets_unaudited(alice, key_client):
    client = key_client(alice, ["hub:publish"])
    old = _ticket(client, "SKILL.md", b"old")
    _age(old)
    _ticket(client, "SKILL.md", b"new")
    # Expired tickets are accepted by neither step, and only the audited cleanup removes them.
    url = f"/api/v1/hub/uploads/{old}"
    assert client.post(url, data=b"old", content_type="text/plain").status_code == 404
    assert UploadTicket.objects.filter(ticket=old).exists()
    tasks.upload_tickets_purge()
    assert not UploadTicket.objects.filter(ticket=old).exists()


def test_beat_runs_the_cleanup_task():
    entries = [
        entry
        for entry in settings.CELERY_BEAT_SCHEDULE.values()
        if entry["task"] == "hub.tasks.upload_tickets_purge"
    ]
    assert len(entries) == 1
    assert entries[0]["schedule"] <= 30 * 60  # at least as often as a ticket lives
    celery_app.loader.import_default_modules()
    assert "hub.tasks.upload_tickets_purge" in celery_app.tasks
