"""Connectors: the IM accounts list, adding one, its setup and health, credentials, bindings,
and mapping platform users to members (one by one from the queue, or from a CSV file)."""

from __future__ import annotations

from django.contrib import messages
from django.db.models import Q
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import path
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_POST

from cadre.agents.models import Deployment
from cadre.console.forms import add_service_error
from cadre.console.scoping import get_restricted_or_404, restricted, restricted_for
from cadre.console.views.base import paginate, posted, query_without_page, require_permission
from cadre.console.views.connectors_directory import directory_context
from cadre.console.views.connectors_directory import urlpatterns as directory_urlpatterns
from cadre.console.views.connectors_forms import (
    BindingForm,
    ConnectorForm,
    IdentityImportApplyForm,
    IdentityImportForm,
    MapIdentityForm,
    PlatformChoiceForm,
    RotateCredentialsForm,
)
from cadre.console.views.connectors_setup import (
    callback_unreachable,
    callback_url,
    extra_for,
    setup_guide,
)
from cadre.errors import CadreError
from cadre.im import platform_choices, platforms
from cadre.tenancy.models import IMIdentity
from connectors import selectors
from connectors.base import identities, registry, services
from connectors.base.health import connector_health, last_outcome, last_outcomes
from connectors.directory import identity_import as importer
from connectors.models import Connector, ConnectorBinding, UnmappedIdentity

PERMISSION = "connector.manage"


def _connector(request, pk: int) -> Connector:
    """A connector the actor manages, or 404 (another organization's does not exist)."""
    return get_restricted_or_404(request, Connector, "manage", pk=pk)


def _platforms() -> list[dict]:
    platforms = registry()
    return [
        {
            "name": name,
            "label": label,
            "extra": extra_for(name),
            "capabilities": platforms[name].capabilities,
        }
        for name, label in platform_choices()
        if name in platforms
    ]


@require_permission(PERMISSION)
def connector_list(request):
    connectors = list(selectors.connector_list(request.actor))
    outcomes = last_outcomes(connectors)
    rows = [
        {"connector": c, "health": connector_health(c, last=outcomes.get(c.pk))} for c in connectors
    ]
    return render(request, "console/connectors/list.html", {"rows": rows})


@require_permission(PERMISSION)
def connector_create(request):
    chooser = PlatformChoiceForm(request.POST or request.GET or None)
    platform = chooser.cleaned_data["platform"] if chooser.is_valid() else None
    form = None
    if platform is not None:
        form = ConnectorForm(posted(request) if "name" in request.POST else None, platform=platform)
        if request.method == "POST" and form.is_valid():
            try:
                connector = services.connector_create(
                    actor=request.actor,
                    platform=platform,
                    name=form.cleaned_data["name"],
                    credentials=form.credentials(),
                    settings=form.settings(),
                )
            except CadreError as error:
                add_service_error(form, error)
            else:
                messages.success(
                    request,
                    _(
                        "%(name)s was added. Paste the settings below into the platform's "
                        "console, then test the credentials."
                    )
                    % {"name": connector.name},
                )
                return redirect("console:connector", pk=connector.pk)
    context = {
        "chooser": chooser,
        "platform": platform,
        "platform_label": platforms.get(platform) if platform else "",
        "extra": extra_for(platform) if platform else None,
        "form": form,
        "platforms": _platforms(),
    }
    # htmx: choosing a platform swaps only the form's fields.
    if request.htmx and request.method == "GET":
        return render(request, "console/connectors/_create_fields.html", context)
    return render(request, "console/connectors/create.html", context)


def _detail_context(request, connector: Connector, **extra) -> dict:
    last = last_outcome(connector)
    return {
        "connector": connector,
        "callback_url": callback_url(connector),
        "callback_unreachable": callback_unreachable(connector),
        "guide": setup_guide(connector),
        "health": connector_health(connector, last=last),
        "last_outcome": last,
        "extra": extra_for(connector.platform),
        "failures": selectors.connector_recent_failures(connector),
        "unmapped_waiting": selectors.unmapped_queue(request.actor, connector).count(),
        "binding_count": connector.bindings.count(),
        "mode": (connector.settings or {}).get("mode", "webhook"),
        "tab": "overview",
        **directory_context(connector),
        **extra,
    }


@require_permission(PERMISSION)
def connector_detail(request, pk: int):
    connector = _connector(request, pk)
    return render(request, "console/connectors/detail.html", _detail_context(request, connector))


@require_permission(PERMISSION)
def connector_rotate(request, pk: int):
    connector = _connector(request, pk)
    form = RotateCredentialsForm(posted(request), platform=connector.platform)
    if request.method == "POST" and form.is_valid():
        try:
            services.connector_rotate_credentials(
                actor=request.actor,
                connector=connector,
                credentials=form.merged(connector.credentials),
            )
        except CadreError as error:
            add_service_error(form, error)
        else:
            messages.success(request, _("The credentials were replaced. Test them now."))
            return redirect("console:connector", pk=connector.pk)
    return render(request, "console/connectors/rotate.html", {"connector": connector, "form": form})


@require_POST
@require_permission(PERMISSION)
def connector_status(request, pk: int):
    connector = _connector(request, pk)
    status = request.POST.get("status", "")
    if status not in Connector.Status.values:
        messages.error(request, _("Choose active or disabled."))
        return redirect("console:connector", pk=connector.pk)
    try:
        services.connector_update(actor=request.actor, connector=connector, status=status)
    except CadreError as error:
        messages.error(request, error.message)
    else:
        messages.success(
            request,
            (
                _("%(name)s is enabled.")
                if status == Connector.Status.ACTIVE
                else _(
                    "%(name)s is disabled: the platform's requests are refused until you "
                    "enable it again."
                )
            )
            % {"name": connector.name},
        )
    return redirect("console:connector", pk=connector.pk)


@require_POST
@require_permission(PERMISSION)
def connector_test(request, pk: int):
    connector = _connector(request, pk)
    result = services.connector_test_credentials(actor=request.actor, connector=connector)
    if request.htmx:
        last = last_outcome(connector)
        return render(
            request,
            "console/connectors/_test_result.html",
            # The page's health is swapped too: it must not stay "Healthy" after a failure.
            {
                "connector": connector,
                "result": result,
                "health": connector_health(connector, last=last),
                "last_outcome": last,
            },
        )
    (messages.success if result.ok else messages.error)(request, result.message)
    return redirect("console:connector", pk=connector.pk)


# --- bindings -----------------------------------------------------------------------------


def _deployments(actor) -> list[tuple[int, str]]:
    return list(
        restricted_for(actor, Deployment, "view").order_by("name").values_list("pk", "name")
    )


@require_permission(PERMISSION)
def binding_list(request, pk: int):
    connector = _connector(request, pk)
    deployments = _deployments(request.actor)
    form = BindingForm(posted(request), actor=request.actor, deployments=deployments)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            services.binding_create(
                actor=request.actor,
                connector=connector,
                name=data["name"],
                deployment_id=data["deployment"],
                positions=data["positions"],
                departments=data["departments"],
                members=data["members"],
                chat_ids=data["chat_ids"],
            )
        except CadreError as error:
            add_service_error(form, error)
        else:
            messages.success(request, _("The binding was added."))
            return redirect("console:connector_bindings", pk=connector.pk)
    bindings = list(
        ConnectorBinding.objects.filter(connector=connector).prefetch_related(
            "positions", "departments", "members"
        )
    )
    names = dict(deployments)
    for binding in bindings:
        binding.deployment_name = names.get(
            binding.deployment_id,
            _("deployment %(id)s (not visible)") % {"id": binding.deployment_id},
        )
    context = _detail_context(request, connector, tab="bindings", bindings=bindings, form=form)
    return render(request, "console/connectors/bindings.html", context)


@require_POST
@require_permission(PERMISSION)
def binding_remove(request, pk: int, binding_pk: int):
    connector = _connector(request, pk)
    binding = get_restricted_or_404(
        request,
        ConnectorBinding,
        "manage",
        pk=binding_pk,
        connector=connector,
    )
    try:
        services.binding_delete(actor=request.actor, binding=binding)
    except CadreError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, _("The binding was removed."))
    return redirect("console:connector_bindings", pk=connector.pk)


# --- identities ---------------------------------------------------------------------------


def _identities_context(request, connector: Connector, **extra) -> dict:
    identities = (
        restricted(request, IMIdentity, "view")
        .filter(platform=connector.platform)
        .select_related("member")
        .order_by("platform_user_id", "pk")
    )
    term = request.GET.get("q", "").strip()
    if term:
        identities = identities.filter(
            Q(platform_user_id__icontains=term) | Q(member__display_name__icontains=term)
        )
    return _detail_context(
        request,
        connector,
        tab="identities",
        page=paginate(request, identities),
        query=query_without_page(request),
        q=term,
        queue=list(selectors.unmapped_queue(request.actor, connector)[:100]),
        import_form=extra.pop("import_form", None) or IdentityImportForm(),
        **extra,
    )


@require_permission(PERMISSION)
def identity_list(request, pk: int):
    connector = _connector(request, pk)
    context = _identities_context(request, connector)
    if request.htmx and request.GET.get("q") is not None:
        return render(request, "console/connectors/_identity_results.html", context)
    return render(request, "console/connectors/identities.html", context)


@require_POST
@require_permission(PERMISSION)
def identity_import_upload(request, pk: int):
    """Step 1, a file upload: preview. Step 2, the previewed content sent back: apply."""
    connector = _connector(request, pk)
    if "content" in request.POST:
        apply_form = IdentityImportApplyForm(request.POST)
        if not apply_form.is_valid():
            messages.error(request, _("The file was lost on the way; upload it again."))
            return redirect("console:connector_identities", pk=connector.pk)
        data = apply_form.cleaned_data["content"].encode()
        try:
            result = importer.identity_import_apply(
                actor=request.actor, connector=connector, data=data
            )
        except CadreError as error:
            # Nothing was written: show the preview again with every row's errors.
            plan = importer.identity_import_plan(
                actor=request.actor, connector=connector, data=data
            )
            return render(
                request,
                "console/connectors/import_preview.html",
                {
                    "connector": connector,
                    "plan": plan,
                    "error": error.message,
                    "apply_form": None,
                },
                status=400,
            )
        parts = [
            ngettext("%(count)d account mapped", "%(count)d accounts mapped", result.created)
            % {"count": result.created}
        ]
        if result.unchanged:
            parts.append(_("%(count)d already mapped") % {"count": result.unchanged})
        if result.resolved_unmapped:
            parts.append(_("%(count)d taken off the queue") % {"count": result.resolved_unmapped})
        messages.success(request, _("%(summary)s.") % {"summary": _(", ").join(parts)})
        return redirect("console:connector_identities", pk=connector.pk)
    form = IdentityImportForm(request.POST, request.FILES)
    if not form.is_valid():
        return render(
            request,
            "console/connectors/identities.html",
            _identities_context(request, connector, import_form=form),
            status=400,
        )
    data = form.cleaned_data["file"]
    plan = importer.identity_import_plan(actor=request.actor, connector=connector, data=data)
    apply_form = None
    if plan.valid:
        apply_form = IdentityImportApplyForm(
            initial={"content": data.decode("utf-8-sig", errors="replace")}
        )
    return render(
        request,
        "console/connectors/import_preview.html",
        {"connector": connector, "plan": plan, "apply_form": apply_form, "error": ""},
        status=200 if plan.valid else 400,
    )


def _unmapped(request, connector: Connector, unmapped_pk: int) -> UnmappedIdentity:
    return get_object_or_404(
        restricted(request, UnmappedIdentity, "manage").select_related("connector"),
        pk=unmapped_pk,
        connector=connector,
    )


@require_permission(PERMISSION)
def unmapped_map(request, pk: int, unmapped_pk: int):
    connector = _connector(request, pk)
    unmapped = _unmapped(request, connector, unmapped_pk)
    form = MapIdentityForm(posted(request), actor=request.actor)
    if request.method == "POST" and form.is_valid():
        member = form.cleaned_data["member"]
        try:
            identities.unmapped_identity_map(actor=request.actor, unmapped=unmapped, member=member)
        except CadreError as error:
            add_service_error(form, error)
        else:
            messages.success(
                request,
                _(
                    "%(user)s is now mapped to %(member)s; their next message reaches "
                    "%(member)s's agent."
                )
                % {
                    "user": unmapped.display_name or unmapped.platform_user_id,
                    "member": member.display_name,
                },
            )
            return redirect("console:connector_identities", pk=connector.pk)
    return render(
        request,
        "console/connectors/map.html",
        {"connector": connector, "unmapped": unmapped, "form": form},
    )


@require_POST
@require_permission(PERMISSION)
def unmapped_dismiss(request, pk: int, unmapped_pk: int):
    connector = _connector(request, pk)
    unmapped = _unmapped(request, connector, unmapped_pk)
    try:
        identities.unmapped_identity_dismiss(actor=request.actor, unmapped=unmapped)
    except CadreError as error:
        messages.error(request, error.message)
    else:
        messages.success(
            request,
            _("%(user)s was dismissed; they return to the queue if they write again.")
            % {"user": unmapped.display_name or unmapped.platform_user_id},
        )
    return redirect("console:connector_identities", pk=connector.pk)


urlpatterns = [
    *directory_urlpatterns,
    path("connectors/", connector_list, name="connectors"),
    path("connectors/new/", connector_create, name="connector_create"),
    path("connectors/<int:pk>/", connector_detail, name="connector"),
    path("connectors/<int:pk>/credentials/", connector_rotate, name="connector_rotate"),
    path("connectors/<int:pk>/status/", connector_status, name="connector_status"),
    path("connectors/<int:pk>/test/", connector_test, name="connector_test"),
    path("connectors/<int:pk>/bindings/", binding_list, name="connector_bindings"),
    path(
        "connectors/<int:pk>/bindings/<int:binding_pk>/remove/",
        binding_remove,
        name="connector_binding_remove",
    ),
    path("connectors/<int:pk>/identities/", identity_list, name="connector_identities"),
    path(
        "connectors/<int:pk>/identities/import/",
        identity_import_upload,
        name="connector_identity_import",
    ),
    path(
        "connectors/<int:pk>/unmapped/<int:unmapped_pk>/map/",
        unmapped_map,
        name="connector_unmapped_map",
    ),
    path(
        "connectors/<int:pk>/unmapped/<int:unmapped_pk>/dismiss/",
        unmapped_dismiss,
        name="connector_unmapped_dismiss",
    ),
]
