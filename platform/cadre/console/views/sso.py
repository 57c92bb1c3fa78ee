"""Single sign-on with an organization's identity providers (start and callback): OpenID Connect
and the Feishu/Lark, WeCom and DingTalk logins; and the console's test sign-in."""

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
    remember_pending(request, pending)
    return redirect(url)


def _code(request) -> str:
    # DingTalk's login sends the code back as `authCode`; the others (and OAuth 2.0) as `code`.
    return request.GET.get("code") or request.GET.get("authCode") or ""


def remember_pending(request, pending: dict) -> None:
    waiting = dict(list(request.session.get(_PENDING, {}).items())[-(_MAX_PENDING - 1) :])
    waiting[pending["state"]] = pending
    request.session[_PENDING] = waiting


def test_start(request, provider: IdentityProvider):
    """Start a test sign-in for an administrator on the identity providers page."""
    try:
        url, pending = oidc.sso_begin(
            provider=provider, redirect_uri=_callback_uri(request, provider), test=True
        )
    except oidc.SsoRefused as refusal:
        return _test_result(request, provider, refusal=refusal)
    pending["tester"] = request.member.pk
    remember_pending(request, pending)
    return redirect(url)


def _test_result(request, provider, *, preview=None, refusal=None):
    oidc.sso_test_record(provider=provider, actor=request.actor, preview=preview, refusal=refusal)
    context = {"provider": provider, "preview": preview, "refusal": refusal}
    if refusal is not None:
        context["message"] = refusal.message
    return render(request, "console/sso_test_result.html", context)


def _test_callback(request, provider: IdentityProvider, pending: dict):
    """The callback of a test sign-in: only for the administrator who started it."""
    member = getattr(request, "member", None)
    if (
        member is None
        or member.pk != pending.get("tester")
        or not request.actor.has("organization.manage")
        or member.organization_id != provider.organization_id
    ):
        return _refused(request, provider, oidc.SsoRefused("state_unknown", "test sign-in"))
    if request.GET.get("error"):
        detail = f"{request.GET['error']}: {request.GET.get('error_description', '')}"
        return _test_result(request, provider, refusal=oidc.SsoRefused("provider_error", detail))
    code = _code(request)
    if not code:
        return _test_result(request, provider, refusal=oidc.SsoRefused("code_missing"))
    try:
        preview = oidc.sso_preview(
            provider=provider,
            pending=pending,
            code=code,
            redirect_uri=_callback_uri(request, provider),
        )
    except oidc.SsoRefused as refusal:
        return _test_result(request, provider, refusal=refusal)
    return _test_result(request, provider, preview=preview)


@never_cache
def sso_callback(request, org_slug: str, provider_slug: str):
    provider = _provider(org_slug, provider_slug)
    waiting = request.session.get(_PENDING, {})
    # Popped before anything else: a state works once, so a replayed callback is refused.
    pending = waiting.pop(request.GET.get("state", ""), None)
    request.session[_PENDING] = waiting
    if pending is None or pending["provider"] != provider.pk:
        return _refused(request, provider, oidc.SsoRefused("state_unknown"))
    if pending.get("test"):
        return _test_callback(request, provider, pending)
    if request.GET.get("error"):
        detail = f"{request.GET['error']}: {request.GET.get('error_description', '')}"
        return _refused(request, provider, oidc.SsoRefused("provider_error", detail[:200]))
    code = _code(request)
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
