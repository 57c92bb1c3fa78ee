"""The organization's first model provider, from the environment on first start."""

from __future__ import annotations

from dataclasses import dataclass

from django.core.exceptions import ImproperlyConfigured

from cadre.agents import providers
from cadre.agents.models import ModelProviderConfig
from cadre.env import env_secret, env_str, env_url
from cadre.tenancy.actors import Actor

OPENAI_URL = "https://api.openai.com/v1"
ANTHROPIC_URL = "https://api.anthropic.com"
OPENAI_MODEL = "gpt-4o-mini"
ANTHROPIC_MODEL = "claude-haiku-4-5"


@dataclass(frozen=True)
class ProviderSettings:
    name: str
    kind: str
    base_url: str
    api_key: str
    model: str
    source: str  # the variable it came from, for the start-up message


def provider_from_env() -> ProviderSettings | None:
    """CADRE_MODEL_BASE_URL (+ CADRE_MODEL_API_KEY, CADRE_MODEL_NAME) names any
    OpenAI-compatible endpoint; else OPENAI_API_KEY, else ANTHROPIC_API_KEY; None when unset."""
    base_url = env_url("CADRE_MODEL_BASE_URL", schemes=("http", "https"))
    api_key = env_secret("CADRE_MODEL_API_KEY")
    model = env_str("CADRE_MODEL_NAME")
    if base_url:
        if not model:
            raise ImproperlyConfigured(
                "CADRE_MODEL_NAME: set the model to use at CADRE_MODEL_BASE_URL"
            )
        return ProviderSettings(
            "Default model", "openai_compatible", base_url.rstrip("/"), api_key or "", model,
            "CADRE_MODEL_BASE_URL",
        )  # fmt: skip
    if api_key:
        raise ImproperlyConfigured(
            "CADRE_MODEL_API_KEY: set CADRE_MODEL_BASE_URL too (or use OPENAI_API_KEY / "
            "ANTHROPIC_API_KEY for those providers)"
        )
    if openai_key := env_secret("OPENAI_API_KEY"):
        return ProviderSettings(
            "OpenAI", "openai_compatible", OPENAI_URL, openai_key, model or OPENAI_MODEL,
            "OPENAI_API_KEY",
        )  # fmt: skip
    if anthropic_key := env_secret("ANTHROPIC_API_KEY"):
        return ProviderSettings(
            "Anthropic", "anthropic", ANTHROPIC_URL, anthropic_key, model or ANTHROPIC_MODEL,
            "ANTHROPIC_API_KEY",
        )  # fmt: skip
    return None


def default_provider_create(
    *, actor: Actor, chosen: ProviderSettings | None
) -> ModelProviderConfig | None:
    """The provider the environment names, created through the agents service (its key is
    encrypted like every provider's) and made the organization's default; an existing one of
    that name is kept as it is."""
    if chosen is None:
        return None
    existing = ModelProviderConfig.objects.filter(
        organization=actor.organization, name=chosen.name
    ).first()
    if existing is not None:
        return existing
    config = providers.provider_config_create(
        actor=actor,
        name=chosen.name,
        kind=chosen.kind,
        base_url=chosen.base_url,
        api_key=chosen.api_key,
        default_model=chosen.model,
    )
    return providers.provider_config_set_default(actor=actor, config=config)
