"""The ports lower layers use to reach code that higher layers register."""

from __future__ import annotations

import pytest

from cadre.ports import Listeners, Registry


def test_registry_returns_what_was_registered_and_refuses_a_second_entry_under_one_name():
    channels = Registry("channels")
    first = object()
    channels.register("slack", first)
    channels.register("slack", first)  # the same entry again: a no-op (ready() may run twice)
    assert channels.get("slack") is first
    assert "slack" in channels and channels.keys() == ["slack"]
    with pytest.raises(ValueError, match="already registered"):
        channels.register("slack", object())
    assert channels.get("feishu") is None


def test_registry_override_holds_only_the_given_entries_and_restores_after():
    channels = Registry("channels")
    channels.register("slack", 1)
    with channels.overridden() as empty:
        assert len(empty) == 0 and channels.get("slack") is None
    with channels.overridden({"feishu": 2}):
        assert channels.keys() == ["feishu"]
    assert channels.items() == [("slack", 1)]


def test_listeners_are_told_in_order_once_each():
    told = []
    listeners = Listeners("decided")

    def first(value):
        told.append(("first", value))
        return 1

    def second(value):
        told.append(("second", value))
        return 2

    listeners.register(first)
    listeners.register(second)
    listeners.register(first)
    assert listeners.notify("x") == [1, 2]
    assert told == [("first", "x"), ("second", "x")]
    with listeners.overridden():
        assert listeners.notify("y") == []
    assert len(listeners) == 2
