"""Ports: small registries through which a lower layer reaches code that a higher layer registers.

A lower app (governance, agents) never imports a higher one (hub, connectors). Where it must
reach up (deliver a reply, send a card, notify over IM), it owns a port, and the higher app
fills it in its ``AppConfig.ready()``. An empty port is a valid state: nothing is registered,
so nothing is called.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """Entries by name (one delivery channel per IM platform, one check per subsystem)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._entries: dict[str, T] = {}

    def register(self, key: str, entry: T) -> T:
        """Register ``entry`` under ``key``; registering the same entry again is a no-op."""
        current = self._entries.get(key)
        if current is not None and current is not entry:
            raise ValueError(f"{self.name}: {key!r} is already registered")
        self._entries[key] = entry
        return entry

    def get(self, key: str) -> T | None:
        return self._entries.get(key)

    def keys(self) -> list[str]:
        return list(self._entries)

    def items(self) -> list[tuple[str, T]]:
        return list(self._entries.items())

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._entries))

    def __len__(self) -> int:
        return len(self._entries)

    @contextmanager
    def overridden(self, entries: dict[str, T] | None = None) -> Iterator[Registry[T]]:
        """For tests: the registry holds only ``entries`` (none by default) inside the block."""
        saved = self._entries
        self._entries = dict(entries or {})
        try:
            yield self
        finally:
            self._entries = saved

    def __repr__(self) -> str:
        return f"<Registry {self.name}: {', '.join(self._entries) or 'empty'}>"


F = TypeVar("F", bound=Callable[..., Any])


class Listeners(Generic[F]):
    """Callbacks told of an event, in the order they were registered."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._listeners: list[F] = []

    def register(self, listener: F) -> F:
        """Add ``listener`` (usable as a decorator); registering it twice keeps one."""
        if listener not in self._listeners:
            self._listeners.append(listener)
        return listener

    def notify(self, *args: Any, **kwargs: Any) -> list[Any]:
        """Call every listener with the same arguments; returns their results in order."""
        return [listener(*args, **kwargs) for listener in list(self._listeners)]

    def __iter__(self) -> Iterator[F]:
        return iter(list(self._listeners))

    def __len__(self) -> int:
        return len(self._listeners)

    @contextmanager
    def overridden(self, listeners: list[F] | None = None) -> Iterator[Listeners[F]]:
        """For tests: only ``listeners`` (none by default) are told inside the block."""
        saved = self._listeners
        self._listeners = list(listeners or [])
        try:
            yield self
        finally:
            self._listeners = saved

    def __repr__(self) -> str:
        return f"<Listeners {self.name}: {len(self._listeners)}>"
