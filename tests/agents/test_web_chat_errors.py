# ruff: noqa: F811 - the fixtures imported from tests.console.agents_setup are parameters here
"""A failed run's internal error (the model endpoint's answer, an exception's text) reaches
only the chat sockets of viewers who may manage models — the rule the chat page applies to its
"check it under Models" note. An employee's socket gets the run's short notice and its status,
never the error: neither as it happens nor when a reconnecting socket catches up."""

from __future__ import annotations

import json
from unittest import mock

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async

from cadre.agents.models import MODEL_FAILURE, Run
from cadre.agents.runtime.lifecycle import finish
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.tenancy.actors import member_actor
from tests.agents.test_web_chat import TIMEOUT, browser, frames_until, socket
from tests.console.agents_setup import (  # noqa: F401 - fixtures (offline, no embedding hooks)
    alice_agent,
    bob_agent,
    deployment,
    owner,
    published,
    sales,
    template,
)

pytestmark = pytest.mark.django_db(transaction=True)

ERROR = MODEL_FAILURE + "401 from https://llm.internal.acme.test/v1: invalid key sk-live-4242"
SECRET_PARTS = ("llm.internal.acme.test", "sk-live-4242", MODEL_FAILURE)


def queued_run(member, agent) -> Run:
    """A run accepted and not yet executed (no worker picks it up in this test)."""
    with mock.patch.object(runtime, "execution_enqueue"):
        return runtime.run_start(actor=member_actor(member), agent=agent, text="hello")


def _failed(run_id):
    return lambda frame: (
        frame.get("type") == "event"
        and frame["run"] == run_id
        and frame["kind"] == "status"
        and frame["data"]["status"] == Run.Status.FAILED
    )


def frames_of_a_failed_run(member, agent) -> tuple[list[dict], list[dict]]:
    """(frames pushed live while the run fails, frames a reconnecting socket catches up on)."""
    run = queued_run(member, agent)
    client = browser(member)

    async def scenario():
        live = socket(client, run.session_id)
        assert (await live.connect(timeout=TIMEOUT))[0]
        ready = await live.receive_json_from(timeout=TIMEOUT)
        await database_sync_to_async(finish.run_fail)(run.pk, ERROR)
        pushed = await frames_until(live, _failed(run.pk))
        await live.disconnect()
        again = socket(client, run.session_id, f"after={ready['after']}")
        assert (await again.connect(timeout=TIMEOUT))[0]
        await again.receive_json_from(timeout=TIMEOUT)  # ready
        caught_up = await frames_until(again, _failed(run.pk))
        await again.disconnect()
        return pushed, caught_up

    pushed, caught_up = async_to_sync(scenario)()
    assert Run.objects.get(pk=run.pk).error == ERROR
    return pushed, caught_up


def test_an_employees_socket_gets_the_notice_and_no_error_text(bob, bob_agent):
    for frames in frames_of_a_failed_run(bob, bob_agent):
        status = frames[-1]  # the failed run's status (frames_until stops on it)
        assert status["data"] == {"status": "failed"}
        notice = next(f for f in frames if f.get("kind") == "notice")
        assert notice["data"]["text"]
        text = json.dumps(frames)
        assert not any(part in text for part in SECRET_PARTS), text


def test_a_viewer_who_manages_models_gets_the_error(alice, alice_agent):
    for frames in frames_of_a_failed_run(alice, alice_agent):
        status = frames[-1]  # the failed run's status (frames_until stops on it)
        assert status["data"] == {"status": "failed", "error": ERROR}
        assert any(f.get("kind") == "notice" for f in frames)
