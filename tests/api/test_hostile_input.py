"""Hostile input on every operation: no 5xx (issue 29).

Every operation of /api/, /mem0/, /memos/, /scim/v2/ and every MCP tool, discovered from their
schemas at run time (a new operation is swept without an entry here), gets requests whose path
parameters, query parameters and body fields are replaced one at a time by hostile values —
NUL bytes, lone surrogates, `²`, `١٢`, 300-character names, `1e309`, huge and negative integers,
10,000-deep JSON, wrong types — sent as the owner's API key (a SCIM token for SCIM) to the app
served by uvicorn. No answer may be a server error. The generator is tests/api/hostile.py; a few
examples per operation here (bounded for `make test`), every example in bench/hostile_fuzz.py.

Operations that answer a 5xx today are named in KNOWN_5XX, each an xfail(strict=True) test: when
one is fixed its test passes, strict turns that into a failure, and its entry must be removed.
The list only shrinks; a 5xx of any other operation fails test_no_operation_answers_a_5xx.
"""

from __future__ import annotations

import pytest
from django.db import connections
from django.test import override_settings

from tests.api import hostile
from tests.live_asgi import serve_asgi

# The database mark makes pytest-django create the test database (it sets up only the aliases
# its collected tests name); the sweep commits its rows in a module fixture, before the tests'
# own (rolled back) transactions, and flushes them afterwards.
pytestmark = [pytest.mark.e2e, pytest.mark.django_db]

# Examples per operation: the first N of each operation's interleaved list (each operation
# starts at another kind, so every kind is sent on every surface). About 2,400 requests; the
# module takes about two minutes on two busy shared cores.
EXAMPLES_PER_OPERATION = 8
# Rates far above what the sweep sends: 429s are documented, but would hide the operations.
UNTHROTTLED = {
    "api_key": "1000000/minute",
    "user": "1000000/minute",
    "anon": "1000000/minute",
    "auth_failure": "1000000/minute",
}

# Operations that answer a 5xx to hostile input, with the cause (bench/hostile_fuzz.py lists
# each request and its traceback). Empty: a 5xx fails the sweep. An entry is a bug being fixed,
# and its strict xfail fails once it is.
KNOWN_5XX: dict[str, str] = {}


@pytest.fixture(scope="module")
def sweep(django_db_setup, django_db_blocker):
    """(outcome, credentials after it) of one sweep for the whole module, on committed rows
    (the server's threads see no others): the database is flushed afterwards, as a
    transactional test's is, so the tests that judge the outcome need no database."""
    from django.core.management import call_command

    from tests.factories import MemberFactory, OrganizationFactory

    settings_dict = connections["default"].settings_dict
    conn_max_age = settings_dict["CONN_MAX_AGE"]
    # Each request's sync code runs in a thread of its own: close its connection after use.
    settings_dict["CONN_MAX_AGE"] = 0
    with django_db_blocker.unblock():
        try:
            owner = MemberFactory(
                organization=OrganizationFactory(name="Acme", slug="acme"),
                email="alice@acme.test",
                roles=["owner"],
            )
            _warm_up_embeddings()
            with (
                serve_asgi() as (host, port),
                override_settings(CADRE_API_THROTTLE_RATES=UNTHROTTLED),
            ):
                base_url = f"http://{host}:{port}"
                target = hostile.arrange(owner, base_url)
                outcome = hostile.sweep(base_url, target.operations, EXAMPLES_PER_OPERATION)
                held = hostile.credentials_hold(target)
        finally:
            settings_dict["CONN_MAX_AGE"] = conn_max_age
            connections.close_all()
            call_command("flush", interactive=False, verbosity=0)
    return outcome, held


@pytest.fixture
def outcome(sweep) -> hostile.Outcome:
    return sweep[0]


def _warm_up_embeddings() -> None:
    """The local embedding model's first load in a process takes ~30 s on two shared cores,
    longer than a request's timeout: loaded before the sweep."""
    from cadre.memory import embeddings

    embeddings.provider_for(embeddings.active_model()).embed(["warm up"])


@pytest.mark.timeout(900)
def test_no_operation_answers_a_5xx(outcome):
    unexpected = [
        failure.describe()
        for failure in outcome.failures
        if failure.example.operation.key not in KNOWN_5XX
    ]
    assert not unexpected, "\n".join(unexpected)
    assert not outcome.timeouts, [example.describe() for example in outcome.timeouts]


@pytest.mark.timeout(900)
def test_every_surface_and_every_kind_is_swept(outcome, sweep):
    """The sweep reached what it claims: every surface, every kind of value on each, and its
    credentials held to the end (a 401 would mean a request revoked them, hiding the rest)."""
    surfaces = outcome.by_surface()
    assert set(surfaces) == {"api", "mem0", "memos", "scim", "mcp"}
    assert surfaces["api"][0] > 200 and surfaces["mcp"][0] >= 7, surfaces
    every_kind = {kind.name for kind in hostile.KINDS} | {hostile.DEEP_BODY}
    for surface, kinds in outcome.kinds.items():
        assert kinds == every_kind, (surface, every_kind - kinds)
    assert sweep[1] == {"api_key": 200, "scim_token": 200}, sweep[1]
    keys = {operation.key for operation in outcome.operations}
    assert set(KNOWN_5XX) <= keys, set(KNOWN_5XX) - keys


@pytest.mark.timeout(900)
@pytest.mark.parametrize(
    "operation",
    [
        # raises: only the 5xx assertion is the expected failure (a broken sweep is an error).
        pytest.param(
            key, marks=pytest.mark.xfail(strict=True, raises=AssertionError, reason=reason)
        )
        for key, reason in KNOWN_5XX.items()
    ],
)
def test_known_5xx(outcome, operation):
    assert operation not in outcome.failing_keys(), [
        failure.describe()
        for failure in outcome.failures
        if failure.example.operation.key == operation
    ]


def test_the_hostile_values_are_in_the_raw_request():
    """What a JSON encoder cannot write is written into the raw body: a lone surrogate escape,
    the literal 1e309, nesting far past any recursion limit; URLs carry the surrogate's bytes."""
    operation = hostile.Operation(
        surface="api",
        method="post",
        path="/api/v1/things/{id}/",
        path_params={"id": "7"},
        query={"q": None},
        body={"name": "x"},
        body_fields=[("name",), ("tags", 0, "label")],
    )

    def sent(location, name, kind):
        return hostile.build(hostile.Example(operation, location, name, kind))

    assert sent("body", "name", "lone_surrogate")[3] == b'{"name": "\\ud800"}'
    assert sent("body", "name", "float_1e309")[3] == b'{"name": 1e309}'
    assert (
        sent("body", "tags.0.label", "nul")[3] == b'{"name": "x", "tags": [{"label": "a\\u0000b"}]}'
    )
    assert sent("body", "name", "deep_json")[3].count(b"[") == hostile.DEPTH
    assert sent("whole_body", "", hostile.DEEP_BODY)[3].count(b"[") == hostile.DEPTH
    assert sent("path", "id", "lone_surrogate")[1] == "/api/v1/things/%ED%A0%80/"
    assert sent("query", "q", "superscript_digit")[1] == "/api/v1/things/7/?q=%C2%B2"
    assert sent("query", "q", "nul")[1] == "/api/v1/things/7/?q=a%00b"
    kinds = {example.kind for example in hostile.all_examples(operation)}
    assert kinds == {kind.name for kind in hostile.KINDS} | {hostile.DEEP_BODY}
