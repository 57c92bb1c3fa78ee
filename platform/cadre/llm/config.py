"""Provider configurations read from the environment, for code that has no ModelProviderConfig
row (memory's model): `<PREFIX>_KIND`, `_BASE_URL`, `_MODEL`, `_API_KEY` (or `_API_KEY_FILE`),
`_TIMEOUT`."""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from cadre.env import env_int, env_secret, env_str, env_url
from cadre.llm.base import PROVIDERS, ProviderConfig


def provider_config_from_env(prefix: str, *, default_timeout: int = 60) -> ProviderConfig | None:
    """The configuration under `prefix`, or None when `<prefix>_KIND` is unset."""
    kind = env_str(f"{prefix}_KIND", "")
    if not kind:
        return None
    if kind not in PROVIDERS:
        raise ImproperlyConfigured(
            f"{prefix}_KIND: expected one of {', '.join(PROVIDERS.keys())}, got {kind!r}"
        )
    return ProviderConfig(
        kind=kind,
        base_url=(env_url(f"{prefix}_BASE_URL", schemes=("http", "https")) or "").rstrip("/"),
        api_key=env_secret(f"{prefix}_API_KEY") or "",
        default_model=env_str(f"{prefix}_MODEL", ""),
        timeout_seconds=env_int(f"{prefix}_TIMEOUT", default_timeout, minimum=1),
    )
