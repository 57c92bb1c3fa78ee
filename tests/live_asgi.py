"""uvicorn serving the project's ASGI application on a free loopback port, in a thread."""

from __future__ import annotations

import contextlib
import socket
import threading
import time


@contextlib.contextmanager
def serve_asgi(*, backlog: int = 64):
    """Yield (host, port) of uvicorn running `cadre.asgi:application` as deploy/Dockerfile
    runs it (lifespan off, websockets auto); stopped on exit. The caller's test must use a
    transactional database (the server's threads see only committed rows), and should set
    CONN_MAX_AGE to 0: each request's sync code runs in a thread of its own, whose persistent
    connection would outlive the test database."""
    import uvicorn

    from cadre.asgi import application

    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(backlog)  # connections wait in the backlog until the server accepts them
    server = uvicorn.Server(
        uvicorn.Config(
            application,
            lifespan="off",
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
    try:
        yield listener.getsockname()
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        listener.close()
