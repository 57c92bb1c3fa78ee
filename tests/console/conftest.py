"""Console test helpers: a browser-like client signed in as a member."""

from __future__ import annotations

import pytest
from django.test import Client


@pytest.fixture
def browser(db):
    """A django.test.Client signed in (session) as the given member."""

    def make(member=None):
        client = Client()
        if member is not None:
            client.force_login(member.user)
        return client

    return make


@pytest.fixture
def zh(alice):
    """Alice, the owner, reads Cadre in Chinese; her name and her organization's are Chinese
    (so what a page shows of them is Chinese too)."""
    alice.language = "zh-hans"
    alice.display_name = "李娜"
    alice.save(update_fields=["language", "display_name"])
    alice.organization.name = "艾克美"
    alice.organization.save(update_fields=["name"])
    return alice


@pytest.fixture
def en(make_member):
    """An English-reading owner of the same organization."""
    return make_member(roles=("owner",), display_name="Erin", email="erin@acme.test")
