"""A request that finds PostgreSQL or Redis unreachable (a restart, a failover) answers 503
`service_unavailable` with Retry-After — the client retries — not a 500 that reads as a bug;
errors that are not an outage still answer 500."""

from __future__ import annotations

import json

import django.db
import kombu.exceptions
import psycopg
import psycopg.errors
import pytest
import redis.exceptions
from django.test import RequestFactory

from cadre.api.errors import DatabaseBusyMiddleware, backend_unavailable


def _wrapped(inner: BaseException) -> BaseException:
    """As Django raises it: its own OperationalError, caused by the driver's."""
    try:
        try:
            raise inner
        except BaseException as error:
            raise django.db.OperationalError(str(error)) from error
    except django.db.OperationalError as outer:
        return outer


@pytest.mark.parametrize(
    "error",
    [
        redis.exceptions.ConnectionError("Error 111 connecting to redis:6379"),
        redis.exceptions.TimeoutError("Timeout reading from socket"),
        kombu.exceptions.OperationalError("Error 111 connecting to redis:6379"),
        _wrapped(psycopg.OperationalError("connection refused")),  # no server answered at all
        _wrapped(psycopg.errors.AdminShutdown("terminating connection")),  # 57P01: restarting
        _wrapped(psycopg.errors.ConnectionFailure("connection lost")),  # 08006
    ],
    ids=["redis", "redis-timeout", "broker", "no-server", "shutdown", "connection-failure"],
)
def test_an_unreachable_backing_service_answers_503_with_retry_after(error):
    def view(request):
        raise error

    middleware = DatabaseBusyMiddleware(view)
    response = middleware.process_exception(RequestFactory().post("/api/v1/runs/"), error)
    assert response is not None and response.status_code == 503
    assert response["Retry-After"] == "5"
    assert json.loads(response.content)["error"]["code"] == "service_unavailable"


@pytest.mark.parametrize(
    "error",
    [
        _wrapped(psycopg.errors.QueryCanceled("statement timeout")),  # 57014: the server is there
        ValueError("a bug"),
        redis.exceptions.ResponseError("WRONGTYPE"),  # Redis answered
    ],
    ids=["statement-timeout", "bug", "redis-answered"],
)
def test_other_errors_are_not_called_an_outage(error):
    assert not backend_unavailable(error)
    middleware = DatabaseBusyMiddleware(lambda request: None)
    assert middleware.process_exception(RequestFactory().get("/api/v1/"), error) is None


def test_an_outage_escaping_the_error_pages_is_still_a_503():
    def view(request):
        raise redis.exceptions.ConnectionError("Connection refused")

    response = DatabaseBusyMiddleware(view)(RequestFactory().get("/api/v1/agents/"))
    assert response.status_code == 503
    assert json.loads(response.content)["error"]["code"] == "service_unavailable"
