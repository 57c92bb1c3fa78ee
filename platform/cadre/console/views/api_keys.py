"""API keys: the list (never the secrets), create (secret shown once), revoke."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _

from cadre.console.forms import ApiKeyForm, add_service_error
from cadre.console.scoping import get_restricted_or_404, restricted
from cadre.console.views.base import paginate, posted, query_without_page, require_permission
from cadre.errors import CadreError
from cadre.tenancy import services
from cadre.tenancy.models import ApiKey
from cadre.tenancy.roles import SCOPES


@require_permission("apikey.view")
def api_key_list(request):
    keys = restricted(request, ApiKey, "view").select_related("created_by", "revoked_by")
    return render(
        request,
        "console/api_keys/list.html",
        {
            "page": paginate(request, keys),
            "query": query_without_page(request),
            "can_manage": request.actor.may("apikey.manage"),
        },
    )


@require_permission("apikey.manage")
def api_key_create(request):
    form = ApiKeyForm(posted(request), actor=request.actor)
    if request.method == "POST" and form.is_valid():
        try:
            key, secret = services.api_key_create(
                actor=request.actor,
                name=form.cleaned_data["name"],
                scopes=form.cleaned_data["scopes"],
                expires_at=form.expires_at(),
            )
        except CadreError as error:
            add_service_error(form, error)
        else:
            # The secret exists only in this response (only its hash is stored): rendered
            # here rather than after a redirect so it is never written to the session store.
            response = render(
                request,
                "console/api_keys/created.html",
                {
                    "key": key,
                    "secret": secret,
                    "scope_descriptions": [(scope, SCOPES[scope][0]) for scope in key.scopes],
                },
            )
            response["Cache-Control"] = "no-store"
            return response
    return render(request, "console/api_keys/form.html", {"form": form})


@require_permission("apikey.manage")
def api_key_revoke(request, pk: int):
    key = get_restricted_or_404(request, ApiKey, "view", pk=pk)
    error = None
    if request.method == "POST":
        try:
            services.api_key_revoke(actor=request.actor, key=key)
        except CadreError as caught:
            error = caught.message
        else:
            messages.success(
                request,
                _("The key “%(name)s” (%(prefix)s…) was revoked.")
                % {"name": key.name, "prefix": key.prefix},
            )
            return redirect("console:api_keys")
    return render(
        request,
        "console/confirm.html",
        {
            "title": _("Revoke the key “%(name)s”?") % {"name": key.name},
            "body": _(
                "Every program using the key %(prefix)s… will be refused from now on. "
                "This cannot be undone: create a new key if it is needed again."
            )
            % {"prefix": key.prefix},
            "confirm_label": _("Revoke key"),
            "danger": True,
            "error": error,
            "cancel_url": reverse("console:api_keys"),
            "crumbs": [(_("API keys"), "console:api_keys")],
        },
        status=409 if error else 200,
    )
