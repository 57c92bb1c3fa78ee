"""The organization's profile and its settings (name, language, time zone)."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import redirect, render

from cadre.console.forms import OrganizationForm, add_service_error
from cadre.console.views.base import denied, posted, require_permission
from cadre.errors import CadreError
from cadre.tenancy import services
from cadre.tenancy.roles import ROLES

FIELDS = ("name", "locale", "time_zone")


@require_permission("organization.view")
def organization_detail(request):
    organization = request.actor.organization
    can_manage = request.actor.has("organization.manage")
    form = None
    if can_manage:
        form = OrganizationForm(
            posted(request), initial={name: getattr(organization, name) for name in FIELDS}
        )
        if request.method == "POST" and form.is_valid():
            changed = {name: form.cleaned_data[name] for name in form.changed_data}
            try:
                if changed:
                    services.organization_update(
                        actor=request.actor, organization=organization, **changed
                    )
            except CadreError as error:
                add_service_error(form, error)
            else:
                messages.success(
                    request,
                    "The organization's settings were saved."
                    if changed
                    else "Nothing was changed.",
                )
                return redirect("console:organization")
    elif request.method == "POST":
        return denied(
            request,
            "Changing the organization needs the organization.manage permission (owners have it).",
        )
    return render(
        request,
        "console/organization.html",
        {
            "organization": organization,
            "form": form,
            "roles": list(ROLES.values()),
            "my_roles": request.member.roles,
        },
    )
