"""Single sign-on with an organization's OpenID Connect providers (start and callback)."""

from __future__ import annotations

from django.contrib.auth import login
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache

from cadre.tenancy.middleware import SESSION_KEY
from cadre.tenancy.models import IdentityProvider, Organization
from cadre.tenancy.services import oidc

_BACKEND = "django.contrib.auth.backends.ModelBackend"
_PENDING = "cadre_oidc_pending"
_MAX_PENDING = 5  # sign-ins started in other tabs stay valid; older ones are dropped


def _provider(org_slug: str, provider_slug: str) -> IdentityProvider:
    provider = (
        IdentityProvider.objects.select_related("organization")
        .filter(
            organization__slug=org_slug,
            organization__status=Organization.Status.ACTIVE,
            slug=provider_slug,
            is_enabled=True,
        )
        .first()
    )
    if provider is None:
        raise Http404("No such identity provider.")
    return provider


def _callback_uri(request, provider: IdentityProvider) -> str:
    return request.build_absolute_uri(
        reverse("console:sso_callback", args=[provider.organization.slug, provider.slug])
    )


def _refused(request, provider: IdentityProvider, refusal: oidc.SsoRefused):
    oidc.sso_failure_record(provider=provider, refusal=refusal)
    context = {"provider": provider, "reason": refusal.reason, "message": refusal.message}
    return render(request, "console/sso_refused.html", context, status=403)


@never_cache
def sso_start(request, org_slug: str, provider_slug: str):
    provider = _provider(org_slug, provider_slug)
    try:
        url, pending = oidc.sso_begin(
            provider=provider, redirect_uri=_callback_uri(request, provider)
        )
    except oidc.SsoRefused as refusal:
        return _refused(request, provider, refusal)
    next_url = request.GET.get("next", "")
    if url_has_allowed_host_and_scheme(next_url, {request.get_host()}, request.is_secure()):
        pending["next"] = next_url
    waiting = dict(list(request.session.get(_PENDING, {}).items())[-(_MAX_PENDING - 1) :])
    waiting[pending["state"]] = pending
    request.session[_PENDING] = waiting
    return redirect(url)


@never_cache
def sso_callback(request, org_slug: str, provider_slug: str):
    provider = _provider(org_slug, provider_slug)
    waiting = request.session.get(_PENDING, {})
    # Popped before anything else: a state works once, so a replayed callback is refused.
    pending = waiting.pop(request.GET.get("state", ""), None)
    request.session[_PENDING] = waiting
    if pending is None or pending["provider"] != provider.pk:
        return _refused(request, provider, oidc.SsoRefused("state_unknown"))
    if request.GET.get("error"):
        detail = f"{request.GET['error']}: {request.GET.get('error_description', '')}"
        return _refused(request, provider, oidc.SsoRefused("provider_error", detail[:200]))
    code = request.GET.get("code", "")
    if not code:
        return _refused(request, provider, oidc.SsoRefused("code_missing"))
    try:
        member = oidc.sso_complete(
            provider=provider,
            pending=pending,
            code=code,
            redirect_uri=_callback_uri(request, provider),
        )
    except oidc.SsoRefused as refusal:
        return _refused(request, provider, refusal)
    login(request, member.user, backend=_BACKEND)
    request.session[SESSION_KEY] = member.organization_id
    return redirect(pending.get("next") or "console:home")
