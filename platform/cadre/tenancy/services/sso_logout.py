"""Session end driven by the identity provider, and the provider told when a member signs out:
the SsoSession record of each sign-in, OIDC back-channel logout (a logout_token ends the
matching Cadre sessions), OIDC RP-initiated logout (Cadre's sign-out goes on to the provider's
end_session_endpoint), SAML single logout both ways (the IdP's LogoutRequest ends sessions;
Cadre's sign-out sends its own LogoutRequest to the IdP)."""

from __future__ import annotations

import logging
from importlib import import_module
from urllib.parse import urlencode

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.utils import timezone
from joserfc import jwt
from joserfc.errors import ExpiredTokenError, JoseError

from cadre.governance import audit
from cadre.tenancy.actors import member_actor, system_actor
from cadre.tenancy.models import IdentityProvider, SsoSession
from cadre.tenancy.services import oidc, saml
from cadre.tenancy.services.oidc import SignIn
from cadre.tenancy.services.refusals import SsoRefused

BACKCHANNEL_EVENT = "http://schemas.openid.net/event/backchannel-logout"
logger = logging.getLogger(__name__)
_LOGOUT_TOKEN_SECONDS = 600  # how old a logout_token's iat may be (and how long its jti is kept)


def sso_session_record(*, provider: IdentityProvider, sign_in: SignIn, session_key: str):
    """Remember which provider session this Cadre session came from (after login())."""
    return SsoSession.objects.create(
        organization_id=provider.organization_id,
        provider=provider,
        member=sign_in.member,
        session_key=session_key,
        subject=sign_in.subject,
        name_id_format=sign_in.name_id_format,
        provider_session_id=sign_in.provider_session_id,
    )


def _session_store():
    return import_module(settings.SESSION_ENGINE).SessionStore


@transaction.atomic
def sso_sessions_end(*, provider: IdentityProvider, sessions, reason: str) -> int:
    """End these Cadre sessions (the member is signed out at their next request), audited per
    member with `reason` (backchannel_logout, saml_logout)."""
    ended = list(sessions.filter(provider=provider, ended_at__isnull=True).select_related("member"))
    store = _session_store()
    now = timezone.now()
    for record in ended:
        store(session_key=record.session_key).delete()
        record.ended_at = now
        record.end_reason = reason
        record.save(update_fields=["ended_at", "end_reason"])
        audit.record(
            actor=system_actor(provider.organization, label=f"sso:{provider.slug}"),
            action="sso.session_end",
            target=record.member,
            reason=reason,
            after={"provider": provider.slug, "subject": record.subject},
        )
    return len(ended)


# --- OIDC back-channel logout ----------------------------------------------------------------


def logout_token_claims(*, provider: IdentityProvider, logout_token: str) -> dict:
    """The logout_token's claims once OpenID Connect Back-Channel Logout 1.0 §2.6 holds: signed
    with a key of the provider's JWKS (asymmetric algorithms only), iss, aud, iat (recent), exp
    if present, jti (not seen before), the back-channel logout event, sid or sub, no nonce.
    Raises SsoRefused."""
    token = oidc.signed_token(provider, logout_token, invalid="logout_token_invalid")
    registry = jwt.JWTClaimsRegistry(
        leeway=oidc.LEEWAY_SECONDS,
        iss={"essential": True, "value": provider.issuer},
        aud={"essential": True, "value": provider.client_id},
        iat={"essential": True},
        jti={"essential": True},
    )
    try:
        registry.validate(token.claims)
    except ExpiredTokenError:
        raise SsoRefused("expired") from None
    except JoseError as caught:
        raise SsoRefused("logout_token_invalid", str(caught)[:200]) from None
    claims = token.claims
    now = timezone.now().timestamp()
    if not isinstance(claims["iat"], int | float) or not (
        now - _LOGOUT_TOKEN_SECONDS <= claims["iat"] <= now + oidc.LEEWAY_SECONDS
    ):
        raise SsoRefused("logout_token_invalid", "iat is not recent")
    events = claims.get("events")
    if not isinstance(events, dict) or not isinstance(events.get(BACKCHANNEL_EVENT), dict):
        raise SsoRefused("logout_token_invalid", "no back-channel logout event")
    if "nonce" in claims:
        raise SsoRefused("logout_token_invalid", "a logout token carries no nonce")
    if not (claims.get("sid") or claims.get("sub")):
        raise SsoRefused("logout_token_invalid", "neither sid nor sub")
    if not cache.add(
        f"oidc:logout-jti:{provider.issuer}:{claims['jti']}", 1, 2 * _LOGOUT_TOKEN_SECONDS
    ):
        raise SsoRefused("logout_token_invalid", "logout token replayed")
    return claims


def backchannel_logout(*, provider: IdentityProvider, logout_token: str) -> int:
    """Check a logout_token and end the Cadre sessions it names (by sid, else every session of
    its sub); the number ended. A refused token is audited and raises SsoRefused."""
    try:
        claims = logout_token_claims(provider=provider, logout_token=logout_token)
    except SsoRefused as refusal:
        _logout_refused(provider, refusal, action="sso.backchannel_logout_refused")
        raise
    sessions = SsoSession.objects.all()
    if claims.get("sid"):
        sessions = sessions.filter(provider_session_id=str(claims["sid"]))
    if claims.get("sub"):
        sessions = sessions.filter(subject=str(claims["sub"]))
    return sso_sessions_end(provider=provider, sessions=sessions, reason="backchannel_logout")


@transaction.atomic
def _logout_refused(provider: IdentityProvider, refusal: SsoRefused, *, action: str) -> None:
    audit.record(
        actor=system_actor(provider.organization, label=f"sso:{provider.slug}"),
        action=action,
        target=provider,
        reason=refusal.reason,
        after={"provider": provider.slug, "reason": refusal.reason, "detail": refusal.detail},
    )


# --- Cadre's sign-out ------------------------------------------------------------------------


@transaction.atomic
def sso_signout(*, session_key: str | None, post_logout_redirect_uri: str) -> str:
    """A member signs out of Cadre: their SsoSession ends, and the URL that ends the provider's
    session too: an OIDC provider's end_session_endpoint (RP-initiated logout), a SAML IdP's
    single logout service with Cadre's signed LogoutRequest; '' when there is none. Audited
    when a provider session is involved."""
    if not session_key:
        return ""
    record = (
        SsoSession.objects.select_related("provider", "member")
        .filter(session_key=session_key, ended_at__isnull=True)
        .first()
    )
    if record is None:
        return ""
    record.ended_at = timezone.now()
    record.end_reason = "signed_out"
    record.save(update_fields=["ended_at", "end_reason"])
    provider = record.provider
    url = ""
    if provider.kind == IdentityProvider.Kind.OIDC and provider.is_enabled:
        try:
            endpoint = oidc.discovery(provider).get("end_session_endpoint") or ""
        except SsoRefused:
            endpoint = ""
        if endpoint:
            query = {"client_id": provider.client_id}
            if post_logout_redirect_uri:
                query["post_logout_redirect_uri"] = post_logout_redirect_uri
            separator = "&" if "?" in endpoint else "?"
            url = f"{endpoint}{separator}{urlencode(query)}"
    elif provider.kind == IdentityProvider.Kind.SAML and provider.is_enabled:
        # SP-initiated single logout: Cadre's signed LogoutRequest to the IdP, whose
        # LogoutResponse comes back to the SP's logout service (saml_logout_answered).
        try:
            url = saml.logout_request_url(
                provider=provider,
                sp=saml.sp_endpoints(provider),
                name_id=record.subject,
                name_id_format=record.name_id_format,
                session_index=record.provider_session_id,
                relay_state="",
            )
        except Exception:  # an IdP whose metadata went bad: Cadre's own sign-out still holds
            logger.warning("SAML logout request for %s failed", provider.slug, exc_info=True)
            url = ""
    audit.record(
        actor=member_actor(record.member),
        action="sso.signout",
        target=record.member,
        after={"provider": provider.slug, "provider_logout": bool(url)},
    )
    return url


# --- SAML single logout ----------------------------------------------------------------------


def saml_logout(
    *,
    provider: IdentityProvider,
    sp: dict,
    saml_request: str,
    relay_state: str,
    sig_alg: str,
    signature: str,
    binding: str = "redirect",
) -> tuple[str, str]:
    """An IdP-initiated LogoutRequest (HTTP-Redirect or HTTP-POST, signed): end the sessions of
    its NameID (only those of its SessionIndexes when it names some) and return Cadre's
    LogoutResponse as saml.logout_response_send does. A refused request is audited and raises
    SsoRefused."""
    try:
        request = saml.logout_request_read(
            provider=provider,
            sp=sp,
            saml_request=saml_request,
            relay_state=relay_state,
            sig_alg=sig_alg,
            signature=signature,
            binding=binding,
        )
    except saml.SamlRefused as caught:
        refusal = SsoRefused(caught.reason, caught.detail)
        _logout_refused(provider, refusal, action="sso.saml_logout_refused")
        raise refusal from None
    sessions = SsoSession.objects.filter(subject=request["name_id"])
    if request["session_indexes"]:
        sessions = sessions.filter(provider_session_id__in=request["session_indexes"])
    sso_sessions_end(provider=provider, sessions=sessions, reason="saml_logout")
    return saml.logout_response_send(
        provider=provider,
        sp=sp,
        request=request["message"],
        relay_state=relay_state,
        success=True,
        binding=binding,
    )


def saml_logout_answered(
    *,
    provider: IdentityProvider,
    sp: dict,
    saml_response: str,
    relay_state: str,
    sig_alg: str,
    signature: str,
    binding: str = "redirect",
) -> bool:
    """The IdP's LogoutResponse to the LogoutRequest Cadre sent when a member signed out
    (sso_signout); whether the IdP ended its session. A refused response is audited and
    raises SsoRefused (the Cadre session had already ended)."""
    try:
        return saml.logout_response_read(
            provider=provider,
            sp=sp,
            saml_response=saml_response,
            relay_state=relay_state,
            sig_alg=sig_alg,
            signature=signature,
            binding=binding,
        )
    except saml.SamlRefused as caught:
        refusal = SsoRefused(caught.reason, caught.detail)
        _logout_refused(provider, refusal, action="sso.saml_logout_refused")
        raise refusal from None
