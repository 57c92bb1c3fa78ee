"""The endpoint presets offered when adding a provider, read from provider_presets.yaml."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

PRESETS_FILE = Path(__file__).resolve().parent / "provider_presets.yaml"


@dataclass(frozen=True)
class ProviderPreset:
    key: str
    label: str
    kind: str
    base_url: str
    model: str
    key_required: bool
    note: str


@cache
def provider_presets() -> dict[str, ProviderPreset]:
    rows = yaml.safe_load(PRESETS_FILE.read_text(encoding="utf-8"))
    return {row["key"]: ProviderPreset(**row) for row in rows}
