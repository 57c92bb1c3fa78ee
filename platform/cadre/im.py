"""The IM platforms this installation talks to, by key, with their display names.

E.g. "feishu" → "Feishu / Lark". The connectors fill it in their `ready()` from their platform
registry; lower layers (tenancy, governance, agents, the console) read it here instead of
keeping their own list.
"""

from __future__ import annotations

from cadre.ports import Registry

platforms: Registry[str] = Registry("im platforms")


def platform_choices() -> list[tuple[str, str]]:
    """(key, label) of every registered platform, for form and model choices."""
    return platforms.items()
