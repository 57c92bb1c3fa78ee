"""A failing request returns everything it took (issue 29, finding 2).

An API key's request that failed on a path outside /api/ rendered the console's 500 page, whose
context processor asked the database for the principal's memberships with a `KeyPrincipal` and
raised; the error escaped Django's handler, `request_finished` never came, and the pooled
connection stayed out. Ten such requests and every request answered 503 until a restart.

Against uvicorn with the pool cut to two connections (tests/api/error_path_app.py adds views
that fail on purpose to Cadre's URLconf): fifty failing requests in a row for each principal
and path, then a normal request is served, and no connection had to be reclaimed. The pool's
own recovery (a connection a thread kept) and the 500 page itself are tested here too.
"""

from __future__ import annotations

import http.client
import json

import pytest
from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.test import Client

from cadre.api.views import not_found, server_error
from cadre.tenancy import services
from cadre.tenancy.actors import api_key_actor, member_actor
from cadre.tenancy.authentication import KeyPrincipal
from tests.api.test_database_pool import POOL_SIZE, _server_connections, pooled_server

FAILURES_IN_A_ROW = 50
FAILING_PATHS = (
    "/api/v1/_test/fails/",  # a DRF view under /api/: the JSON envelope
    "/_test/fails-in-api-view/",  # a DRF view elsewhere, as /mem0/ and /memos/ are
    "/_test/fails/",  # a console-style Django view: the HTML page
)


@pytest.fixture
def cadre_server(transactional_db):
    with pooled_server() as port:
        yield port


@pytest.fixture
def failing_server(transactional_db):
    with pooled_server("tests.api.error_path_app:application") as port:
        yield port


def _request(port: int, path: str, headers: dict | None = None, timeout: float = 15):
    client = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        client.request("GET", path, headers=headers or {})
        response = client.getresponse()
        return response.status, response.getheader("Content-Type") or "", response.read()
    finally:
        client.close()


def _principals(alice) -> tuple[dict[str, dict], str]:
    actor = member_actor(alice)
    _, token = services.api_key_create(actor=actor, name="errors", scopes=["org:read"])
    browser = Client()
    browser.force_login(alice.user)
    session = browser.cookies[settings.SESSION_COOKIE_NAME].value
    return {
        "api_key": {"Authorization": f"Bearer {token}"},
        "session": {"Cookie": f"{settings.SESSION_COOKIE_NAME}={session}"},
        "anonymous": {},
    }, token


def _serves_normally(port: int, token: str) -> dict:
    """A normal API request is answered, and /readyz is ready; returns the pool's figures."""
    status, _, body = _request(port, "/api/v1/departments/", {"Authorization": f"Bearer {token}"})
    assert status == 200, body[:300]
    status, _, body = _request(port, "/readyz")
    ready = json.loads(body)
    assert status == 200, ready
    return ready["database_pool"]


def test_fifty_failing_requests_in_a_row_leave_the_server_serving(failing_server, alice):
    principals, token = _principals(alice)
    for name, headers in principals.items():
        for path in FAILING_PATHS:
            answers = [
                _request(failing_server, path, headers)[:2] for _ in range(FAILURES_IN_A_ROW)
            ]
            statuses = {status for status, _ in answers}
            assert statuses == {500}, (name, path, statuses)  # never 503 database_busy
            kinds = {kind.split(";")[0] for _, kind in answers}
            expected = "application/json" if path.startswith("/api/") else None
            assert expected is None or kinds == {expected}, (name, path, kinds)
    pool = _serves_normally(failing_server, token)
    # The requests gave their connections back themselves: none had to be reclaimed.
    assert pool["reclaimed"] == 0
    assert _server_connections() <= POOL_SIZE


def test_a_500_page_that_itself_fails_still_gives_the_connection_back(failing_server, alice):
    _, token = _principals(alice)
    for _ in range(FAILURES_IN_A_ROW):
        status, _, body = _request(failing_server, "/_test/fails-twice/")
        assert status == 500
        assert json.loads(body)["error"]["code"] == "server_error"
    assert _serves_normally(failing_server, token)["reclaimed"] == 0


def test_a_stream_that_fails_mid_way_gives_the_connection_back(failing_server, alice):
    _, token = _principals(alice)
    for _ in range(10):
        try:
            status = _request(failing_server, "/_test/stream-fails/")[0]
        except (http.client.HTTPException, ConnectionError):
            status = None  # the server broke the response off: what a failed stream looks like
        assert status in (500, None)
    assert _serves_normally(failing_server, token)["reclaimed"] == 0


def test_the_pool_reclaims_a_connection_its_thread_never_returned(failing_server, alice):
    """A thread that ends holding a pooled connection (nothing in Django returns it): the next
    request gives it back, and /readyz counts it."""
    _, token = _principals(alice)
    kept = 3 * POOL_SIZE
    for _ in range(kept):
        assert _request(failing_server, "/_test/thread-keeps-connection/")[0] == 200
    pool = _serves_normally(failing_server, token)
    assert pool["reclaimed"] == kept
    assert pool["exhausted"] is False
    assert _server_connections() <= POOL_SIZE


# The probe's requests (issue 29): each was a 500 that kept its connection.
PROBE = [
    ("/mem0/v2/memories/search/", '{"query": "x", "user_id": "\\u00b2"}'),
    ("/mem0/v2/memories/search/", '{"query": "x", "user_id": "\\u0661\\u0662"}'),
    ("/mem0/v2/memories/search/", '{"query": "x", "user_id": "{email}", "top_k": 1e309}'),
    ("/mem0/v3/memories/add/", '{"messages": "a\\u0000b", "user_id": "{email}", "infer": false}'),
    ("/mem0/v3/memories/add/", '{"messages": "ab", "user_id": "a\\u0000", "infer": false}'),
    ("/mem0/v3/memories/add/", '{"messages": "ab", "user_id": "{email}", "app_id": "\\u0000"}'),
    (
        "/mem0/v3/memories/add/",
        '{"messages": "ab", "user_id": "{email}", "infer": false, "metadata": {"k": "\\u0000"}}',
    ),
    ("/mem0/v2/memories/search/", "[" * 50_000),
    ("/memos/search/memory", '{"query": "x", "user_id": "\\u00b2"}'),
]


def test_the_probes_malformed_requests_leave_the_server_serving(cadre_server, alice):
    """Against Cadre's own application: the probe's requests, five times each, are 4xx with a
    code; nothing is stored; the server then serves a normal request."""
    from cadre.memory.models import Memory

    _, token = _principals(alice)
    scopes = ["memory:read", "memory:write"]
    _, memory_key = services.api_key_create(actor=member_actor(alice), name="m", scopes=scopes)
    headers = {"Authorization": f"Token {memory_key}", "Content-Type": "application/json"}
    for path, body in PROBE:
        raw = body.replace("{email}", alice.email).encode()
        for _ in range(5):
            client = http.client.HTTPConnection("127.0.0.1", cadre_server, timeout=15)
            try:
                client.request("POST", path, body=raw, headers=headers)
                response = client.getresponse()
                status, answer = response.status, json.loads(response.read())
            finally:
                client.close()
            assert 400 <= status < 500, (path, body[:80], status, answer)
            assert status not in (401, 403), answer  # refused for its input, not its key
            assert answer["error"]["code"]
    assert not Memory.objects.exists()
    assert _serves_normally(cadre_server, token)["reclaimed"] == 0


# --- the 500 page, in process ------------------------------------------------------------------


def _failing_request(rf, path: str, user, actor=None, member=None):
    request = rf.get(path)
    request.user, request.actor, request.member = user, actor, member
    return request


def _render_500(request):
    try:
        raise RuntimeError("on purpose")
    except RuntimeError:
        return server_error(request)


@pytest.mark.parametrize("path", ["/mem0/v2/memories/search/", "/members/", "/api/v1/members/"])
def test_the_500_page_for_an_api_key_asks_the_database_nothing(
    rf, alice, django_assert_num_queries, path
):
    key, _ = services.api_key_create(actor=member_actor(alice), name="k", scopes=["org:read"])
    request = _failing_request(rf, path, KeyPrincipal(key), actor=api_key_actor(key))
    with django_assert_num_queries(0):
        response = _render_500(request)
    assert response.status_code == 500
    if path.startswith(("/api/", "/mem0/")):
        assert json.loads(response.content)["error"]["code"] == "server_error"
    else:
        assert b"Something went wrong on our side" in response.content


def test_the_500_page_for_a_console_member_or_a_visitor_asks_the_database_nothing(
    rf, alice, django_assert_num_queries
):
    signed_in = _failing_request(
        rf, "/members/", alice.user, actor=member_actor(alice), member=alice
    )
    anonymous = _failing_request(rf, "/members/", AnonymousUser())
    for request in (signed_in, anonymous):
        with django_assert_num_queries(0):
            response = _render_500(request)
        assert response.status_code == 500
        assert b"nav-section" not in response.content  # the plain page, not the console shell


def test_a_404_for_an_api_key_outside_api_paths_does_not_list_memberships(
    rf, alice, django_assert_num_queries
):
    key, _ = services.api_key_create(actor=member_actor(alice), name="k", scopes=["org:read"])
    request = _failing_request(rf, "/hub/nothing/", KeyPrincipal(key), actor=api_key_actor(key))
    with django_assert_num_queries(0):
        response = not_found(request)
    assert response.status_code == 404
