"""Keeps the web process's database pool whole: what a request's thread took, the pool gets back.

Django gives a pooled connection back when the request ends (`request_finished` closes it). When
that signal never comes, because an exception escaped Django's handler, a streamed body failed
mid-way or a view handed the ORM to a thread of its own, the connection stays checked out of
psycopg's pool, which has no way to know: after DATABASE_POOL_SIZE such requests every request
waits for a connection and answers 503 `database_busy` until the process restarts (issue 29).

Every pooled connection Django opens is noted here with the thread that opened it. Under ASGI a
request's sync code runs on a thread of its own that ends with the request (asgiref's
ThreadSensitiveContext), so a connection still held by a thread that has ended is abandoned:
`reclaim_abandoned()` returns it to the pool (which rolls back whatever it was doing). The web
process calls it at the start of every request (cadre.api.errors.DatabaseBusyMiddleware) and in
/readyz, which reports the pool's figures and what was reclaimed.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from django.db import connections
from django.db.backends.signals import connection_created

logger = logging.getLogger(__name__)


@dataclass
class _Checkout:
    wrapper: object  # Django's DatabaseWrapper of the thread (kept alive to see what it holds)
    connection: object  # the psycopg connection taken from the pool
    thread: threading.Thread
    since: float  # time.monotonic() when it was taken


_lock = threading.Lock()
_checkouts: dict[int, _Checkout] = {}  # id(wrapper) -> its current checkout
_reclaimed_total = 0


def _noted(sender, connection, **kwargs) -> None:
    """`connection_created`: Django took a connection; note the pooled ones and their thread."""
    if connection.vendor != "postgresql" or getattr(connection, "pool", None) is None:
        return
    with _lock:
        _checkouts[id(connection)] = _Checkout(
            wrapper=connection,
            connection=connection.connection,
            thread=threading.current_thread(),
            since=time.monotonic(),
        )


connection_created.connect(_noted, dispatch_uid="cadre.api.database_pool")


def reclaim_abandoned() -> int:
    """Give back to the pool every connection whose thread ended without returning it; forget
    those returned. Returns how many were reclaimed."""
    global _reclaimed_total
    abandoned: list[_Checkout] = []
    with _lock:
        for key, checkout in list(_checkouts.items()):
            held = checkout.wrapper.connection is checkout.connection
            if not held:
                del _checkouts[key]  # Django closed it: back in the pool (or taken anew)
            elif not checkout.thread.is_alive():
                # The thread is gone, so nothing can use its wrapper any more: safe to take.
                del _checkouts[key]
                abandoned.append(checkout)
    for checkout in abandoned:
        _give_back(checkout)
    if abandoned:
        with _lock:
            _reclaimed_total += len(abandoned)
    return len(abandoned)


def _give_back(checkout: _Checkout) -> None:
    connection = checkout.connection
    age = time.monotonic() - checkout.since
    logger.warning(
        "database pool: reclaimed a connection held %.1f s by thread %r, which ended without "
        "returning it",
        age,
        checkout.thread.name,
    )
    checkout.wrapper.connection = None
    pool = getattr(connection, "_pool", None)  # psycopg_pool sets it while a connection is out
    try:
        if pool is not None:
            pool.putconn(connection)  # rolls back an open transaction, replaces a broken one
        else:
            connection.close()
    except Exception:
        logger.exception("database pool: could not return an abandoned connection")


def pool_status(alias: str = "default") -> dict | None:
    """The pool's figures for /readyz, or None when this process does not pool connections.

    `size` connections exist (at most `max`), `available` of them idle, `waiting` requests
    queue for one; `held` are out with the threads that took them, the oldest for
    `oldest_held_seconds`; `reclaimed` were given back since the process started after their
    thread ended without returning them; `exhausted`: none left for the next request."""
    pool = getattr(connections[alias], "pool", None)
    if pool is None:
        return None
    stats = pool.get_stats()
    with _lock:
        held = [c for c in _checkouts.values() if c.wrapper.connection is c.connection]
        oldest = max((time.monotonic() - c.since for c in held), default=0.0)
        reclaimed = _reclaimed_total
    status = {
        "max": stats.get("pool_max", 0),
        "size": stats.get("pool_size", 0),
        "available": stats.get("pool_available", 0),
        "waiting": stats.get("requests_waiting", 0),
        "held": len(held),
        "oldest_held_seconds": round(oldest, 1),
        "reclaimed": reclaimed,
    }
    # Every connection exists and is out: the next request would queue for one.
    status["exhausted"] = status["available"] == 0 and status["size"] >= status["max"]
    return status
