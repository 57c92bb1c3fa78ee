"""Models in the console: the organization's model providers (add from a preset — the first
becomes the default —, edit, test the connection, make the default, delete one not in use) and
the embedding model's coverage with a re-embed. Writes go through `cadre.agents.providers` and
`cadre.memory.reembed`."""

from __future__ import annotations

import dataclasses

from django import forms
from django.contrib import messages
from django.shortcuts import redirect, render
from django.urls import path
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, gettext_noop
from django.views.decorators.http import require_POST

from cadre.agents import providers
from cadre.agents.evaluation.recall import latest_recall_check, recall_check_start
from cadre.agents.models import ModelProviderConfig
from cadre.console.forms import add_service_error
from cadre.console.scoping import get_restricted_or_404, restricted
from cadre.console.views.base import posted
from cadre.console.views.base import require_permission as gate
from cadre.errors import CadreError
from cadre.llm import provider_presets
from cadre.memory.activation import activation_held
from cadre.memory.reembed import embedding_activate, embedding_status, reembed_start

# The presets' labels and notes (provider_presets.yaml, in English) as people read them.
PRESET_WORDS = (
    gettext_noop("Qwen (Alibaba Cloud DashScope)"),
    gettext_noop("Moonshot AI (Kimi)"),
    gettext_noop("Zhipu AI (GLM)"),
    gettext_noop("Other OpenAI-compatible endpoint"),
    gettext_noop("Offline (built in)"),
    gettext_noop("API key from platform.openai.com → API keys. Lists its models at /v1/models."),
    gettext_noop(
        "Replace YOUR-RESOURCE with the Azure OpenAI resource's name (the v1 API, no "
        "api-version parameter). The model is the name of your deployment, not of the "
        "base model."
    ),
    gettext_noop(
        "API key from platform.deepseek.com. deepseek-chat (V3) or deepseek-reasoner (R1)."
    ),
    gettext_noop(
        "DashScope's OpenAI-compatible mode, mainland China region. Outside China use "
        "https://dashscope-intl.aliyuncs.com/compatible-mode/v1 with a key from that "
        "region."
    ),
    gettext_noop(
        "API key from platform.moonshot.cn; international accounts use https://api.moonshot.ai/v1."
    ),
    gettext_noop(
        "API key from open.bigmodel.cn; Z.ai accounts outside China use "
        "https://api.z.ai/api/paas/v4."
    ),
    gettext_noop(
        "A local Ollama server (no key). Pull the model first (ollama pull llama3.2); the "
        "address must be reachable from Cadre's workers, not only from your browser."
    ),
    gettext_noop(
        "vllm serve's OpenAI-compatible server. The model is the name it serves (see "
        "--served-model-name); a key only if the server was started with --api-key."
    ),
    gettext_noop(
        "LM Studio's local server (Developer → Start server). The model is the identifier "
        "of a loaded model; no key."
    ),
    gettext_noop(
        "Any server speaking the chat completions API (a gateway such as LiteLLM or OneAPI)."
    ),
    gettext_noop("API key from console.anthropic.com → API keys. Lists its models at /v1/models."),
    gettext_noop(
        "Deterministic answers from the agent's context, no network, every reply "
        "labelled. For trying the platform and for tests; it does not do tasks."
    ),
)


def presets() -> dict:
    """The endpoint presets with their label and note in the reader's language."""
    return {
        key: dataclasses.replace(preset, label=_(preset.label), note=_(preset.note))
        for key, preset in provider_presets().items()
    }


class ProviderForm(forms.Form):
    name = forms.CharField(
        max_length=150,
        label=gettext_lazy("Name"),
        help_text=gettext_lazy("How templates and people see it."),
    )
    base_url = forms.CharField(
        max_length=500,
        required=False,
        label=gettext_lazy("Base URL"),
        help_text=gettext_lazy("The endpoint as the API documents it, usually ending in /v1."),
    )
    api_key = forms.CharField(
        max_length=4000,
        required=False,
        label=gettext_lazy("API key"),
        # Never rendered back: the stored key stays on the server, encrypted.
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
    )
    default_model = forms.CharField(
        max_length=200,
        required=False,
        label=gettext_lazy("Model"),
        help_text=gettext_lazy("Used when a template names none."),
    )
    timeout_seconds = forms.IntegerField(
        min_value=1,
        max_value=600,
        initial=60,
        label=gettext_lazy("Timeout (seconds)"),
        help_text=gettext_lazy(
            "The longest one model call may take, retries included; then the run fails "
            "with the provider's error."
        ),
    )


class PricesForm(forms.Form):
    """The provider's default prices per million tokens; its per-model prices (set by API)
    are kept. Text fields: the service's own check refuses a bad amount."""

    input = forms.CharField(max_length=40, required=False, label=gettext_lazy("Input"))
    output = forms.CharField(max_length=40, required=False, label=gettext_lazy("Output"))
    cached_input = forms.CharField(
        max_length=40, required=False, label=gettext_lazy("Cached input")
    )
    cache_write = forms.CharField(max_length=40, required=False, label=gettext_lazy("Cache write"))


def _embedding_context(request) -> dict:
    """The embeddings card: coverage, and — while the configured model is filled but not
    active — the newest recall check (old model against new) and the switch."""
    status = embedding_status(request.actor.organization)
    pending = status.target if status.target and status.target != status.active else None
    return {
        "embedding": status,
        "can_reembed": request.actor.has("model.manage"),
        "pending_model": pending,
        "switch_ready": pending is not None and status.coverage >= 1.0 and not status.running,
        "held": activation_held(request.actor.organization),
        "recall_check": latest_recall_check(request.actor.organization.pk, pending.pk)
        if pending
        else None,
        "can_check_recall": request.actor.has("template.manage"),
    }


def _provider_or_404(request, pk: int) -> ModelProviderConfig:
    return get_restricted_or_404(request, ModelProviderConfig, "view", pk=pk)


def _page(request, *, report=None, tested=None, status=200):
    configs = restricted(request, ModelProviderConfig, "view").order_by("-is_default", "name", "pk")
    available = presets()
    return render(
        request,
        "console/models/page.html",
        {
            "providers": configs,
            "presets": available.values(),
            "preset_labels": {key: preset.label for key, preset in available.items()},
            "report": report,
            "tested": tested,
            "default_provider": next((c for c in configs if c.is_default and c.is_active), None),
            **_embedding_context(request),
        },
        status=status,
    )


@gate("model.manage")
def models_page(request):
    return _page(request)


@gate("model.manage")
def embeddings_card(request):
    """The embeddings card alone: the page polls it while a re-embed runs."""
    return render(
        request,
        "console/models/_embeddings.html",
        _embedding_context(request),
    )


@gate("model.manage")
def provider_create(request):
    preset = presets().get(request.POST.get("preset") or request.GET.get("preset", ""))
    if preset is None:
        return redirect("console:models")
    initial = {"name": preset.label, "base_url": preset.base_url, "default_model": preset.model}
    form = ProviderForm(posted(request), initial=initial)
    if request.method == "POST" and form.is_valid():
        try:
            config = providers.provider_config_create(
                actor=request.actor, kind=preset.kind, preset=preset.key, **form.cleaned_data
            )
        except CadreError as error:
            add_service_error(form, error)
        else:
            if config.is_default:
                messages.success(
                    request,
                    _(
                        "“%(name)s” was added and is the organization's default: agents whose "
                        "template names no provider answer with it. Test its connection next."
                    )
                    % {"name": config.name},
                )
            else:
                messages.success(
                    request,
                    _("“%(name)s” was added. Test its connection next.") % {"name": config.name},
                )
            return redirect("console:models")
    return render(
        request,
        "console/models/form.html",
        {"form": form, "preset": preset, "config": None},
        status=400 if form.errors else 200,
    )


@gate("model.manage")
def provider_edit(request, pk: int):
    config = _provider_or_404(request, pk)
    preset = presets().get(config.preset)
    initial = {
        name: getattr(config, name) for name in ProviderForm.base_fields if name != "api_key"
    }
    form = ProviderForm(posted(request), initial=initial)
    if request.method == "POST" and form.is_valid():
        data = dict(form.cleaned_data)
        api_key = data.pop("api_key")
        try:
            providers.provider_config_update(
                actor=request.actor, config=config, api_key=api_key or None, **data
            )
        except CadreError as error:
            add_service_error(form, error)
        else:
            messages.success(request, _("“%(name)s” was saved.") % {"name": data["name"]})
            return redirect("console:models")
    return render(
        request,
        "console/models/form.html",
        {"form": form, "preset": preset, "config": config, "prices": _prices_form(config)},
        status=400 if form.errors else 200,
    )


def _prices_form(config, data=None) -> PricesForm:
    initial = {key: config.prices.get(key, "") for key in PricesForm.base_fields}
    return PricesForm(data, initial=initial, prefix="prices")


@gate("model.manage")
@require_POST
def provider_prices(request, pk: int):
    config = _provider_or_404(request, pk)
    form = _prices_form(config, request.POST)
    if form.is_valid():
        prices = {key: value for key, value in form.cleaned_data.items() if value.strip()}
        if config.prices.get("models"):
            prices["models"] = config.prices["models"]
        try:
            providers.provider_config_prices_set(actor=request.actor, config=config, prices=prices)
        except CadreError as error:
            add_service_error(form, error)
        else:
            messages.success(request, _("Prices of “%(name)s” were saved.") % {"name": config.name})
            return redirect("console:provider_edit", pk=config.pk)
    preset = presets().get(config.preset)
    initial = {
        name: getattr(config, name) for name in ProviderForm.base_fields if name != "api_key"
    }
    return render(
        request,
        "console/models/form.html",
        {
            "form": ProviderForm(initial=initial),
            "preset": preset,
            "config": config,
            "prices": form,
        },
        status=400,
    )


@gate("model.manage")
@require_POST
def provider_test(request, pk: int):
    config = _provider_or_404(request, pk)
    report = providers.provider_config_test(actor=request.actor, config=config)
    return _page(request, report=report, tested=config)


@gate("model.manage")
@require_POST
def provider_default(request, pk: int):
    config = _provider_or_404(request, pk)
    try:
        providers.provider_config_set_default(actor=request.actor, config=config)
    except CadreError as error:
        messages.error(request, error.message)
    else:
        messages.success(
            request,
            _(
                "“%(name)s” is the organization's default: templates that name no provider "
                "use it from their next run."
            )
            % {"name": config.name},
        )
    return redirect("console:models")


@gate("model.manage")
@require_POST
def provider_delete(request, pk: int):
    config = _provider_or_404(request, pk)
    try:
        providers.provider_config_delete(actor=request.actor, config=config)
    except CadreError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, _("“%(name)s” was deleted.") % {"name": config.name})
    return redirect("console:models")


@gate("model.manage")
@require_POST
def embeddings_reembed(request):
    try:
        task = reembed_start(actor=request.actor)
    except CadreError as error:
        messages.error(request, error.message)
    else:
        messages.success(
            request,
            _("Re-embedding under %(model)s has started.") % {"model": task.params["model_id"]},
        )
    return redirect("console:models")


@gate("model.manage")
@require_POST
def embeddings_activate(request):
    """Switch the organization's search to the filled model; a failing evaluation gate needs
    a reason."""
    model_id = request.POST.get("model", "")
    try:
        use = embedding_activate(
            actor=request.actor, model_id=model_id, override_gate=request.POST.get("override", "")
        )
    except CadreError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, _("Memory search now uses %(model)s.") % {"model": use.model_id})
    return redirect("console:models")


@gate("template.manage")
@require_POST
def embeddings_recall_check(request):
    """Replay the retrieval suite with the filled model as the candidate (recall@10)."""
    status = embedding_status(request.actor.organization)
    if status.target is None or status.target == status.active:
        messages.error(request, _("There is no new embedding model to check."))
        return redirect("console:models")
    try:
        run = recall_check_start(actor=request.actor, model=status.target)
    except CadreError as error:
        messages.error(request, error.message)
        return redirect("console:models")
    if run is None:
        messages.error(request, _("No rated turn to build the retrieval suite from yet."))
    else:
        messages.success(request, _("The recall check is queued."))
    return redirect("console:models")


urlpatterns = [
    path("models/", models_page, name="models"),
    path("models/providers/new/", provider_create, name="provider_create"),
    path("models/providers/<int:pk>/edit/", provider_edit, name="provider_edit"),
    path("models/providers/<int:pk>/prices/", provider_prices, name="provider_prices"),
    path("models/providers/<int:pk>/test/", provider_test, name="provider_test"),
    path("models/providers/<int:pk>/default/", provider_default, name="provider_default"),
    path("models/providers/<int:pk>/delete/", provider_delete, name="provider_delete"),
    path("models/embeddings/", embeddings_card, name="embeddings"),
    path("models/embeddings/reembed/", embeddings_reembed, name="embeddings_reembed"),
    path("models/embeddings/activate/", embeddings_activate, name="embeddings_activate"),
    path("models/embeddings/recall/", embeddings_recall_check, name="embeddings_recall_check"),
]
