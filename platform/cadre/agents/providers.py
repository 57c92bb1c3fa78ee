"""Model providers of an organization: add, change, make the default, test; and which one
serves a template version (its own, else the organization's default, else its `provider`)."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.db import IntegrityError, transaction
from django.utils import timezone

from cadre import outbound
from cadre.agents.models import ModelProviderConfig
from cadre.errors import Conflict, InvalidInput
from cadre.governance import audit
from cadre.llm import (
    ConnectionReport,
    connection_test,
    prices_clean,
    provider_for,
    provider_presets,
)
from cadre.tenancy.actors import Actor

PROVIDER_KINDS = tuple(ModelProviderConfig.Kind.values)
# A connection test runs inside a web request: it waits at most this long for the endpoint.
TEST_TIMEOUT_SECONDS = 15
_URL = URLValidator(schemes=("http", "https"))
BASE_URL_REFUSED = "base_url_refused"
_EDITABLE = ("name", "base_url", "default_model", "timeout_seconds", "parameters", "prices")


def _clean(*, kind: str, base_url: str, timeout_seconds: int, preset: str) -> str:
    if kind not in PROVIDER_KINDS:
        raise InvalidInput(f"kind must be one of {', '.join(PROVIDER_KINDS)}.", code="invalid_kind")
    if preset and preset not in provider_presets():
        raise InvalidInput(f"Unknown preset {preset!r}.", code="invalid_preset")
    base_url = (base_url or "").strip().rstrip("/")
    if base_url:
        try:
            _URL(base_url)
        except ValidationError:
            raise InvalidInput(
                "The base URL must be an http(s) address.", code="invalid_base_url"
            ) from None
        # Public addresses only, unless the instance allows the host (a self-hosted model);
        # every request checks again, in its connection.
        outbound.check_url(
            base_url,
            allow_setting=outbound.MODEL_PROVIDERS,
            code=BASE_URL_REFUSED,
            field="base_url",
        )
    elif kind == ModelProviderConfig.Kind.OPENAI_COMPATIBLE and preset not in ("", "openai"):
        raise InvalidInput("This endpoint needs a base URL.", code="invalid_base_url")
    if not 1 <= int(timeout_seconds) <= 600:
        raise InvalidInput("The timeout must be between 1 and 600 seconds.", code="invalid")
    return base_url


def _described(config: ModelProviderConfig) -> dict:
    # What the audit trail keeps: never the key, only whether one is set.
    return {
        "name": config.name,
        "kind": config.kind,
        "base_url": config.base_url,
        "default_model": config.default_model,
        "timeout_seconds": config.timeout_seconds,
        "api_key_set": bool(config.api_key),
        "is_default": config.is_default,
    }


@transaction.atomic
def provider_config_create(
    *,
    actor: Actor,
    name: str,
    kind: str,
    base_url: str = "",
    api_key: str = "",
    default_model: str = "",
    parameters: dict | None = None,
    prices: dict | None = None,
    timeout_seconds: int = 60,
    preset: str = "",
) -> ModelProviderConfig:
    actor.require("model.manage")
    base_url = _clean(kind=kind, base_url=base_url, timeout_seconds=timeout_seconds, preset=preset)
    prices = _prices(prices)
    config = ModelProviderConfig(
        organization=actor.organization,
        name=name.strip(),
        kind=kind,
        base_url=base_url,
        api_key=api_key.strip(),
        default_model=default_model.strip(),
        parameters=parameters or {},
        prices=prices or {},
        timeout_seconds=timeout_seconds,
        preset=preset,
    )
    try:
        with transaction.atomic():
            config.save()
    except IntegrityError:
        raise Conflict("A provider with this name already exists.", code="duplicate") from None
    audit.record(actor=actor, action="provider.create", target=config, after=_described(config))
    return config


@transaction.atomic
def provider_config_update(
    *, actor: Actor, config: ModelProviderConfig, api_key: str | None = None, **changes
) -> ModelProviderConfig:
    """Change a provider. `api_key=None` keeps the stored key; a new key replaces it (the
    stored one is never shown, so it is never sent back to be kept)."""
    actor.require("model.manage")
    unknown = set(changes) - set(_EDITABLE)
    if unknown:
        raise InvalidInput(f"Cannot change {', '.join(sorted(unknown))}.")
    config = ModelProviderConfig.objects.select_for_update().get(
        pk=config.pk, organization=actor.organization
    )
    before = _described(config)
    if "prices" in changes:
        changes["prices"] = _prices(changes["prices"])
    merged = {name: changes.get(name, getattr(config, name)) for name in _EDITABLE}
    merged["base_url"] = _clean(
        kind=config.kind,
        base_url=merged["base_url"],
        timeout_seconds=merged["timeout_seconds"],
        preset=config.preset,
    )
    for name, value in merged.items():
        setattr(config, name, value.strip() if isinstance(value, str) else value)
    if api_key is not None and api_key.strip():
        config.api_key = api_key.strip()
    config.updated_at = timezone.now()
    try:
        with transaction.atomic():
            config.save()
    except IntegrityError:
        raise Conflict("A provider with this name already exists.", code="duplicate") from None
    audit.record(
        actor=actor,
        action="provider.update",
        target=config,
        before=before,
        after={**_described(config), "api_key_replaced": bool(api_key and api_key.strip())},
    )
    return config


@transaction.atomic
def provider_config_set_default(
    *, actor: Actor, config: ModelProviderConfig | None
) -> ModelProviderConfig | None:
    """Make `config` the organization's default provider (None: no default, so versions
    without a provider of their own use the kind they name, offline unless told otherwise)."""
    actor.require("model.manage")
    current = (
        ModelProviderConfig.objects.select_for_update()
        .filter(organization=actor.organization, is_default=True)
        .first()
    )
    if config is not None:
        config = ModelProviderConfig.objects.select_for_update().get(
            pk=config.pk, organization=actor.organization
        )
        if not config.is_active:
            raise InvalidInput("An inactive provider cannot be the default.", code="inactive")
    if current == config:
        return config
    if current is not None:
        current.is_default = False
        current.save(update_fields=["is_default"])
    if config is not None:
        config.is_default = True
        config.save(update_fields=["is_default"])
    audit.record(
        actor=actor,
        action="provider.set_default",
        target=config or current,
        before={"default": current.name if current else None},
        after={"default": config.name if config else None},
    )
    return config


def provider_config_test(*, actor: Actor, config: ModelProviderConfig, model: str = "") -> dict:
    """One tiny request to the endpoint (see cadre.llm.probe): its status, latency and model
    list, never what it wrote. The models it lists are kept for the template editor to offer;
    the test itself is audited (who tried, what came back)."""
    actor.require("model.manage")
    settings = {"model": model.strip()} if model.strip() else {}
    provider = provider_for(settings, config)
    provider.timeout = min(float(config.timeout_seconds), TEST_TIMEOUT_SECONDS)
    # Outside any transaction: the request may take seconds and holds no lock meanwhile.
    report: ConnectionReport = connection_test(provider)
    with transaction.atomic():
        fields = {"tested_at": timezone.now()}
        if report.models is not None:
            fields["known_models"] = report.models[:500]
        ModelProviderConfig.objects.filter(pk=config.pk).update(**fields)
        for name, value in fields.items():
            setattr(config, name, value)
        audit.record(
            actor=actor,
            action="provider.test",
            target=config,
            after={
                "ok": report.ok,
                "latency_ms": report.latency_ms,
                "reason": report.reason,
                "status": report.status,
                "error": report.error[:500],
            },
        )
    return report.as_dict()


# --- which provider serves a version ---------------------------------------------------


def organization_default(organization_id: int) -> ModelProviderConfig | None:
    return ModelProviderConfig.objects.filter(
        organization_id=organization_id, is_default=True, is_active=True
    ).first()


class ProviderUnavailable(Exception):
    """The version names a provider configuration that is gone or inactive."""


def resolve(model_settings: dict, organization_id: int):
    """(configuration or None, the model settings to use with it) for a version. A version
    naming a configuration uses it; one naming none uses the organization's default — with the
    version's own model only when it names the default's kind (a preset's "offline-1" is no
    model of the default endpoint's)."""
    settings = dict(model_settings or {})
    config_id = settings.get("provider_config")
    if config_id:
        config = ModelProviderConfig.objects.filter(
            pk=config_id, organization_id=organization_id, is_active=True
        ).first()
        if config is None:
            raise ProviderUnavailable(config_id)
        return config, settings
    config = organization_default(organization_id)
    if config is not None and settings.get("provider", "offline") != config.kind:
        settings.pop("model", None)
    return config, settings


def _prices(prices) -> dict:
    try:
        return prices_clean(prices)
    except ValueError as error:
        raise InvalidInput(str(error), details={"prices": [str(error)]}) from None


@transaction.atomic
def provider_config_prices_set(
    *, actor: Actor, config: ModelProviderConfig, prices: dict
) -> ModelProviderConfig:
    """Set a provider's prices per million tokens: defaults ("input", "output",
    "cached_input") and per model ("models": {"<model>": {...}}). Calls are priced as they
    settle; earlier calls keep their cost."""
    actor.require("model.manage")
    config = ModelProviderConfig.objects.select_for_update().get(
        pk=config.pk, organization=actor.organization
    )
    before = {"prices": config.prices}
    config.prices = _prices(prices)
    config.save(update_fields=["prices"])
    audit.record(
        actor=actor,
        action="provider.prices_set",
        target=config,
        before=before,
        after={"prices": config.prices},
    )
    return config
