"""Single sign-on with an organization's identity providers (start and callback): OpenID Connect,
SAML 2.0 (SP metadata, assertion consumer, single logout) and the Feishu/Lark, WeCom and DingTalk
logins; OIDC back-channel logout; and the console's test sign-in."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib.auth import login
from django.http import Http404, HttpResponse, HttpResponseBadRequest, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from cadre.tenancy.middleware import SESSION_KEY, SIGNIN_SCOPE_KEY
from cadre.tenancy.models import IdentityProvider, Organization
from cadre.tenancy.services import oidc, saml, sso_logout

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
        raise Http404(_("No such identity provider."))
    return provider


def saml_endpoints(provider: IdentityProvider) -> dict:
    """Cadre's SAML SP for this provider: entity id, ACS and SLO URLs (services/saml.py)."""
    return saml.sp_endpoints(provider)


def _sp(provider: IdentityProvider) -> dict | None:
    return saml_endpoints(provider) if provider.kind == IdentityProvider.Kind.SAML else None


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
            provider=provider, redirect_uri=_callback_uri(request, provider), sp=_sp(provider)
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
            provider=provider,
            redirect_uri=_callback_uri(request, provider),
            test=True,
            sp=_sp(provider),
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
        sign_in = oidc.sso_complete(
            provider=provider,
            pending=pending,
            code=code,
            redirect_uri=_callback_uri(request, provider),
        )
    except oidc.SsoRefused as refusal:
        return _refused(request, provider, refusal)
    login(request, sign_in.member.user, backend=_BACKEND)
    request.session[SESSION_KEY] = sign_in.member.organization_id
    # This provider vouches for this organization's member only (tenancy/middleware.py).
    request.session[SIGNIN_SCOPE_KEY] = [sign_in.member.organization_id]
    request.session.save()
    sso_logout.sso_session_record(
        provider=provider, sign_in=sign_in, session_key=request.session.session_key
    )
    return redirect(pending.get("next") or "console:home")


# --- SAML 2.0 ----------------------------------------------------------------------------------


def _saml_provider(org_slug: str, provider_slug: str) -> IdentityProvider:
    provider = _provider(org_slug, provider_slug)
    if provider.kind != IdentityProvider.Kind.SAML:
        raise Http404(_("No such SAML identity provider."))
    return provider


@require_GET
def saml_metadata(request, org_slug: str, provider_slug: str):
    """Cadre's SP metadata for this provider (its URL is also the SP entity id)."""
    provider = _saml_provider(org_slug, provider_slug)
    xml = saml.sp_metadata(provider=provider, sp=saml_endpoints(provider))
    return HttpResponse(xml, content_type="application/samlmetadata+xml")


@csrf_exempt  # the IdP posts the response from its own site (HTTP-POST binding)
@never_cache
@require_POST
def saml_acs(request, org_slug: str, provider_slug: str):
    """The assertion consumer: keep the posted response and continue at the callback, a GET
    in this browser's own session (the cross-site POST carries no SameSite=Lax cookie)."""
    provider = _saml_provider(org_slug, provider_slug)
    relay_state = request.POST.get("RelayState", "")
    if not saml.relay_state_ok(relay_state):
        return _refused(
            request, provider, oidc.SsoRefused("relay_state_invalid", relay_state[:100])
        )
    saml_response = request.POST.get("SAMLResponse", "")
    if not saml_response:
        return _refused(request, provider, oidc.SsoRefused("code_missing", "no SAMLResponse"))
    key = saml.response_stash(saml_response)
    callback = reverse("console:sso_callback", args=[org_slug, provider_slug])
    return redirect(f"{callback}?{urlencode({'state': relay_state, 'code': key})}")


@csrf_exempt  # the IdP posts logout messages from its own site (HTTP-POST binding)
@never_cache
@require_http_methods(["GET", "POST"])
def saml_slo(request, org_slug: str, provider_slug: str):
    """Single logout, HTTP-Redirect (GET) or HTTP-POST: the IdP's signed LogoutRequest ends the
    sessions of its NameID and is answered with Cadre's signed LogoutResponse in the same
    binding; the IdP's LogoutResponse to Cadre's own LogoutRequest (a member signed out of
    Cadre) ends at the signed-out page."""
    provider = _saml_provider(org_slug, provider_slug)
    binding = "post" if request.method == "POST" else "redirect"
    message = request.POST if binding == "post" else request.GET
    signed = {
        "relay_state": message.get("RelayState", ""),
        "sig_alg": message.get("SigAlg", ""),
        "signature": message.get("Signature", ""),
        "binding": binding,
    }
    try:
        if "SAMLRequest" in message:
            kind, answer = sso_logout.saml_logout(
                provider=provider,
                sp=saml_endpoints(provider),
                saml_request=message["SAMLRequest"],
                **signed,
            )
        elif "SAMLResponse" in message:
            sso_logout.saml_logout_answered(
                provider=provider,
                sp=saml_endpoints(provider),
                saml_response=message["SAMLResponse"],
                **signed,
            )
            kind, answer = "", ""
        else:
            return HttpResponseBadRequest("Expected a SAMLRequest or a SAMLResponse.")
    except oidc.SsoRefused as refusal:
        return HttpResponseBadRequest(f"Logout message refused: {refusal.reason}")
    if kind == "redirect":
        return redirect(answer)
    if kind == "post":
        return HttpResponse(answer)  # pysaml2's form, auto-submitted to the IdP
    return render(request, "console/sso_signed_out.html", {"provider": provider})


# --- OpenID Connect back-channel logout ----------------------------------------------------------


@csrf_exempt  # called by the provider, server to server
@never_cache
@require_POST
def oidc_backchannel_logout(request, org_slug: str, provider_slug: str):
    """OpenID Connect Back-Channel Logout 1.0: a logout_token ends the sessions it names; 200,
    or 400 with an error (the provider may retry)."""
    provider = _provider(org_slug, provider_slug)
    if provider.kind != IdentityProvider.Kind.OIDC:
        raise Http404(_("No such OpenID Connect provider."))
    try:
        sso_logout.backchannel_logout(
            provider=provider, logout_token=request.POST.get("logout_token", "")
        )
    except oidc.SsoRefused as refusal:
        body = {"error": "invalid_request", "error_description": refusal.reason}
        response = JsonResponse(body, status=400)
    else:
        response = HttpResponse(status=200)
    response["Cache-Control"] = "no-store"
    return response
