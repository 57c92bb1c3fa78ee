"""Ports of the compatible memory APIs, filled by higher layers in their AppConfig.ready().

SKILL_RECALL: MemOS's `include_skill` answers skills from the Hub, which sits above memory.
An entry is called as ``entry(actor, query, limit=…, base_url=…)`` and returns MemOS
`skill_detail_list` items (verified versions the actor may read). Nothing registered: no skills.
"""

from __future__ import annotations

from collections.abc import Callable

from cadre.ports import Registry

SKILL_RECALL: Registry[Callable[..., list[dict]]] = Registry("memos skill recall")
