# ruff: noqa: F811 - the fixtures imported from tests.console.agents_setup are parameters here
"""Chat pages: an employee reaches only their own agents and sessions; without the websocket,
posting starts or continues a conversation and confirmations are decided inline."""

from __future__ import annotations

import pytest
from django.urls import reverse

from cadre.agents.models import Run, Session
from cadre.agents.runtime.lifecycle import execution as engine
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.governance.models import Confirmation
from cadre.tenancy.actors import member_actor
from tests.console.agents_setup import (  # noqa: F401 - fixtures
    alice_agent,
    bob_agent,
    client,
    deployment,
    owner,
    published,
    sales,
    template,
)

pytestmark = pytest.mark.django_db


def test_chat_opens_the_members_own_agent(bob, bob_agent):
    response = client(bob).get(reverse("console:chat"))
    assert response.status_code == 302
    assert response["Location"] == reverse("console:chat_agent", args=[bob_agent.pk])
    page = client(bob).get(response["Location"]).content.decode()
    assert "Sales assistant · Bob" in page
    assert "console/chat.js" in page


def test_a_colleagues_agent_and_session_do_not_exist_for_a_member(
    alice, bob, alice_agent, bob_agent
):
    alice_run = runtime.run_start(actor=member_actor(alice), agent=alice_agent, text="hi")
    browser = client(bob)
    assert browser.get(reverse("console:chat_agent", args=[alice_agent.pk])).status_code == 404
    session_url = reverse("console:chat_session", args=[alice_run.session_id])
    assert browser.get(session_url).status_code == 404
    send_url = reverse("console:chat_send", args=[alice_run.session_id])
    assert browser.post(send_url, {"text": "let me in"}).status_code == 404
    assert Run.objects.filter(session_id=alice_run.session_id).count() == 1
    # an owner who sees every agent still chats only with their own
    assert client(alice).get(reverse("console:chat_agent", args=[bob_agent.pk])).status_code == 404


def test_outsider_and_members_without_chat_are_kept_out(bob_agent, charlie, make_member):
    assert (
        client(charlie).get(reverse("console:chat_agent", args=[bob_agent.pk])).status_code == 404
    )
    nobody = make_member(roles=[])
    assert client(nobody).get(reverse("console:chat")).status_code == 403


def test_a_member_without_agents_is_told_so(make_member, deployment):
    loner = make_member(roles=["employee"])
    page = client(loner).get(reverse("console:chat")).content.decode()
    assert "You have no agent yet" in page


def test_posting_starts_a_session_and_shows_the_reply(bob, bob_agent):
    browser = client(bob)
    response = browser.post(
        reverse("console:chat_agent", args=[bob_agent.pk]),
        {"text": "What is the standard discount?"},
    )
    session = Session.objects.get(agent=bob_agent)
    assert response["Location"] == reverse("console:chat_session", args=[session.pk])
    run = session.runs.get()
    assert run.input["text"] == "What is the standard discount?"
    engine.run_execute(run.pk)  # the worker's part, in process
    page = browser.get(response["Location"]).content.decode()
    assert "Offline model: no language model is configured." in page and "5 percent" in page
    assert f'data-ws-path="/ws/chat/{session.pk}/' in page

    browser.post(reverse("console:chat_send", args=[session.pk]), {"text": "thanks"})
    assert list(session.runs.order_by("created_at").values_list("input__text", flat=True)) == [
        "What is the standard discount?",
        "thanks",
    ]


def test_a_finished_answer_asks_whether_it_helped_until_rated(bob, bob_agent):
    browser = client(bob)
    browser.post(reverse("console:chat_agent", args=[bob_agent.pk]), {"text": "the discount?"})
    session = Session.objects.get(agent=bob_agent)
    run = session.runs.get()
    url = reverse("console:chat_session", args=[session.pk])
    assert f'data-rate-run="{run.pk}"' not in browser.get(url).content.decode()  # not finished
    engine.run_execute(run.pk)
    page = browser.get(url).content.decode()
    assert f'data-rate-run="{run.pk}"' in page and "Was this helpful?" in page
    runtime.run_rate(actor=member_actor(bob), run=run, outcome="failure")
    page = browser.get(url).content.decode()
    assert "You rated this answer: not helpful." in page and "Was this helpful?" not in page


def test_empty_message_is_refused_on_the_form(bob, bob_agent):
    response = client(bob).post(reverse("console:chat_agent", args=[bob_agent.pk]), {"text": ""})
    assert response.status_code == 400
    assert "This field is required." in response.content.decode()
    assert not Session.objects.filter(agent=bob_agent).exists()


def test_a_stopped_agent_takes_no_messages(bob, bob_agent):
    bob_agent.status = bob_agent.Status.STOPPED
    bob_agent.save(update_fields=["status"])
    browser = client(bob)
    page = browser.get(reverse("console:chat_agent", args=[bob_agent.pk])).content.decode()
    assert "This agent is stopped" in page
    refused = browser.post(reverse("console:chat_agent", args=[bob_agent.pk]), {"text": "hi"})
    assert "This agent is stopped." in refused.content.decode()
    assert not Run.objects.filter(agent=bob_agent).exists()


def test_inline_confirmation_is_approved_by_the_member(bob, bob_agent):
    run = runtime.run_start(
        actor=member_actor(bob), agent=bob_agent, text="send hello to group:all-staff"
    )
    engine.run_execute(run.pk)
    confirmation = Confirmation.objects.get(run_id=run.pk)
    browser = client(bob)
    page = browser.get(reverse("console:chat_session", args=[run.session_id])).content.decode()
    decide_url = reverse("console:chat_decide", args=[run.session_id, confirmation.pk])
    assert decide_url in page and "Approve" in page
    browser.post(decide_url, {"decision": "approve"})
    confirmation.refresh_from_db()
    run.refresh_from_db()
    assert confirmation.status == Confirmation.Status.APPROVED
    assert confirmation.decided_via == "console"
    assert run.status == Run.Status.QUEUED  # resumed: queued for the worker
    engine.run_execute(run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED
    assert "in All staff" in run.output["text"] and "{" not in run.output["text"]


def test_a_colleague_cannot_decide_through_someone_elses_chat(alice, bob, bob_agent):
    run = runtime.run_start(
        actor=member_actor(bob), agent=bob_agent, text="send hello to group:all-staff"
    )
    engine.run_execute(run.pk)
    confirmation = Confirmation.objects.get(run_id=run.pk)
    url = reverse("console:chat_decide", args=[run.session_id, confirmation.pk])
    assert client(alice).post(url, {"decision": "approve"}).status_code == 404
    confirmation.refresh_from_db()
    assert confirmation.status == Confirmation.Status.PENDING
