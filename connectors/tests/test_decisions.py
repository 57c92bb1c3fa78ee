"""Decision tokens: signed, bound to confirmation and decider, expiring, single use."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from connectors.base import ParsedEvent, registry
from connectors.cards import decisions
from connectors.models import InboundEvent
from connectors.tests.helpers import make_connector
from tests.factories import IMIdentityFactory

pytestmark = pytest.mark.django_db


@dataclass
class Confirmation:
    pk: str
    summary: str
    expires_at: datetime
    deciders: list

    def decider_members(self):
        return self.deciders


def test_token_round_trip_binds_confirmation_and_decider():
    expires = timezone.now() + timedelta(minutes=5)
    claim = decisions.read_decision_token(decisions.decision_token("c-1", 42, expires))
    assert (claim.confirmation_ref, claim.decider_id) == ("c-1", 42)


def test_tampered_token_is_refused():
    token = decisions.decision_token("c-1", 42, timezone.now() + timedelta(minutes=5))
    body, mac = token.split(".", 1)
    forged = decisions._b64(decisions._unb64(body).replace(b".42.", b".43.")) + "." + mac
    with pytest.raises(decisions.DecisionRefused, match="not valid"):
        decisions.read_decision_token(forged)
    with pytest.raises(decisions.DecisionRefused):
        decisions.read_decision_token("garbage")


def test_expired_token_is_refused_with_a_clear_message():
    token = decisions.decision_token("c-1", 42, timezone.now() - timedelta(seconds=1))
    with pytest.raises(decisions.DecisionRefused, match="expired"):
        decisions.read_decision_token(token)


def _click(connector, token, sender, key):
    event = ParsedEvent(
        event_key=key,
        kind="card_action",
        sender_id=sender,
        action={"cadre_token": token, "decision": "approve"},
    )
    stored = InboundEvent.objects.create(
        organization=connector.organization, connector=connector, event_key=key, kind="card_action"
    )
    return decisions.card_action_received(connector, event, stored.pk)


def test_click_checks_decider_and_uses_the_token_once(alice, bob):
    connector = make_connector(alice, "webhook", {"signing_secret": "s"})
    IMIdentityFactory(member=bob, platform="webhook", platform_user_id="u-bob")
    IMIdentityFactory(member=alice, platform="webhook", platform_user_id="u-alice")
    token = decisions.decision_token("c-9", bob.pk, timezone.now() + timedelta(minutes=5))
    stranger = _click(connector, token, "u-alice", "k0")
    assert not stranger.accepted and "Only the person" in stranger.message
    first = _click(connector, token, "u-bob", "k1")
    assert first.accepted and first.decision == "approve" and "Bob" in first.message
    again = _click(connector, token, "u-bob", "k2")
    assert not again.accepted and "already used" in again.message


def test_a_second_decider_sees_it_was_already_decided(alice, bob):
    connector = make_connector(alice, "webhook", {"signing_secret": "s"})
    IMIdentityFactory(member=bob, platform="webhook", platform_user_id="u-bob")
    IMIdentityFactory(member=alice, platform="webhook", platform_user_id="u-alice")
    expires = timezone.now() + timedelta(minutes=5)
    assert _click(
        connector, decisions.decision_token("c-7", bob.pk, expires), "u-bob", "a"
    ).accepted
    late = _click(connector, decisions.decision_token("c-7", alice.pk, expires), "u-alice", "b")
    assert not late.accepted and "already decided" in late.message


@pytest.mark.parametrize("platform", sorted(registry()))
def test_every_platform_renders_both_buttons_with_the_token(platform, bob):
    confirmation = Confirmation(
        "c-3", "Send the price list to 200 people", timezone.now() + timedelta(hours=1), [bob]
    )
    content = decisions.card_content(confirmation, bob.pk, details=[("Tool", "im_send")])
    connector = type("C", (), {"credentials": {}, "settings": {}})()
    card = registry()[platform](connector).render_confirmation_card(content)
    text = str(card)
    token = content.approve_value["cadre_token"]
    assert token in text.replace("\\\\", "\\") or token in str(card).replace('\\"', '"')
    assert "approve" in text and "reject" in text
    decided = registry()[platform](connector).render_decided_card(
        content, decided_by="Bob", decision="approve", decided_at=timezone.now()
    )
    assert "Bob" in str(decided)


def test_capabilities_are_declared_per_platform():
    caps = {name: cls.capabilities for name, cls in registry().items()}
    assert set(caps) == {"feishu", "wecom", "dingtalk", "slack", "webhook"}
    assert caps["feishu"].long_connection and caps["dingtalk"].long_connection
    assert not caps["wecom"].threads and caps["slack"].threads
    assert all(c.cards for c in caps.values())


def test_card_listeners_and_delivery_channels_are_registered_once():
    from cadre import im
    from cadre.agents.runtime.records.delivery import channels
    from cadre.governance.confirmations import on_created, on_decided
    from connectors.outbound import delivery

    assert list(on_created).count(decisions.cards_for_created) == 1
    assert list(on_decided).count(decisions.cards_for_decided) == 1
    assert sorted(channels) == sorted(registry()) == sorted(im.platforms)
    assert all(channels.get(name) is delivery.CHANNEL for name in channels)
    assert im.platforms.get("feishu") == "Feishu / Lark"
    assert ("wecom", "WeCom") in im.platform_choices()
