"""A live Cadre for tests: the `live_server_url` fixture, uvicorn serving the project's ASGI
application on loopback (tests.live_asgi.serve_asgi)."""

from __future__ import annotations

import pytest
from django.db import connections

from tests.live_asgi import serve_asgi

pytest.importorskip("uvicorn")


@pytest.fixture
def live_server_url(monkeypatch):
    """uvicorn serving the project's ASGI application (HTTP and websockets) on a free port."""
    # Under ASGI each request's sync code runs in a thread of its own, the consumers' in a
    # long-lived executor thread: with persistent connections (CONN_MAX_AGE) theirs stay open
    # after the test and the test database cannot be dropped. Closed after each use instead.
    monkeypatch.setitem(connections["default"].settings_dict, "CONN_MAX_AGE", 0)
    with serve_asgi() as (host, port):
        yield f"http://{host}:{port}"
