"""Fixtures for the connector tests: the shared cast, loopback fake APIs, a recorded clock."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.utils import translation

from connectors.tests.fakes import FakePlatformServer
from connectors.tests.guard import connections, dns  # noqa: F401 - the outbound-guard fixtures
from tests.conftest import (  # noqa: F401 - the shared cast, re-exported as fixtures
    _fresh_throttles,
    alice,
    bob,
    charlie,
    client_for,
    key_client,
    make_member,
    org_a,
    org_b,
)


@pytest.fixture
def fake_api():
    server = FakePlatformServer().start()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def _fresh_token_cache():
    """Tokens, used DingTalk signs and asked locales are kept in Redis: start every test
    without them."""
    client = cache._cache.get_client(write=True)
    for pattern in (
        "*connectors:token:*",
        "*connectors:dingtalk:sign:*",
        "*connectors:locale-asked:*",
    ):
        for key in client.scan_iter(match=pattern):
            client.delete(key)
    yield


@pytest.fixture
def sleeps():
    """A recorded clock for transports: the waits they asked for, without waiting."""
    waited: list[float] = []
    return waited


@pytest.fixture
def celery_eager():
    """Run tasks in-process (on commit) for end-to-end tests; restored afterwards."""
    from cadre.celery import app

    saved = (app.conf.task_always_eager, app.conf.task_eager_propagates)
    app.conf.task_always_eager = True
    app.conf.task_eager_propagates = True
    yield
    app.conf.task_always_eager, app.conf.task_eager_propagates = saved


@pytest.fixture(autouse=True)
def _english_thread():
    """A request activates its reader's language on the thread that served it; what a test
    does after a Chinese request starts in English again (tests/conftest.py has the same)."""
    translation.deactivate()
    yield
    translation.deactivate()
