"""A live Cadre for tests: uvicorn serving the project's ASGI application on loopback."""

from __future__ import annotations

import socket
import threading
import time

import pytest
from django.db import connections

uvicorn = pytest.importorskip("uvicorn")


@pytest.fixture
def live_server_url(monkeypatch):
    """uvicorn serving the project's ASGI application (HTTP and websockets) on a free port."""
    from cadre.asgi import application

    # Under ASGI each request's sync code runs in a thread of its own, the consumers' in a
    # long-lived executor thread: with persistent connections (CONN_MAX_AGE) theirs stay open
    # after the test and the test database cannot be dropped. Closed after each use instead.
    monkeypatch.setitem(connections["default"].settings_dict, "CONN_MAX_AGE", 0)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)  # connections wait in the backlog until the server accepts them
    port = listener.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(
            application,
            lifespan="off",  # as deploy/Dockerfile runs it (ws: auto)
            timeout_graceful_shutdown=5,
            log_level="warning",
            access_log=False,
        )
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.01)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=15)
    listener.close()
