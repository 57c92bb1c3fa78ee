"""Policies: the policy chain editor (the organization's chain and each template's additions)
and the masking test bench. Every change goes through `policy_chain_set` (validated, versioned,
audited); the bench through `masking_preview` (nothing stored, nothing logged)."""

from __future__ import annotations

import json

import jsonschema
from django.contrib import messages
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.cache import never_cache
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_POST

from cadre.agents.models import AgentTemplate, TemplateVersion
from cadre.agents.template_policy import (
    template_policy_chain,
    template_policy_chain_set,
    template_resolved_chain,
)
from cadre.console.forms import add_service_error
from cadre.console.scoping import get_restricted_or_404, in_organization_of, restricted_for
from cadre.console.views.base import denied, require_permission
from cadre.console.views.governance_forms import MaskingBenchForm, MaskingRuleForm
from cadre.errors import CadreError
from cadre.governance.masking import services as masking_services
from cadre.governance.masking.policy import MaskingPolicy
from cadre.governance.masking.services import PREVIEW_PERMISSIONS, masking_preview
from cadre.governance.models import MaskingRule, PolicyChain
from cadre.governance.policy import STAGES, all_plugins, get
from cadre.governance.policy.chain import DEFAULT_PLUGINS
from cadre.governance.policy.services import policy_chain_set

OPERATIONS = ("add", "save", "toggle", "up", "down", "remove")
# Where an entry of the chain an agent runs comes from (the effective chain's "From").
SOURCE_LABELS = {
    "organization": gettext_lazy("organization"),
    "default": gettext_lazy("default"),
    "template": gettext_lazy("template"),
}


def _templates(actor):
    return in_organization_of(actor, AgentTemplate).filter(is_archived=False)


def _template_or_404(actor, raw):
    """The organization's template named by ?template= / the form (None: the organization)."""
    if raw in (None, ""):
        return None
    if not str(raw).isdigit():
        raise Http404(_("No such template."))
    return get_object_or_404(in_organization_of(actor, AgentTemplate), pk=int(raw))


def _stored_chain(actor, template) -> PolicyChain | None:
    if template is not None:
        return template_policy_chain(template)
    chains = restricted_for(actor, PolicyChain, "manage")
    return chains.filter(scope=PolicyChain.Scope.ORGANIZATION).first()


def _current_plugins(chain: PolicyChain | None, template) -> list[dict]:
    if chain is not None:
        return [dict(entry) for entry in chain.plugins]
    # Without a stored chain the organization runs the default one; a template adds nothing.
    return [dict(entry) for entry in DEFAULT_PLUGINS] if template is None else []


def _starter_config(plugin) -> dict:
    """The smallest configuration the plugin's schema accepts (required lists empty)."""
    schema = plugin.config_schema or {}
    properties = schema.get("properties", {})
    return {
        key: [] if properties.get(key, {}).get("type") == "array" else {}
        for key in schema.get("required", [])
    }


def _config_problem(plugin, config: dict) -> str | None:
    """The schema errors (up to three) with where each is: `limits.0.limit: 0 is less …`."""
    validator = jsonschema.validators.validator_for(plugin.config_schema)(plugin.config_schema)
    errors = sorted(validator.iter_errors(config), key=lambda error: list(error.absolute_path))
    if not errors:
        return None
    problems = []
    for error in errors[:3]:
        where = ".".join(str(part) for part in error.absolute_path)
        problems.append(f"{where}: {error.message}" if where else error.message)
    return "; ".join(problems)


def _entries(plugins: list[dict], errors: dict, drafts: dict) -> list[dict]:
    rows = []
    for index, entry in enumerate(plugins):
        plugin = get(entry.get("plugin", ""))
        rows.append(
            {
                "index": index,
                "name": entry.get("plugin", ""),
                "enabled": entry.get("enabled", True),
                "config": entry.get("config") or {},
                "config_text": drafts.get(
                    index, json.dumps(entry.get("config") or {}, indent=2, ensure_ascii=False)
                ),
                "plugin": plugin,
                "schema": json.dumps(plugin.config_schema, indent=2) if plugin else "",
                "error": errors.get(index),
                "first": index == 0,
                "last": index == len(plugins) - 1,
            }
        )
    return rows


def _effective(actor, template) -> list[dict]:
    """What a template's agents (or, without one, every agent) run, entry by entry."""
    resolved = template_resolved_chain(actor.organization, template)
    organization_chain = _stored_chain(actor, None)
    own = len(organization_chain.plugins) if organization_chain else len(DEFAULT_PLUGINS)
    source = "organization" if organization_chain else "default"
    rows = []
    for index, entry in enumerate(resolved.plugins):
        plugin = get(entry.get("plugin", ""))
        rows.append(
            {
                "name": entry.get("plugin", ""),
                "enabled": entry.get("enabled", True),
                "stages": plugin.stages if plugin else (),
                "installed": plugin is not None,
                "source": source if index < own else "template",
                "source_label": SOURCE_LABELS[source if index < own else "template"],
            }
        )
    return rows


def _chain_context(request, template, *, errors=None, drafts=None, error=None) -> dict:
    actor = request.actor
    chain = _stored_chain(actor, template)
    templates = list(_templates(actor))
    with_own = set(
        in_organization_of(actor, TemplateVersion)
        .filter(policy_chain__isnull=False)
        .values_list("template_id", flat=True)
    )
    plugins = all_plugins()
    return {
        "template": template,
        "templates": [{"template": t, "has_own": t.pk in with_own} for t in templates],
        "chain": chain,
        "version": chain.version if chain else 0,
        "entries": _entries(_current_plugins(chain, template), errors or {}, drafts or {}),
        "effective": _effective(actor, template),
        "plugins": plugins,
        "starters": {
            plugin.name: json.dumps(_starter_config(plugin), ensure_ascii=False)
            for plugin in plugins
        },
        "stages": STAGES,
        "chain_error": error,
        "operations": OPERATIONS,
    }


def _render_chain(request, template, *, status=200, **kwargs):
    context = _chain_context(request, template, **kwargs)
    if request.htmx:
        # htmx swaps only 2xx answers; the fragment carries the error itself.
        return render(request, "console/governance/_chain.html", context)
    return render(request, "console/governance/policies.html", context, status=status)


@require_permission("policy.manage")
def policies(request):
    template = _template_or_404(request.actor, request.GET.get("template"))
    return _render_chain(request, template)


def _apply(operation: str, plugins: list[dict], index: int | None, post) -> list[dict]:
    """The plugin list after one editing operation (validation is the service's job)."""
    plugins = [dict(entry) for entry in plugins]
    if operation == "add":
        plugins.append({"plugin": post["plugin"], "enabled": True, "config": post["config"]})
        return plugins
    assert index is not None
    if operation == "save":
        plugins[index]["config"] = post["config"]
        plugins[index]["enabled"] = post["enabled"]
    elif operation == "toggle":
        plugins[index]["enabled"] = not plugins[index].get("enabled", True)
    elif operation == "up" and index > 0:
        plugins[index - 1], plugins[index] = plugins[index], plugins[index - 1]
    elif operation == "down" and index < len(plugins) - 1:
        plugins[index + 1], plugins[index] = plugins[index], plugins[index + 1]
    elif operation == "remove":
        del plugins[index]
    return plugins


def _index(raw, plugins) -> int | None:
    try:
        index = int(raw)
    except (TypeError, ValueError):
        return None
    return index if 0 <= index < len(plugins) else None


@require_POST
@require_permission("policy.manage")
def policy_chain_edit(request):
    """One edit of a chain (add, save settings, enable/disable, move, remove), saved at once."""
    actor = request.actor
    template = _template_or_404(actor, request.POST.get("template"))
    chain = _stored_chain(actor, template)
    plugins = _current_plugins(chain, template)
    operation = request.POST.get("op", "")
    index = _index(request.POST.get("index"), plugins)
    if operation not in OPERATIONS or (operation != "add" and index is None):
        return _render_chain(
            request,
            template,
            status=400,
            error=_("Unknown change: reload the page and try again."),
        )
    current = chain.version if chain else 0
    if str(request.POST.get("version", "")) != str(current):
        return _render_chain(
            request,
            template,
            status=409,
            error=_(
                "The chain was changed by someone else (now version %(version)s); your change "
                "was not applied. Review it and try again."
            )
            % {"version": current},
        )
    slot = len(plugins) if operation == "add" else index
    post: dict = {"enabled": request.POST.get("enabled") == "on"}
    if operation in ("add", "save"):
        name = request.POST.get("plugin", "") if operation == "add" else plugins[index]["plugin"]
        plugin = get(name)
        if plugin is None:
            return _render_chain(
                request,
                template,
                status=400,
                error=_("Unknown plugin “%(name)s”.") % {"name": name},
            )
        text = request.POST.get("config", "") or "{}"
        try:
            config = json.loads(text)
        except ValueError as error:
            problem = _("Not valid JSON (line %(line)s, column %(column)s): %(message)s.") % {
                "line": error.lineno,
                "column": error.colno,
                "message": error.msg,
            }
            return _config_error(request, template, operation, slot, problem, text)
        if not isinstance(config, dict):
            return _config_error(
                request, template, operation, slot, _("Expected a JSON object."), text
            )
        problem = _config_problem(plugin, config)
        if problem:
            return _config_error(request, template, operation, slot, problem, text)
        post.update(plugin=name, config=config)
    try:
        changed = _apply(operation, plugins, index, post)
        if template is not None:
            saved = template_policy_chain_set(actor=actor, template=template, plugins=changed)
        else:
            saved = policy_chain_set(actor=actor, plugins=changed)
    except CadreError as error:
        detail = (error.details or {}).get("plugins")
        if isinstance(detail, dict) and operation in ("add", "save"):
            messages_for = detail.get(str(slot)) or [error.message]
            return _config_error(
                request, template, operation, slot, messages_for[0], request.POST.get("config", "")
            )
        return _render_chain(request, template, status=400, error=error.message)
    messages.success(
        request,
        (
            _(
                "The template's policy chain was saved (version %(version)s); it applies to "
                "the next message and tool call."
            )
            if template
            else _(
                "The organization's policy chain was saved (version %(version)s); it applies "
                "to the next message and tool call."
            )
        )
        % {"version": saved.version},
    )
    if request.htmx:
        return _render_chain(request, template)
    url = reverse("console:policies")
    return redirect(f"{url}?template={template.pk}" if template else url)


def _config_error(request, template, operation, slot, problem, text):
    if operation == "add":
        context_error = _("The new %(plugin)s entry was not added: %(problem)s") % {
            "plugin": request.POST.get("plugin", ""),
            "problem": problem,
        }
        return _render_chain(request, template, status=400, error=context_error)
    return _render_chain(request, template, status=400, errors={slot: problem}, drafts={slot: text})


# --- masking test bench ---------------------------------------------------------------------


def _masking_config(actor, template) -> tuple[dict | None, bool]:
    """(the masking plugin's settings in the chain the template runs, whether it is on)."""
    resolved = template_resolved_chain(actor.organization, template)
    for entry in resolved.plugins:
        if entry.get("plugin") == "masking" and entry.get("enabled", True):
            return dict(entry.get("config") or {}), True
    return None, False


def _segments(text: str, detections) -> list[dict]:
    """The text cut into plain and detected pieces, for highlighting."""
    pieces, cursor = [], 0
    for detection in detections:
        if detection.start > cursor:
            pieces.append({"text": text[cursor : detection.start], "type": None})
        pieces.append({"text": text[detection.start : detection.end], "type": detection.type})
        cursor = detection.end
    if cursor < len(text):
        pieces.append({"text": text[cursor:], "type": None})
    return pieces


@never_cache
@sensitive_post_parameters("text")
@require_permission()
def masking_bench(request):
    """Paste text, see what masking finds and what the model would get. Analysed on POST only
    (never in a URL), answered `no-store`, and nothing of the text is logged or audited."""
    actor = request.actor
    if not any(actor.has(permission) for permission in PREVIEW_PERMISSIONS):
        return denied(
            request,
            _(
                "The masking test bench needs the “Edit the policy chain and alert rules” "
                "(policy.manage) or the “Read the audit log” (audit.view) permission."
            ),
        )
    templates = list(_templates(actor))
    form = MaskingBenchForm(
        request.POST if request.method == "POST" else None,
        templates=templates,
        initial={"template": request.GET.get("template") or ""},
    )
    context = {
        "form": form,
        "result": None,
        "rules": None,
        "can_manage": actor.has("policy.manage"),
    }
    status = 200
    if request.method == "POST":
        if form.is_valid():
            data = form.cleaned_data
            template = _template_or_404(actor, data["template"])
            config, enabled = _masking_config(actor, template)
            try:
                policy = MaskingPolicy.from_dict(config or None)
                if data["mode"]:
                    policy = MaskingPolicy(modes=dict(policy.modes), default=data["mode"])
                result = masking_preview(actor=actor, text=data["text"], policy=policy)
            except CadreError as error:
                form.add_error("text", error.message)
                status = error.status
            else:
                context["result"] = {
                    "text": result.text,
                    "detections": result.detections,
                    "segments": _segments(data["text"], result.detections),
                    "policy": policy.as_dict(),
                    "masking_enabled": enabled,
                    "template": template,
                }
        else:
            status = 400
    if actor.has("policy.manage"):
        context["rules"] = restricted_for(actor, MaskingRule, "manage").order_by("name")
        context["rule_form"] = MaskingRuleForm()
    if request.htmx and request.method == "POST":
        # htmx swaps only 2xx answers; the fragment carries the form's errors itself.
        return render(request, "console/governance/_masking_result.html", context)
    return render(request, "console/governance/masking_bench.html", context, status=status)


# --- organization masking rules (on the bench page) -----------------------------------------


def _bench_with_rule_form(request, rule_form, status):
    actor = request.actor
    context = {
        "form": MaskingBenchForm(templates=list(_templates(actor))),
        "result": None,
        "rules": restricted_for(actor, MaskingRule, "manage").order_by("name"),
        "rule_form": rule_form,
        "can_manage": True,
    }
    return render(request, "console/governance/masking_bench.html", context, status=status)


@require_POST
@sensitive_post_parameters("terms")
@require_permission("policy.manage")
def masking_rule_create(request):
    form = MaskingRuleForm(request.POST)
    if form.is_valid():
        try:
            rule = masking_services.masking_rule_create(
                actor=request.actor, **form.service_arguments()
            )
        except CadreError as error:
            add_service_error(form, error)
        else:
            messages.success(
                request,
                _("The rule “%(name)s” masks %(type)s from the next message.")
                % {"name": rule.name, "type": rule.entity_type},
            )
            return redirect("console:masking_bench")
    return _bench_with_rule_form(request, form, 400)


def _rule_or_404(request, pk: int) -> MaskingRule:
    return get_restricted_or_404(request, MaskingRule, "manage", pk=pk)


@require_POST
@require_permission("policy.manage")
def masking_rule_toggle(request, pk: int):
    rule = _rule_or_404(request, pk)
    try:
        rule = masking_services.masking_rule_update(
            actor=request.actor, rule=rule, is_active=not rule.is_active
        )
    except CadreError as error:
        messages.error(request, error.message)
    else:
        text = (
            _("The rule “%(name)s” is on.") if rule.is_active else _("The rule “%(name)s” is off.")
        )
        messages.success(request, text % {"name": rule.name})
    return redirect("console:masking_bench")


@require_POST
@require_permission("policy.manage")
def masking_rule_delete(request, pk: int):
    rule = _rule_or_404(request, pk)
    name = rule.name
    try:
        masking_services.masking_rule_delete(actor=request.actor, rule=rule)
    except CadreError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, _("The rule “%(name)s” was deleted.") % {"name": name})
    return redirect("console:masking_bench")
