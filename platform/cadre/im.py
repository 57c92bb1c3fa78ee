"""The IM platforms Cadre talks to, by key and label; connectors registers each in ready()."""

from __future__ import annotations

from cadre.ports import Registry

platforms: Registry[str] = Registry("im platforms")


def platform_choices() -> list[tuple[str, str]]:
    """(key, label) of every registered platform, for model and form choices."""
    return platforms.items()
