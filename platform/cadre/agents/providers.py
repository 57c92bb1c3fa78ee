"""Model providers of an organization: add (the first becomes the default), change, make the
default, test, delete (refused while in use); and which one serves a template version (its own,
else the organization's default, else its `provider`). A change that would move published
templates to another model passes the model-change gate."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from cadre import outbound
from cadre.agents.evaluation.gates import check_provider_change
from cadre.agents.evaluation.models import EvalSuite
from cadre.agents.models import Agent, AgentTemplate, ModelProviderConfig, TemplateVersion
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
        raise InvalidInput(
            _("kind must be one of %(value)s.") % {"value": ", ".join(PROVIDER_KINDS)},
            code="invalid_kind",
        )
    if preset and preset not in provider_presets():
        raise InvalidInput(
            _("Unknown preset %(preset)r.") % {"preset": preset}, code="invalid_preset"
        )
    base_url = (base_url or "").strip().rstrip("/")
    if base_url:
        try:
            _URL(base_url)
        except ValidationError:
            raise InvalidInput(
                _("The base URL must be an http(s) address."), code="invalid_base_url"
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
        raise InvalidInput(_("This endpoint needs a base URL."), code="invalid_base_url")
    if not 1 <= int(timeout_seconds) <= 600:
        raise InvalidInput(_("The timeout must be between 1 and 600 seconds."), code="invalid")
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
    parameters = _parameters(parameters)
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
        raise Conflict(_("A provider with this name already exists."), code="duplicate") from None
    audit.record(actor=actor, action="provider.create", target=config, after=_described(config))
    first = not (
        ModelProviderConfig.objects.filter(organization=actor.organization)
        .exclude(pk=config.pk)
        .exists()
    )
    if first:
        # The organization's first provider serves its agents at once: left aside, chat would
        # keep answering "no language model is configured". The model-change gate still
        # decides; when it refuses, the provider is kept and the default stays unset.
        try:
            with transaction.atomic():
                _default_set(actor=actor, config=config, current=None, reason="first provider")
        except (Conflict, IntegrityError):  # gated, or another provider became the default
            pass
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
        raise InvalidInput(_("Cannot change %(value)s.") % {"value": ", ".join(sorted(unknown))})
    config = ModelProviderConfig.objects.select_for_update().get(
        pk=config.pk, organization=actor.organization
    )
    before = _described(config)
    if "parameters" in changes:
        changes["parameters"] = _parameters(changes["parameters"])
    if "prices" in changes:
        changes["prices"] = _prices(changes["prices"])
    merged = {name: changes.get(name, getattr(config, name)) for name in _EDITABLE}
    merged["base_url"] = _clean(
        kind=config.kind,
        base_url=merged["base_url"],
        timeout_seconds=merged["timeout_seconds"],
        preset=config.preset,
    )
    moved = [
        label
        for label, field in (("model", "default_model"), ("base URL", "base_url"))
        if (merged[field] or "").strip() != getattr(config, field)
    ]
    if moved:
        check_provider_change(
            organization=actor.organization,
            templates=templates_calling(
                organization_id=config.organization_id,
                config=config,
                default_model_only="base URL" not in moved,
            ),
            change=(
                _("Changing the model and base URL of “%(name)s”")
                if len(moved) == 2
                else _("Changing the model of “%(name)s”")
                if moved == ["model"]
                else _("Changing the base URL of “%(name)s”")
            )
            % {"name": config.name},
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
        raise Conflict(_("A provider with this name already exists."), code="duplicate") from None
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
            raise InvalidInput(_("An inactive provider cannot be the default."), code="inactive")
    if current == config:
        return config
    _default_set(actor=actor, config=config, current=current)
    return config


def _default_set(
    *,
    actor: Actor,
    config: ModelProviderConfig | None,
    current: ModelProviderConfig | None,
    reason: str = "",
) -> None:
    serving = current if current is not None and current.is_active else None
    if serving != config:
        check_provider_change(
            organization=actor.organization,
            templates=templates_calling(organization_id=actor.organization.pk, config=None),
            change=(
                _("Making “%(name)s” the organization's default provider") % {"name": config.name}
                if config is not None
                else _("Leaving the organization without a default provider")
            ),
        )
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
        reason=reason,
    )


def provider_uses(config: ModelProviderConfig) -> dict:
    """What would break if `config` went away: whether it is the organization's default, the
    template versions naming it (any status: a draft would be published naming it), the active
    agents running those versions, the evaluation suites judging with it and whether the
    skills drafting model is it. Empty lists and False: nothing uses it."""
    named = Q(model_settings__provider_config=config.pk) | Q(
        model_settings__provider_config=str(config.pk)
    )
    versions = list(
        TemplateVersion.objects.filter(named, organization_id=config.organization_id)
        .select_related("template")
        .order_by("template__name", "number")
    )
    agents = Agent.objects.filter(
        organization_id=config.organization_id,
        version__in=[version.pk for version in versions],
        status=Agent.Status.ACTIVE,
    ).count()
    suites = list(
        EvalSuite.objects.filter(
            Q(judge__provider_config=config.pk) | Q(judge__provider_config=str(config.pk)),
            organization_id=config.organization_id,
        ).values_list("name", flat=True)
    )
    skills = (config.organization.settings or {}).get("skills") or {}
    return {
        "default": config.is_default,
        "templates": list(
            {
                v.template_id: {"id": v.template_id, "name": v.template.name} for v in versions
            }.values()
        ),
        "versions": [
            {
                "id": version.pk,
                "template": version.template.name,
                "number": version.number,
                "status": version.status,
            }
            for version in versions
        ],
        "agents": agents,
        "evaluation_suites": suites,
        "skills_model": str(skills.get("provider_config") or "") == str(config.pk),
    }


def _uses_sentence(uses: dict) -> str:
    parts = []
    if uses["default"]:
        parts.append(
            _("it is the organization's default (make another provider the default first)")
        )
    if uses["versions"]:
        named = ", ".join(
            f"{v['template']} v{v['number']} ({TemplateVersion.Status(v['status']).label.lower()})"
            for v in uses["versions"][:10]
        )
        more = len(uses["versions"]) - 10
        parts.append(
            _("template versions name it: %(named)s and %(more)s more")
            % {"named": named, "more": more}
            if more > 0
            else _("template versions name it: %(named)s") % {"named": named}
        )
    if uses["agents"]:
        parts.append(
            ngettext(
                "%(count)s active agent run on it",
                "%(count)s active agents run on it",
                uses["agents"],
            )
            % {"count": uses["agents"]}
        )
    if uses["evaluation_suites"]:
        parts.append(
            _("evaluation suites judge with it: %(suites)s")
            % {"suites": ", ".join(uses["evaluation_suites"])}
        )
    if uses["skills_model"]:
        parts.append(_("the organization drafts skills with it"))
    return "; ".join(parts)


@transaction.atomic
def provider_config_delete(*, actor: Actor, config: ModelProviderConfig) -> None:
    """Delete a provider no one uses; refused (409 `provider_in_use`, saying by what, nothing
    deleted) while it is the default or templates, agents, evaluation suites or skills drafting
    use it. Calls already made keep their records (steps and usage name no provider row)."""
    actor.require("model.manage")
    config = ModelProviderConfig.objects.select_for_update().get(
        pk=config.pk, organization=actor.organization
    )
    uses = provider_uses(config)
    if (
        uses["default"]
        or uses["versions"]
        or uses["agents"]
        or uses["evaluation_suites"]
        or uses["skills_model"]
    ):
        raise Conflict(
            _("“%(name)s” cannot be deleted while it is in use: %(uses_sentence)s.")
            % {"name": config.name, "uses_sentence": _uses_sentence(uses)},
            code="provider_in_use",
            details=uses,
        )
    audit.record(actor=actor, action="provider.delete", target=config, before=_described(config))
    config.delete()


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


def templates_calling(
    *,
    organization_id: int,
    config: ModelProviderConfig | None,
    default_model_only: bool = False,
) -> list[AgentTemplate]:
    """The templates whose published versions call `config` (as `resolve` decides): naming
    it, or naming no provider while it is the organization's active default; with
    `default_model_only`, only those whose calls take its default model (no model of their own
    for it). `config=None`: the templates whose versions name no provider (the default, or its
    absence, decides their model)."""
    is_default = config is None or (config.is_default and config.is_active)
    versions = TemplateVersion.objects.filter(
        organization_id=organization_id, status=TemplateVersion.Status.PUBLISHED
    )
    found: dict[int, AgentTemplate] = {}
    for version in versions.select_related("template").order_by("template__name", "pk"):
        settings = version.model_settings or {}
        named = settings.get("provider_config")
        if named:
            if config is None or str(named) != str(config.pk):
                continue
            model = settings.get("model")
        elif is_default:
            same_kind = config is not None and settings.get("provider", "offline") == config.kind
            model = settings.get("model") if same_kind else None
        else:
            continue
        if not (default_model_only and model):
            found.setdefault(version.template_id, version.template)
    return list(found.values())


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


def _parameters(parameters) -> dict:
    # Every model call spreads them into its request ({**parameters, ...}): a list or a string
    # stored here would fail each run of the organization, and its connection test.
    if parameters is None:
        return {}
    if not isinstance(parameters, dict):
        message = _("parameters must be an object.")
        raise InvalidInput(message, details={"parameters": [message]})
    return parameters


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
