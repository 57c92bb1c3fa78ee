"""A failed run's internal error (the model endpoint's answer, an exception's text) reaches only
the runs API readers who may manage models (`model.manage`), as on the chat socket: two readers
of the same failed run — the employee it served and an owner — read its SSE stream, its detail
and the run list; only the owner sees the error, the employee a stable code and the short
notice the run's conversation got."""

from __future__ import annotations

import json
from unittest import mock

import pytest
from django.urls import reverse

from cadre.agents.models import MODEL_FAILURE, Run
from cadre.agents.runtime.lifecycle import finish
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.agents.runtime.records.delivery import NOTICES
from cadre.tenancy.actors import member_actor
from tests.agents.test_api import sse_events

pytestmark = pytest.mark.django_db

ERROR = MODEL_FAILURE + "401 from https://llm.internal.acme.test/v1: invalid key sk-live-4242"
SECRET_PARTS = ("llm.internal.acme.test", "sk-live-4242", MODEL_FAILURE)
PUBLIC = {"error": "run_failed", "message": NOTICES["failed"]}


@pytest.fixture
def failed_run(bob, bob_agent) -> Run:
    with mock.patch.object(runtime, "execution_enqueue"):  # no worker picks it up
        run = runtime.run_start(actor=member_actor(bob), agent=bob_agent, text="hello")
    finish.run_fail(run.pk, ERROR)
    assert Run.objects.get(pk=run.pk).error == ERROR
    return run


def _stream(client, run: Run) -> list[tuple[str, dict]]:
    return sse_events(client.get(f"/api/v1/runs/{run.pk}/events/"))


def _failed_status(events) -> dict:
    (status,) = [data for kind, data in events if kind == "status" and data["status"] == "failed"]
    return status


def test_only_the_reader_who_manages_models_reads_the_error_in_the_stream(
    client_for, alice, bob, failed_run
):
    assert member_actor(alice).has("model.manage")
    assert not member_actor(bob).has("model.manage")

    employee = _stream(client_for(bob), failed_run)
    assert _failed_status(employee) == {"kind": "status", "status": "failed", **PUBLIC}
    assert not any(part in json.dumps(employee) for part in SECRET_PARTS), employee
    assert [kind for kind, _ in employee][-1] == "end"

    manager = _stream(client_for(alice), failed_run)
    assert _failed_status(manager) == {"kind": "status", "status": "failed", "error": ERROR}
    # Both read the run's notice, the line its conversation got.
    for events in (employee, manager):
        notice = next(data for kind, data in events if kind == "notice")
        assert notice["text"] == NOTICES["failed"]


def test_only_the_reader_who_manages_models_reads_the_error_in_run_answers(
    client_for, alice, bob, failed_run
):
    employee, manager = client_for(bob), client_for(alice)
    detail = employee.get(f"/api/v1/runs/{failed_run.pk}/").json()
    (listed,) = [
        r for r in employee.get("/api/v1/runs/").json()["results"] if r["id"] == detail["id"]
    ]
    for answer in (detail, listed):
        assert answer["error"] == "run_failed"
        assert answer["error_message"] == NOTICES["failed"]
        assert not any(part in json.dumps(answer) for part in SECRET_PARTS), answer

    detail = manager.get(f"/api/v1/runs/{failed_run.pk}/").json()
    (listed,) = [
        r for r in manager.get("/api/v1/runs/").json()["results"] if r["id"] == detail["id"]
    ]
    for answer in (detail, listed):
        assert answer["error"] == ERROR
        assert answer["error_message"] == NOTICES["failed"]


def test_a_run_without_an_error_shows_none(client_for, bob, bob_agent):
    with mock.patch.object(runtime, "execution_enqueue"):
        run = runtime.run_start(actor=member_actor(bob), agent=bob_agent, text="hello")
    answer = client_for(bob).get(f"/api/v1/runs/{run.pk}/").json()
    assert answer["error"] == "" and answer["error_message"] == ""


def test_the_console_transcript_and_call_chain_show_the_error_to_those_who_manage_models(
    client_for, alice, bob, failed_run
):
    pages = (
        reverse("console:session", args=[failed_run.session_id]),
        reverse("console:run_call_chain", args=[failed_run.pk]),
    )
    for url in pages:
        employee = client_for(bob).get(url)
        assert employee.status_code == 200
        html = employee.content.decode()
        assert not any(part in html for part in SECRET_PARTS), url
    transcript = client_for(bob).get(pages[0]).content.decode()
    assert NOTICES["failed"] in transcript

    transcript = client_for(alice).get(pages[0])
    assert transcript.status_code == 200
    assert "llm.internal.acme.test" in transcript.content.decode()
