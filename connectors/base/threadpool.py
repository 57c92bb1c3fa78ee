"""A few long-lived threads that each keep one database connection, for the inbound hot paths.

Django opens a connection per thread. Work handed to a fresh thread per request (what Django
does for a sync view under ASGI) opens and abandons a connection each time; these threads
keep theirs and check its age and health every few seconds instead of on every job (a check
costs a round trip with CONN_HEALTH_CHECKS).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from django.db import close_old_connections, connection

CONNECTION_CHECK_SECONDS = 5.0


class ConnectionThreads:
    """A lazily started thread pool (per process: a forked child starts its own)."""

    def __init__(self, name: str, size: Callable[[], int]):
        self.name = name
        self.size = size
        self._executor: ThreadPoolExecutor | None = None
        self._pid = 0
        self._threads = 0
        self._lock = threading.Lock()
        self._state = threading.local()

    def _thread_started(self) -> None:
        with self._lock:
            self._threads += 1

    def _pool(self) -> ThreadPoolExecutor:
        if self._executor is None or self._pid != os.getpid():
            with self._lock:
                if self._executor is None or self._pid != os.getpid():
                    self._executor = ThreadPoolExecutor(
                        max_workers=max(1, self.size()),
                        thread_name_prefix=self.name,
                        initializer=self._thread_started,
                    )
                    self._pid, self._threads = os.getpid(), 0
        return self._executor

    def _run(self, function: Callable[..., Any], *args: Any) -> Any:
        # What request_started/finished do for a request's own thread, every few seconds.
        now = time.monotonic()
        if now - getattr(self._state, "checked", 0.0) > CONNECTION_CHECK_SECONDS:
            close_old_connections()
            self._state.checked = now
        return function(*args)

    def submit(self, function: Callable[..., Any], *args: Any) -> Future:
        return self._pool().submit(self._run, function, *args)

    def connection_lost(self) -> None:
        """Call in a pool thread after a database error: reconnect on the next job."""
        connection.close()
        self._state.checked = 0.0

    def stop(self) -> None:
        """Close each thread's connection and stop the threads (a connection can only be
        closed by its own thread: one job per thread, held at a barrier until every thread
        has taken one). The next job starts new threads."""
        with self._lock:
            executor, threads = self._executor, self._threads
            self._executor, self._threads = None, 0
        if executor is None or self._pid != os.getpid():
            return
        if threads:
            barrier = threading.Barrier(threads)

            def close() -> None:
                connection.close()
                barrier.wait(timeout=30)

            for future in [executor.submit(close) for _ in range(threads)]:
                future.result()
        executor.shutdown(wait=True)
