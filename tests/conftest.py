"""The cast every suite shares (as healthchecks does): alice and bob in organization A, charlie
in organization B. alice owns A; bob is an employee of A; charlie owns B (an outsider to A)."""

from __future__ import annotations

import threading

import pytest
from celery.signals import task_postrun
from django.db import connections
from django.utils import translation
from rest_framework.test import APIClient

from cadre.agents.runtime.records import delivery
from cadre.tenancy import services
from cadre.tenancy.actors import member_actor
from tests.factories import MemberFactory, OrganizationFactory

PASSWORD = "correct-horse-battery-9"


@task_postrun.connect(weak=False)
def _close_test_worker_connections(sender=None, **_kwargs) -> None:
    """Tests run Celery workers in a thread (celery.contrib.testing): a worker keeps its
    connections between tasks, and a thread's would outlive the test and hold the test
    database open at teardown. Close them after each task such a worker runs."""
    eager = getattr(getattr(sender, "request", None), "is_eager", False)
    if not eager and threading.current_thread() is not threading.main_thread():
        connections.close_all()


class ReachingChannel:
    """The stand-in for an organization's IM connector: every agent message can be delivered
    (`check` finds no problem), so `im_send` — which refuses a message no channel can deliver,
    before any confirmation — asks and sends as with a connector. The ids of the messages
    handed over are kept and go no further; replies go to the real channel."""

    def __init__(self):
        self.messages: list[int] = []

    def channel(self, real: delivery.Channel | None) -> delivery.Channel:
        reply = real.reply if real is not None else (lambda reply: None)
        return delivery.Channel(reply=reply, message=self.messages.append, check=lambda m: "")


@pytest.fixture(autouse=True)
def _english_installer(monkeypatch):
    """`make up`, `cadre doctor` and the demo organization speak the installer's language
    (cadre.runtime.language): the suite asserts English, whatever the developer's locale. A
    test of the Chinese installer sets CADRE_LANGUAGE itself."""
    monkeypatch.setenv("CADRE_LANGUAGE", "en")


@pytest.fixture(autouse=True)
def _english_thread():
    """A request activates its reader's language on the thread that served it (as Django's
    LocaleMiddleware does); what a test does after a Chinese request starts in English again."""
    translation.deactivate()
    yield
    translation.deactivate()


@pytest.fixture(autouse=True)
def im_channel():
    """Every test's organizations reach their members over IM (`ReachingChannel` behind each
    platform's delivery channel). A test of what happens without one overrides
    `delivery.channels` itself (`delivery.channels.overridden()`: no channel at all); the
    connectors' own tests (connectors/tests) deliver through real connectors."""
    reaching = ReachingChannel()
    channels = dict(delivery.channels.items()) or {"web": None}
    with delivery.channels.overridden(
        {name: reaching.channel(real) for name, real in channels.items()}
    ):
        yield reaching


@pytest.fixture
def org_a(db):
    return OrganizationFactory(name="Acme", slug="acme")


@pytest.fixture
def org_b(db):
    return OrganizationFactory(name="Globex", slug="globex")


@pytest.fixture
def alice(org_a):
    return MemberFactory(
        organization=org_a, display_name="Alice", email="alice@acme.test", roles=["owner"]
    )


@pytest.fixture
def bob(org_a):
    return MemberFactory(
        organization=org_a, display_name="Bob", email="bob@acme.test", roles=["employee"]
    )


@pytest.fixture
def charlie(org_b):
    return MemberFactory(
        organization=org_b, display_name="Charlie", email="charlie@globex.test", roles=["owner"]
    )


@pytest.fixture
def make_member(org_a):
    def make(roles=("employee",), organization=None, **fields):
        return MemberFactory(organization=organization or org_a, roles=list(roles), **fields)

    return make


def actor_for(member):
    return member_actor(member)


@pytest.fixture
def client_for(db):
    """An API client signed in (session) as the given member."""

    def make(member):
        client = APIClient()
        client.force_login(member.user)
        return client

    return make


@pytest.fixture
def key_client(db):
    """An API client authenticated with a new API key of `member` with `scopes`."""

    def make(member, scopes):
        _, secret = services.api_key_create(actor=member_actor(member), name="test", scopes=scopes)
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
        client.secret = secret
        return client

    return make


@pytest.fixture
def uvicorn_server(monkeypatch):
    """(host, port) of uvicorn serving the project's ASGI application on loopback."""
    from tests.live_asgi import serve_asgi

    # Each request's sync code runs in a thread of its own: close its connection after use, so
    # the test database can be dropped.
    monkeypatch.setitem(connections["default"].settings_dict, "CONN_MAX_AGE", 0)
    with serve_asgi(backlog=16) as address:
        yield address


@pytest.fixture(autouse=True)
def _fresh_throttles():
    """Sign-in locks and API rate-limit history live in Redis across tests; each test starts
    with none, so one test's failed attempts from 127.0.0.1 never lock out another's."""
    from django.core.cache import caches

    from cadre.api.throttles import THROTTLE_CACHE

    throttle_cache = caches[THROTTLE_CACHE]
    client = throttle_cache._cache.get_client(None, write=True)
    pattern = throttle_cache.make_key("*")
    for key in client.scan_iter(match=pattern, count=500):
        client.delete(key)
    yield
