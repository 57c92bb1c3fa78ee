"""The IM platforms of identities come from one registry, `cadre.im.platforms`, which
connectors fills from its platform packages: a platform registered there is accepted and
listed, an unknown one is refused with an error code."""

from __future__ import annotations

import pytest

from cadre.im import platform_choices, platforms
from cadre.tenancy.models import IMIdentity
from connectors.base import registry

pytestmark = pytest.mark.django_db


def matrix_registered():
    return platforms.overridden({**dict(platforms.items()), "matrix": "Matrix"})


def add_identity(api, member, platform):
    return api.post(
        "/api/v1/im-identities/",
        {"member": member.pk, "platform": platform, "platform_user_id": "@bob:example.org"},
        format="json",
    )


def test_connectors_registers_each_of_its_platforms_with_its_label():
    assert dict(platform_choices()) == {name: cls.label for name, cls in registry().items()}
    assert platforms.get("feishu") == "Feishu / Lark"


def test_a_platform_registered_only_in_the_registry_is_accepted_and_listed(client_for, alice, bob):
    api = client_for(alice)
    with matrix_registered():
        created = add_identity(api, bob, "matrix")
        listed = api.get("/api/v1/im-identities/", {"platform": "matrix"})
        choices = list(IMIdentity._meta.get_field("platform").choices)
    assert created.status_code == 201, created.json()
    assert IMIdentity.objects.get(pk=created.json()["id"]).platform == "matrix"
    assert listed.status_code == 200, listed.json()
    assert [row["id"] for row in listed.json()["results"]] == [created.json()["id"]]
    assert ("matrix", "Matrix") in choices


def test_an_unknown_platform_is_refused_with_an_error_code(client_for, alice, bob):
    refused = add_identity(client_for(alice), bob, "matrix")
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["code"] == "invalid"
    assert "platform" in error["details"]
    assert not IMIdentity.objects.exists()
