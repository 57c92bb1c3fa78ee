"""The organization's profile, its settings (name, language, time zone) and SCIM tokens."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from cadre.console.forms import LOCALES, OrganizationForm, add_service_error
from cadre.console.scoping import get_restricted_or_404, in_organization
from cadre.console.views.base import denied, posted, require_permission
from cadre.errors import CadreError
from cadre.tenancy import services
from cadre.tenancy.models import ScimToken
from cadre.tenancy.roles import ROLES

FIELDS = ("name", "locale", "time_zone", "approved_skills")


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
            changed = {
                name: form.cleaned_data[name]
                for name in form.changed_data
                if form.cleaned_data[name] != getattr(organization, name)
            }
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
                    _("The organization's settings were saved.")
                    if changed
                    else _("Nothing was changed."),
                )
                return redirect("console:organization")
    elif request.method == "POST":
        return denied(
            request,
            _(
                "Changing the organization needs the organization.manage permission "
                "(owners have it)."
            ),
        )
    return render(
        request,
        "console/organization.html",
        {
            "organization": organization,
            "organization_language_name": _language_name(organization.locale),
            "form": form,
            "roles": list(ROLES.values()),
            "my_roles": request.member.roles,
            "scim_tokens": in_organization(request, ScimToken),
            "can_manage_tokens": request.actor.has("apikey.manage"),
            "scim_url": request.build_absolute_uri("/scim/v2/"),
        },
    )


def _language_name(locale: str) -> str:
    """The organization's language as a person reads it ("简体中文")."""
    return str(dict(LOCALES).get(locale, locale))


@require_POST
@require_permission("apikey.manage")
def scim_token_create(request):
    token, secret = services.scim_token_create(
        actor=request.actor, name=request.POST.get("name", "")
    )
    # Rendered, not redirected: the secret exists only in this response (its hash is stored).
    response = render(
        request,
        "console/scim_token_created.html",
        {"token": token, "secret": secret, "scim_url": request.build_absolute_uri("/scim/v2/")},
    )
    response["Cache-Control"] = "no-store"
    return response


@require_POST
@require_permission("apikey.manage")
def scim_token_revoke(request, pk: int):
    token = get_restricted_or_404(request, ScimToken, "view", pk=pk)
    try:
        services.scim_token_revoke(actor=request.actor, token=token)
    except CadreError as error:
        messages.error(request, error.message)
    else:
        messages.success(
            request, _("The SCIM token %(prefix)s… was revoked.") % {"prefix": token.prefix}
        )
    return redirect("console:organization")
