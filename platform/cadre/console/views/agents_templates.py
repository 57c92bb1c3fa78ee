"""Role templates in the console: list, create (optionally from a preset), versions with their
status, edit a draft, diff any two versions, submit / withdraw / publish, and drafting the open
draft (or a new one) from uploaded documents — offered at creation too. Every write goes
through `cadre.agents.services`."""

from __future__ import annotations

import difflib

from django.contrib import messages
from django.db.models import Prefetch
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import path
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_POST

from cadre.agents import generation, selectors, services
from cadre.agents.models import AgentTemplate, Deployment, TemplateVersion
from cadre.console.forms import add_service_error
from cadre.console.scoping import get_restricted_or_404, restricted
from cadre.console.views.agents_forms import (
    DiffForm,
    GenerateForm,
    ReasonForm,
    TemplateCreateForm,
    VersionForm,
)
from cadre.console.views.agents_template_pickers import VersionPickerForm
from cadre.console.views.base import denied, paginate, posted, query_without_page
from cadre.console.views.base import require_permission as gate
from cadre.errors import CadreError
from cadre.llm import BudgetExceeded

TRANSITIONS = {
    "submit": services.version_submit,
    "withdraw": services.version_withdraw,
    "publish": services.version_publish,
}
TRANSITION_DONE = {
    "submit": gettext_lazy("Version %(number)s was submitted for review."),
    "withdraw": gettext_lazy("Version %(number)s was withdrawn to draft."),
    "publish": gettext_lazy("Version %(number)s was published."),
}


def _template_or_404(request, pk: int) -> AgentTemplate:
    return get_restricted_or_404(request, AgentTemplate, "view", pk=pk)


def _version_or_404(request, pk: int, number: int) -> TemplateVersion:
    return get_object_or_404(
        restricted(request, TemplateVersion, "view").select_related(
            "template", "created_by", "published_by"
        ),
        template_id=pk,
        number=number,
    )


@gate("template.view")
def template_list(request):
    text = request.GET.get("q", "").strip()
    templates = selectors.template_find(request.actor, text=text)
    context = {
        "page": paginate(request, templates),
        "query": query_without_page(request),
        "q": text,
        "can_manage": request.actor.has("template.manage"),
    }
    name = "console/agents/templates/_results.html" if request.htmx else None
    return render(request, name or "console/agents/templates/list.html", context)


@gate("template.manage")
def template_create(request):
    form = TemplateCreateForm(posted(request), initial={"preset": request.GET.get("preset", "")})
    if request.method == "POST" and form.is_valid():
        try:
            template = services.template_create(actor=request.actor, **form.cleaned_data)
        except CadreError as error:
            add_service_error(form, error)
        else:
            messages.success(
                request, _("“%(name)s” was created with a first draft.") % {"name": template.name}
            )
            if request.POST.get("then") == "generate":
                # "Create and generate from documents": the documents fill that first draft.
                return redirect("console:template_generate", pk=template.pk)
            return redirect("console:template", pk=template.pk)
    return render(
        request,
        "console/agents/templates/create.html",
        {"form": form, "presets": services.presets()},
    )


@gate("template.view")
def template_detail(request, pk: int):
    template = get_object_or_404(
        restricted(request, AgentTemplate, "view").prefetch_related(
            Prefetch(
                "versions",
                queryset=TemplateVersion.objects.select_related(
                    "created_by", "published_by"
                ).order_by("-number"),
            )
        ),
        pk=pk,
    )
    versions = list(template.versions.all())
    open_version = next((v for v in versions if v.status != TemplateVersion.Status.PUBLISHED), None)
    deployments = Deployment.objects.filter(template=template).select_related("version")
    numbers = [v.number for v in versions]
    return render(
        request,
        "console/agents/templates/detail.html",
        {
            "template": template,
            "versions": versions,
            "open_version": open_version,
            "deployments": deployments,
            "can_manage": request.actor.can("template.manage", template),
            "diff_form": DiffForm(
                initial={
                    "a": numbers[1] if len(numbers) > 1 else 1,
                    "b": numbers[0] if numbers else 1,
                }
            ),
        },
    )


@gate("template.view")
def version_detail(request, pk: int, number: int):
    version = _version_or_404(request, pk, number)
    return render(
        request,
        "console/agents/templates/version.html",
        {
            "version": version,
            "template": version.template,
            "can_manage": request.actor.can("template.manage", version),
            "can_dispatch": request.actor.has("deployment.manage"),
            "reason_form": ReasonForm(),
        },
    )


@gate("template.manage")
def version_edit(request, pk: int, number: int):
    version = _version_or_404(request, pk, number)
    if version.status != TemplateVersion.Status.DRAFT:
        messages.error(
            request,
            _("Only a draft can be edited — withdraw it from review first.")
            if version.status == "in_review"
            else _("Only a draft can be edited."),
        )
        return redirect("console:template_version", pk=pk, number=number)
    # The pickers, or the Advanced (JSON) view; a post says which it came from (a client
    # posting the JSON fields without saying so edits JSON, as before the pickers).
    if request.method == "POST":
        advanced = request.POST.get("editor", "json") == "json"
    else:
        advanced = request.GET.get("view") == "json"
    form_class = VersionForm if advanced else VersionPickerForm
    form = form_class(
        posted(request),
        initial=form_class.initial_for(version),
        actor=request.actor,
    )
    if request.method == "POST" and form.is_valid():
        # Compared with the stored values: JSON fields are text in the form, never "unchanged".
        changed = {
            name: value
            for name, value in form.cleaned_data.items()
            if value != getattr(version, name)
        }
        if not changed:
            messages.info(request, _("Nothing was changed."))
            return redirect("console:template_version", pk=pk, number=number)
        try:
            services.version_update(actor=request.actor, version=version, **changed)
        except CadreError as error:
            add_service_error(form, error)
        else:
            messages.success(request, _("Draft v%(number)s was saved.") % {"number": number})
            return redirect("console:template_version", pk=pk, number=number)
    return render(
        request,
        "console/agents/templates/edit.html",
        {"form": form, "version": version, "template": version.template, "advanced": advanced},
    )


@gate("template.manage")
@require_POST
def version_transition(request, pk: int, number: int, action: str):
    service = TRANSITIONS.get(action)
    if service is None:
        raise Http404(_("No such action."))
    version = _version_or_404(request, pk, number)
    form = ReasonForm(request.POST)
    kwargs = {}
    if action != "submit" and form.is_valid():
        kwargs["reason"] = form.cleaned_data["reason"]
        if action == "publish":
            kwargs["override_gate"] = form.cleaned_data["override_gate"]
    try:
        service(actor=request.actor, version=version, **kwargs)
    except CadreError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, TRANSITION_DONE[action] % {"number": number})
    return redirect("console:template_version", pk=pk, number=number)


@gate("template.manage")
@require_POST
def template_new_draft(request, pk: int):
    template = _template_or_404(request, pk)
    try:
        version = services.version_draft(actor=request.actor, template=template)
    except CadreError as error:
        messages.error(request, error.message)
        return redirect("console:template", pk=pk)
    messages.success(
        request,
        _("Draft v%(number)s was started from the newest version.") % {"number": version.number},
    )
    return redirect("console:template_version_edit", pk=pk, number=version.number)


def _side_by_side(old: str, new: str, a: int, b: int) -> str:
    # HtmlDiff escapes the text it shows; the table is safe to render as HTML.
    return difflib.HtmlDiff(wrapcolumn=70).make_table(
        old.splitlines(), new.splitlines(), f"v{a}", f"v{b}", context=True, numlines=3
    )


@gate("template.view")
def template_diff(request, pk: int):
    template = _template_or_404(request, pk)
    form = DiffForm(request.GET or None)
    changes: list[dict] = []
    versions = list(template.versions.order_by("-number"))
    if form.is_valid():
        a, b = form.cleaned_data["a"], form.cleaned_data["b"]
        by_number = {v.number: v for v in versions}
        if a not in by_number or b not in by_number:
            form.add_error(None, _("Choose two versions of this template."))
        else:
            old, new = by_number[a], by_number[b]
            split = form.cleaned_data["layout"] != "unified"
            for name, unified in services.version_diff(old, new).items():
                row = {"field": name, "unified": unified.splitlines()}
                if split:
                    row["table"] = _side_by_side(
                        services.field_text(getattr(old, name)),
                        services.field_text(getattr(new, name)),
                        a,
                        b,
                    )
                changes.append(row)
    return render(
        request,
        "console/agents/templates/diff.html",
        {"template": template, "form": form, "versions": versions, "changes": changes},
    )


@gate("template.manage")
def template_generate(request, pk: int):
    template = _template_or_404(request, pk)
    if not request.actor.can("template.manage", template):
        return denied(request, _("You may not change this template."))
    form = GenerateForm(posted(request), request.FILES or None)
    if request.method == "POST" and form.is_valid():
        documents = [
            (upload.name, upload.read(generation.MAX_FILE_BYTES + 1))
            for upload in form.cleaned_data["files"]
        ]
        try:
            version = generation.template_generate(
                actor=request.actor,
                template=template,
                documents=documents,
                notes=form.cleaned_data["notes"],
            )
        except (CadreError, BudgetExceeded) as error:  # a hard budget refused the model
            add_service_error(form, error)
        else:
            messages.success(
                request,
                _(
                    "Draft v%(number)s was written from the documents (%(mode)s). "
                    "Review and edit it before submitting."
                )
                % {"number": version.number, "mode": version.generated_from.get("mode")},
            )
            return redirect("console:template_version", pk=pk, number=version.number)
    open_version = template.versions.exclude(status=TemplateVersion.Status.PUBLISHED).first()
    return render(
        request,
        "console/agents/templates/generate.html",
        {"template": template, "form": form, "open_version": open_version},
    )


urlpatterns = [
    path("templates/", template_list, name="templates"),
    path("templates/new/", template_create, name="template_create"),
    path("templates/<int:pk>/", template_detail, name="template"),
    path("templates/<int:pk>/draft/", template_new_draft, name="template_new_draft"),
    path("templates/<int:pk>/diff/", template_diff, name="template_diff"),
    path("templates/<int:pk>/generate/", template_generate, name="template_generate"),
    path("templates/<int:pk>/v<int:number>/", version_detail, name="template_version"),
    path("templates/<int:pk>/v<int:number>/edit/", version_edit, name="template_version_edit"),
    path(
        "templates/<int:pk>/v<int:number>/<slug:action>/",
        version_transition,
        name="template_version_action",
    ),
]
