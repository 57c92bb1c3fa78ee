"""The organization's identity providers (OIDC, SAML 2.0 and the IM logins), their test sign-in,
and the "SSO required" setting."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from cadre import outbound
from cadre.console.forms import IdentityProviderForm, add_service_error
from cadre.console.scoping import get_in_organization_or_404, in_organization
from cadre.console.views import sso
from cadre.console.views.base import posted, require_permission
from cadre.errors import CadreError
from cadre.tenancy.models import IdentityProvider
from cadre.tenancy.services import oidc, saml


def _callback_url(provider: IdentityProvider) -> str:
    path = reverse("console:sso_callback", args=[provider.organization.slug, provider.slug])
    return settings.CADRE_BASE_URL.rstrip("/") + path


def _with_urls(provider: IdentityProvider) -> IdentityProvider:
    """The URLs to paste into the provider: the callback, or for SAML the SP metadata (also
    the SP entity id), ACS and SLO URLs; for OIDC the back-channel logout URL."""
    provider.callback_url = _callback_url(provider)
    if provider.kind == IdentityProvider.Kind.SAML:
        # The SP key pair's certificates, as the IdP shows them: the one in use and, while a
        # rotation runs, the next one the metadata publishes beside it.
        provider.saml_sp = {
            **sso.saml_endpoints(provider),
            "certificate_sha256": saml.certificate_fingerprint(provider.saml_sp_certificate),
            "next_certificate_sha256": saml.certificate_fingerprint(
                provider.saml_sp_next_certificate
            ),
        }
    elif provider.kind == IdentityProvider.Kind.OIDC:
        path = reverse(
            "console:oidc_backchannel_logout", args=[provider.organization.slug, provider.slug]
        )
        provider.backchannel_logout_url = settings.CADRE_BASE_URL.rstrip("/") + path
    return provider


@require_permission("organization.manage")
def identity_providers(request):
    organization = request.actor.organization
    if request.method == "POST" and "sso_required" in request.POST:
        try:
            oidc.organization_sso_require(
                actor=request.actor, required=request.POST["sso_required"] == "on"
            )
        except CadreError as error:
            messages.error(request, error.message)
        return redirect("console:identity_providers")
    providers = [_with_urls(provider) for provider in in_organization(request, IdentityProvider)]
    return render(
        request,
        "console/identity_providers.html",
        {
            "providers": providers,
            "sso_required": oidc.sso_required(organization),
            "login_url": settings.CADRE_BASE_URL.rstrip("/")
            + reverse("console:login")
            + f"?org={organization.slug}",
            "is_owner": "owner" in request.member.roles,
        },
    )


@require_permission("organization.manage")
def identity_provider_edit(request, pk: int | None = None):
    provider = (
        get_in_organization_or_404(request, IdentityProvider, pk=pk) if pk is not None else None
    )
    initial = {name: getattr(provider, name) for name in oidc.PROVIDER_FIELDS} if provider else {}
    if provider:
        initial["group_roles"] = IdentityProviderForm.mapping_text(provider.group_roles)
    form = IdentityProviderForm(posted(request), initial=initial or None)
    if request.method == "POST" and form.is_valid():
        data = dict(form.cleaned_data)
        try:
            if data["kind"] == IdentityProvider.Kind.SAML and data["saml_metadata_url"]:
                data["saml_metadata_xml"] = saml.metadata_fetch(data["saml_metadata_url"])
            if data["kind"] == IdentityProvider.Kind.OIDC and data.get("issuer"):
                # Refused now with the reason, rather than at the first sign-in (where the
                # fetch is refused anyway).
                outbound.check_url(
                    data["issuer"], allow_setting=outbound.OIDC_PROVIDERS, field="issuer"
                )
            provider = oidc.identity_provider_save(actor=request.actor, provider=provider, **data)
        except CadreError as error:
            add_service_error(form, error)
        else:
            messages.success(request, _("%(name)s was saved.") % {"name": provider.name})
            return redirect("console:identity_providers")
    return render(
        request,
        "console/identity_provider_form.html",
        {
            "form": form,
            "provider": provider,
            "callback_url": _callback_url(provider) if provider else "",
            "urls": _with_urls(provider) if provider else None,
        },
    )


@never_cache
@require_GET
@require_permission("organization.manage")
def identity_provider_test(request, pk: int):
    """Run the provider's sign-in in test mode: the callback shows the claims received and what
    matching and the groups → roles mapping would do, and signs no one in.

    A link (GET) like "Sign in with …": the console's CSP (form-action 'self') would stop a
    form's redirect to the provider, and starting a test changes nothing."""
    provider = get_in_organization_or_404(request, IdentityProvider, pk=pk)
    return sso.test_start(request, provider)
