"""Governance alerts over IM: the "im" channel connectors registers texts each member once
through their identity; without that registration an IM channel is skipped, nothing sent."""

from __future__ import annotations

import json

import pytest

from cadre.governance import alerts, notifications
from cadre.governance.models import Alert
from cadre.tenancy.actors import member_actor
from connectors.feishu.tests.fake_api import APP_ID, APP_SECRET, FakeFeishu
from connectors.models import Delivery
from connectors.outbound import alerts as connector_alerts
from connectors.tests.helpers import make_connector
from tests.factories import IMIdentityFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def feishu(fake_api):
    return FakeFeishu(fake_api)


@pytest.fixture
def im_alert(alice, bob, fake_api):
    make_connector(
        alice,
        "feishu",
        {"app_id": APP_ID, "app_secret": APP_SECRET},
        {"api_base_url": fake_api.url, "max_attempts": 1},
    )
    IMIdentityFactory(member=bob, platform="feishu", platform_user_id="ou_bob")
    rule = alerts.alert_rule_create(
        actor=member_actor(alice),
        name="denials",
        kind="denied_spike",
        channels=[{"kind": "im", "members": [bob.pk, alice.pk]}],  # alice has no identity
    )
    return Alert.objects.create(
        organization=alice.organization,
        rule=rule,
        fingerprint="f" * 64,
        severity="critical",
        title="Spike of denied requests: 30",
    )


def texts(feishu) -> list[tuple[str, str]]:
    return [
        (request.json()["receive_id"], json.loads(request.json()["content"])["text"])
        for request in feishu.sent()
    ]


def test_an_im_alert_channel_texts_each_member_with_an_identity_once(im_alert, bob, feishu):
    assert notifications.ALERT_CHANNELS.get("im") is connector_alerts.alert_im_deliver
    assert notifications.alert_deliver(alert_id=im_alert.pk, channel_index=0) == "im"
    assert notifications.alert_deliver(alert_id=im_alert.pk, channel_index=0) == "im"  # retried
    assert texts(feishu) == [("ou_bob", "[CRITICAL] Spike of denied requests: 30")]
    row = Delivery.objects.get()
    assert row.idempotency_key == f"alert:{im_alert.pk}:{bob.pk}"


def test_without_im_delivery_registered_an_im_channel_is_skipped(im_alert, feishu):
    built_in = {k: v for k, v in notifications.ALERT_CHANNELS.items() if k != "im"}
    with notifications.ALERT_CHANNELS.overridden(built_in):
        assert notifications.alert_deliver(alert_id=im_alert.pk, channel_index=0) == "skipped"
    assert texts(feishu) == [] and not Delivery.objects.exists()
