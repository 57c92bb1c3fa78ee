# ruff: noqa: F811 - the fixtures imported from test_end_to_end are parameters here
"""Skill proposals over IM, per platform: an employee's correction in an IM conversation → the
skill proposal's card reaches them at the fake platform API ("Save as skill" / "Dismiss") →
their signed click confirms it (a skill candidate in review, the card updated); a stranger's
click and a replay change nothing; a dismiss click stores no candidate; a proposal decided in
the console updates the card; a plain preference sends no card."""

from __future__ import annotations

import json

import pytest

from cadre.skills import services as skill_services
from cadre.skills.models import SkillCandidate, SkillProposal
from cadre.tenancy.actors import member_actor
from connectors.cards import proposals
from connectors.models import Delivery, InboundEvent
from connectors.tests.test_end_to_end import (  # noqa: F401 - fixtures and drivers
    DRIVERS,
    WebhookDriver,
    bob_agent,
    connector,
    deliver,
    driver,
)
from tests.factories import IMIdentityFactory

pytestmark = pytest.mark.django_db

REQUEST = "Prepare the project update for the Shanghai launch."
CORRECTION = "You forgot the risks section; next time also include one."


def _correct(driver, connector, capture, text=CORRECTION):
    deliver(driver, connector, REQUEST, "evt-request", capture)
    return deliver(driver, connector, text, "evt-correction", capture)


def test_the_proposal_card_reaches_the_employee_and_a_click_saves_it(
    driver, connector, bob, alice, bob_agent, celery_eager, django_capture_on_commit_callbacks
):
    event = _correct(driver, connector, django_capture_on_commit_callbacks)
    proposal = SkillProposal.objects.get(run_id=int(event.run_ref))
    assert proposal.member == bob and proposal.status == SkillProposal.Status.PENDING
    card = Delivery.objects.get(kind="card")
    assert card.confirmation_ref == f"skill-proposal:{proposal.pk}"
    assert card.status == Delivery.Status.SENT and card.recipient == driver.user_id
    sent = json.dumps(card.body["card"], ensure_ascii=False)
    if driver.platform != "dingtalk":  # DingTalk's labels live in its card template
        assert "Save as skill" in sent and "Dismiss" in sent
    assert proposal.name in sent
    value = driver.approve_value()

    # Alice pressing bob's button is refused and decides nothing.
    IMIdentityFactory(
        member=alice, platform=driver.platform, platform_user_id=f"{driver.user_id}-alice"
    )
    with django_capture_on_commit_callbacks(execute=True):
        driver.click(connector, value, f"{driver.user_id}-alice", "click-0")
    proposal.refresh_from_db()
    assert proposal.status == SkillProposal.Status.PENDING
    assert not SkillCandidate.objects.exists()

    with django_capture_on_commit_callbacks(execute=True):
        response = driver.click(connector, value, driver.user_id, "click-1")
    assert response.status_code == 200
    if driver.platform == "feishu":
        assert response.json()["toast"]["type"] == "success"
    proposal.refresh_from_db()
    assert proposal.status == SkillProposal.Status.CONFIRMED
    candidate = SkillCandidate.objects.get()
    assert proposal.candidate == candidate and candidate.requested_by == bob
    assert candidate.status == SkillCandidate.Status.IN_REVIEW
    evidence = candidate.evidence.get()
    assert evidence.data["confirmed_via"] == f"im:{driver.platform}"
    assert len(driver.updates()) == 1  # the card now says it was saved

    # A replayed click (same token) is refused and makes no second candidate.
    with django_capture_on_commit_callbacks(execute=True):
        driver.click(connector, value, driver.user_id, "click-2")
    assert SkillCandidate.objects.count() == 1
    assert InboundEvent.objects.filter(kind="card_action", status="ignored").count() == 2


@pytest.mark.parametrize("driver", [WebhookDriver], indirect=False, ids=["webhook"])
def test_a_dismiss_click_stores_no_candidate(
    fake_api, alice, bob, bob_agent, celery_eager, django_capture_on_commit_callbacks, driver
):
    webhook = driver(fake_api)
    connector = webhook.connector(alice)
    IMIdentityFactory(member=bob, platform="webhook", platform_user_id=webhook.user_id)
    _correct(webhook, connector, django_capture_on_commit_callbacks)
    proposal = SkillProposal.objects.get()
    card = webhook._posted("card")[-1]["card"]
    dismiss = next(a for a in card["actions"] if a["label"] == "Dismiss")["value"]
    with django_capture_on_commit_callbacks(execute=True):
        webhook.click(connector, dismiss, webhook.user_id, "click-dismiss")
    proposal.refresh_from_db()
    assert proposal.status == SkillProposal.Status.DISMISSED
    assert not SkillCandidate.objects.exists()
    assert proposal.candidate is None
    updated = webhook.updates()[-1]["card"]
    assert updated["decision"] == "reject" and updated["actions"] == []


@pytest.mark.parametrize("driver", [WebhookDriver], indirect=False, ids=["webhook"])
def test_a_proposal_decided_in_the_console_updates_the_card_and_its_button_refuses(
    fake_api, alice, bob, bob_agent, celery_eager, django_capture_on_commit_callbacks, driver
):
    webhook = driver(fake_api)
    connector = webhook.connector(alice)
    IMIdentityFactory(member=bob, platform="webhook", platform_user_id=webhook.user_id)
    _correct(webhook, connector, django_capture_on_commit_callbacks)
    proposal = SkillProposal.objects.get()
    value = webhook.approve_value()
    with django_capture_on_commit_callbacks(execute=True):
        skill_services.proposal_dismiss(actor=member_actor(bob), proposal=proposal)
    assert len(webhook.updates()) == 1
    with django_capture_on_commit_callbacks(execute=True):
        webhook.click(connector, value, webhook.user_id, "click-late")
    assert not SkillCandidate.objects.exists()
    texts = webhook.replies()
    assert any("already dismissed" in text for text in texts), texts


@pytest.mark.parametrize("driver", [WebhookDriver], indirect=False, ids=["webhook"])
def test_a_stated_preference_sends_no_proposal_card(
    fake_api, alice, bob, bob_agent, celery_eager, django_capture_on_commit_callbacks, driver
):
    webhook = driver(fake_api)
    connector = webhook.connector(alice)
    IMIdentityFactory(member=bob, platform="webhook", platform_user_id=webhook.user_id)
    _correct(
        webhook,
        connector,
        django_capture_on_commit_callbacks,
        text="From now on, always write reports in bullet points, and my manager is Li Wei.",
    )
    assert not SkillProposal.objects.exists()
    assert not Delivery.objects.filter(kind="card").exists()


def test_the_proposal_listeners_are_registered_once():
    assert list(skill_services.proposal_created).count(proposals.card_for_created) == 1
    assert list(skill_services.proposal_decided).count(proposals.card_for_decided) == 1
