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
