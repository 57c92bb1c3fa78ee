"""A deployment's channels are the console and the IM platforms registered in `cadre.im` (by
connectors at startup): a platform registered there is a channel, an unknown one is refused."""

from __future__ import annotations

import pytest

from cadre.agents.models import Deployment
from cadre.im import platforms

pytestmark = pytest.mark.django_db


def deploy(client_for, alice, template, channels):
    """A deployment to alice, on `channels`."""
    return client_for(alice).post(
        "/api/v1/deployments/",
        {"name": "Sales", "template": template.pk, "members": [alice.pk], "channels": channels},
        format="json",
    )


def test_a_platform_registered_only_in_the_registry_is_a_channel(
    client_for, alice, template, published
):
    with platforms.overridden({**dict(platforms.items()), "matrix": "Matrix"}):
        created = deploy(client_for, alice, template, ["console", "matrix"])
    assert created.status_code == 201, created.json()
    assert Deployment.objects.get(pk=created.json()["id"]).channels == ["console", "matrix"]


def test_every_connector_platform_is_a_channel(client_for, alice, template, published):
    created = deploy(client_for, alice, template, ["feishu", "wecom", "dingtalk", "slack"])
    assert created.status_code == 201, created.json()


def test_an_unknown_channel_is_refused_with_an_error_code(client_for, alice, template, published):
    refused = deploy(client_for, alice, template, ["console", "carrier-pigeon"])
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["code"] == "invalid"
    assert "channels" in error["details"]
    assert not Deployment.objects.exists()
