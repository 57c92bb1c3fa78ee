"""Single sign-on: OpenID Connect (discovery, code + PKCE, id_token checks), SAML 2.0
(services/saml.py) and the IM platforms' OAuth logins (services/im_login.py); matching members,
groups → roles, test sign-in, audit."""

from __future__ import annotations

import base64
import hashlib
import secrets
from dataclasses import dataclass

import httpx
from authlib.integrations.httpx_client import OAuth2Client
from django.core.cache import cache
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext
from joserfc import jws, jwt
from joserfc.errors import (
    BadSignatureError,
    ExpiredTokenError,
    InvalidClaimError,
    InvalidKeyIdError,
    JoseError,
    MissingClaimError,
)
from joserfc.jwk import KeySet

from cadre import outbound
from cadre.errors import InvalidInput, NotPermitted
from cadre.governance import audit
from cadre.tenancy.actors import member_actor, system_actor
from cadre.tenancy.models import (
    IdentityProvider,
    IMIdentity,
    Member,
    Organization,
    SsoIdentity,
    SsoSession,
)
from cadre.tenancy.services import claim_roles, im_login, logins, saml
from cadre.tenancy.services.common import save_unique, snapshot
from cadre.tenancy.services.members import member_create
from cadre.tenancy.services.refusals import REASONS, SsoRefused

_DISCOVERY_SECONDS = 3600
_NONCE_SECONDS = 24 * 3600
LEEWAY_SECONDS = 60
_HTTP_TIMEOUT = 10
# Algorithms accepted for id_tokens: asymmetric only, so a leaked client secret cannot forge one.
_ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "ES256", "ES384"]

# --- provider metadata ---------------------------------------------------------------------


def _get_json(url: str) -> dict:
    """A discovery document or key set, through the outbound guard: public addresses only
    unless CADRE_OIDC_ALLOWED_HOSTS allows the host, connected to the checked address, no
    redirects. Anyone may start a sign-in, so this is a request anyone can make Cadre send."""
    try:
        with outbound.http_client(
            allow_setting=outbound.OIDC_PROVIDERS, timeout=_HTTP_TIMEOUT
        ) as client:
            response = client.get(url)
        response.raise_for_status()
        return response.json()
    except outbound.OutboundRefused as refused:
        raise SsoRefused("provider_unreachable", f"{url}: {refused.message}") from None
    except (httpx.HTTPError, ValueError) as caught:
        raise SsoRefused("provider_unreachable", f"{url}: {caught}") from None


def discovery(provider: IdentityProvider) -> dict:
    """The provider's discovery document (cached for an hour)."""
    key = f"oidc:discovery:{provider.issuer}"
    document = cache.get(key)
    if document is None:
        url = provider.issuer.rstrip("/") + "/.well-known/openid-configuration"
        document = _get_json(url)
        if document.get("issuer") != provider.issuer:
            raise SsoRefused("wrong_issuer", f"discovery names issuer {document.get('issuer')!r}")
        cache.set(key, document, _DISCOVERY_SECONDS)
    return document


def _key_set(provider: IdentityProvider, *, refresh: bool = False) -> KeySet:
    key = f"oidc:jwks:{provider.issuer}"
    keys = None if refresh else cache.get(key)
    if keys is None:
        keys = _get_json(discovery(provider)["jwks_uri"])
        cache.set(key, keys, _DISCOVERY_SECONDS)
    return KeySet.import_key_set(keys)


def _client(provider: IdentityProvider, redirect_uri: str) -> OAuth2Client:
    # The token endpoint is a URL the discovery document names: the same guard.
    return OAuth2Client(
        client_id=provider.client_id,
        client_secret=provider.client_secret or None,
        scope=provider.scopes,
        redirect_uri=redirect_uri,
        code_challenge_method="S256",
        timeout=_HTTP_TIMEOUT,
        transport=outbound.transport(allow_setting=outbound.OIDC_PROVIDERS, library="httpx2"),
        trust_env=False,
    )


# --- the flow ------------------------------------------------------------------------------


def sso_begin(
    *, provider: IdentityProvider, redirect_uri: str, test: bool = False, sp: dict | None = None
) -> tuple[str, dict]:
    """The provider's authorization URL (SAML: its sign-in URL with an AuthnRequest) and what
    the callback needs (kept in the session).

    `test`: a test sign-in from the console: the callback shows the claims and what matching
    and the role mapping would do, and signs no one in. `sp`: SAML only, Cadre's entity id,
    ACS and SLO URLs for this provider."""
    state = secrets.token_urlsafe(32)
    nonce = secrets.token_urlsafe(32)
    verifier = secrets.token_urlsafe(48)
    if provider.kind == IdentityProvider.Kind.SAML:
        try:
            url, request_id = saml.authn_request(provider=provider, sp=sp, relay_state=state)
        except saml.SamlRefused as refusal:
            raise SsoRefused(refusal.reason, refusal.detail) from None
        pending = {"provider": provider.pk, "state": state, "request_id": request_id, "sp": sp}
        return url, {**pending, "nonce": "", "verifier": "", "test": test}
    if provider.kind != IdentityProvider.Kind.OIDC:
        digest = hashlib.sha256(verifier.encode()).digest()
        challenge = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
        url = im_login.authorize_url(
            provider, redirect_uri=redirect_uri, state=state, challenge=challenge
        )
        pending = {"provider": provider.pk, "state": state, "nonce": "", "verifier": verifier}
        return url, {**pending, "test": test}
    with _client(provider, redirect_uri) as client:
        url, _ = client.create_authorization_url(
            discovery(provider)["authorization_endpoint"],
            state=state,
            nonce=nonce,
            code_verifier=verifier,
        )
    pending = {"provider": provider.pk, "state": state, "nonce": nonce, "verifier": verifier}
    return url, {**pending, "test": test}


def signed_token(provider: IdentityProvider, token: str, *, invalid: str = "invalid_token"):
    """A JWT from the provider once its signature holds with a key of its JWKS (asymmetric
    algorithms only); its claims are not checked yet. Raises SsoRefused (`invalid`: the reason
    for a malformed token)."""
    try:
        header = jws.extract_compact(token.encode()).protected
    except (JoseError, ValueError):
        raise SsoRefused(invalid) from None
    keys = _key_set(provider)
    if header.get("kid") and not any(k.kid == header["kid"] for k in keys.keys):
        # The provider rotated its keys since we cached them: read them again, once.
        keys = _key_set(provider, refresh=True)
    try:
        return jwt.decode(token, keys, algorithms=_ALGORITHMS)
    except InvalidKeyIdError:
        raise SsoRefused("unknown_key") from None
    except BadSignatureError:
        raise SsoRefused("bad_signature") from None
    except (JoseError, ValueError):
        raise SsoRefused(invalid) from None


def id_token_claims(*, provider: IdentityProvider, id_token: str, nonce: str) -> dict:
    """The id_token's claims once its signature, issuer, audience, expiry and nonce hold."""
    token = signed_token(provider, id_token)
    registry = jwt.JWTClaimsRegistry(
        leeway=LEEWAY_SECONDS,
        iss={"essential": True, "value": provider.issuer},
        aud={"essential": True, "value": provider.client_id},
        exp={"essential": True},
        sub={"essential": True},
        nonce={"essential": True},
    )
    try:
        registry.validate(token.claims)
    except ExpiredTokenError:
        raise SsoRefused("expired") from None
    except (InvalidClaimError, MissingClaimError) as caught:
        claim = getattr(caught, "claim", "")
        reason = {"iss": "wrong_issuer", "aud": "wrong_audience", "exp": "expired"}
        raise SsoRefused(reason.get(claim, "invalid_token"), str(caught)) from None
    claims = token.claims
    if not secrets.compare_digest(str(claims["nonce"]), nonce):
        raise SsoRefused("nonce_mismatch")
    # An id_token is good for one sign-in: remember its nonce for as long as it could be shown.
    if not cache.add(f"oidc:nonce:{provider.issuer}:{nonce}", 1, _NONCE_SECONDS):
        raise SsoRefused("nonce_replayed")
    return claims


def _exchange(*, provider: IdentityProvider, pending: dict, code: str, redirect_uri: str) -> str:
    try:
        with _client(provider, redirect_uri) as client:
            token = client.fetch_token(
                discovery(provider)["token_endpoint"],
                code=code,
                code_verifier=pending["verifier"],
            )
    except httpx.HTTPError as caught:
        raise SsoRefused("provider_unreachable", str(caught)) from None
    except Exception as caught:  # Authlib raises its OAuth errors for a refused exchange
        raise SsoRefused("token_exchange_failed", str(caught)[:200]) from None
    if not token.get("id_token"):
        raise SsoRefused("token_exchange_failed", "no id_token in the token response")
    return token["id_token"]


def _oidc_found(provider: IdentityProvider, claims: dict) -> dict:
    email = str(claims.get(provider.claim_email) or "").strip()
    return {
        "sub": str(claims["sub"]),
        "im_ids": [],
        "tenant": "",
        "email": email,
        "email_verified": claims.get("email_verified") is True,
        "name": str(claims.get(provider.claim_name) or "").strip(),
        "employee_id": str(claims.get(provider.claim_employee_id) or "").strip()
        if provider.claim_employee_id
        else "",
    }


def _session_facts(provider: IdentityProvider, claims: dict) -> dict:
    """What the provider calls this sign-in's session, for its logout to find it."""
    if provider.kind == IdentityProvider.Kind.SAML:
        return {
            "name_id_format": claims.get("name_id_format", ""),
            "provider_session_id": claims.get("session_index", ""),
        }
    return {"name_id_format": "", "provider_session_id": str(claims.get("sid") or "")}


def sso_claims(
    *, provider: IdentityProvider, pending: dict, code: str, redirect_uri: str
) -> tuple[dict, dict]:
    """The account's claims as the provider sent them, and the facts matching uses (`found`:
    sub, im_ids, tenant, email, email_verified, name, employee_id, groups, session). SAML: `code`
    is the key the posted response was kept under. Raises SsoRefused."""
    if provider.kind == IdentityProvider.Kind.SAML:
        try:
            claims, found = saml.response_claims(provider=provider, pending=pending, code=code)
        except saml.SamlRefused as refusal:
            raise SsoRefused(refusal.reason, refusal.detail) from None
    elif provider.kind == IdentityProvider.Kind.OIDC:
        id_token = _exchange(
            provider=provider, pending=pending, code=code, redirect_uri=redirect_uri
        )
        claims = id_token_claims(provider=provider, id_token=id_token, nonce=pending["nonce"])
        found = _oidc_found(provider, claims)
    else:
        claims, found = im_login.user_claims(
            provider, code=code, verifier=pending["verifier"], redirect_uri=redirect_uri
        )
    found["groups"] = claim_roles.groups_of(provider, claims)
    found["session"] = _session_facts(provider, claims)
    return claims, _found_check(found)


def _storable(text: str) -> bool:
    """Whether PostgreSQL can keep the text: no NUL byte, no lone surrogate."""
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _found_check(found: dict) -> dict:
    """The account's facts once each can be stored as sent; the display name is shortened to
    fit. The provider (whose base URLs an administrator sets) may send anything: a value Cadre
    would have to alter to keep is refused (`claims_invalid`), never a 500. The detail names
    the fact, never its value, since it is kept as the provider's last error."""
    texts = {
        "sub": found["sub"],
        "email": found["email"],
        "name": found["name"],
        "employee_id": found["employee_id"],
        "tenant": found["tenant"],
        **{f"im_ids[{i}]": value for i, value in enumerate(found["im_ids"])},
        **{f"groups[{i}]": value for i, value in enumerate(found["groups"])},
        **{f"session.{key}": value for key, value in found["session"].items()},
    }
    for fact, text in texts.items():
        if not _storable(text):
            raise SsoRefused("claims_invalid", f"{fact}: a NUL byte or a lone surrogate")
    limits = {
        "sub": SsoIdentity._meta.get_field("subject").max_length,
        "email": Member._meta.get_field("email").max_length,
        "employee_id": Member._meta.get_field("employee_no").max_length,
        "tenant": IMIdentity._meta.get_field("tenant_key").max_length,
        **{
            fact: IMIdentity._meta.get_field("platform_user_id").max_length
            for fact in texts
            if fact.startswith("im_ids")
        },
        **{
            fact: SsoSession._meta.get_field("provider_session_id").max_length
            for fact in texts
            if fact.startswith("session.")
        },
    }
    for fact, limit in limits.items():
        if len(texts[fact]) > limit:
            raise SsoRefused("claims_invalid", f"{fact}: longer than {limit} characters")
    found["name"] = found["name"][: Member._meta.get_field("display_name").max_length]
    return found


def _by_im_identity(provider: IdentityProvider, found: dict) -> Member | None:
    """The member whose IM identity on this platform (as the connectors record it) is one of
    the account's ids: open_id / union_id / user_id, userid, unionId…"""
    if not found["im_ids"]:
        return None
    identities = IMIdentity.objects.filter(
        organization_id=provider.organization_id,
        platform=provider.kind,
        platform_user_id__in=found["im_ids"],
    )
    if found["tenant"]:
        identities = identities.filter(tenant_key__in=["", found["tenant"]])
    member_ids = set(identities.values_list("member_id", flat=True))
    if len(member_ids) > 1:
        raise SsoRefused(
            "ambiguous_user", f"IM ids {found['im_ids']} name {len(member_ids)} members"
        )
    if not member_ids:
        return None
    return Member.objects.get(pk=member_ids.pop())


def _match(provider: IdentityProvider, found: dict) -> tuple[Member | None, str]:
    """The member the account names and how it was found: the provider account linked at an
    earlier sign-in; for IM logins then the member's IM identity, verified e-mail, employee id;
    for OIDC and SAML then employee id, verified e-mail."""
    linked = (
        SsoIdentity.objects.select_related("member")
        .filter(provider=provider, subject=found["sub"])
        .first()
    )
    if linked is not None:
        return linked.member, "linked"
    members = Member.objects.filter(organization_id=provider.organization_id)
    by_email = None
    if found["email"] and found["email_verified"]:
        by_email = members.filter(email__iexact=found["email"]).first()
    by_employee = None
    if found["employee_id"]:
        by_employee = members.filter(employee_no=found["employee_id"]).first()
    if provider.kind in (IdentityProvider.Kind.OIDC, IdentityProvider.Kind.SAML):
        order = [(by_employee, "employee_id"), (by_email, "email")]
    else:
        order = [
            (_by_im_identity(provider, found), "im_identity"),
            (by_email, "email"),
            (by_employee, "employee_id"),
        ]
    for member, how in order:
        if member is not None:
            return member, how
    return None, ""


def _user_for(member: Member):
    """The member's sign-in account. A member who never signed in gets a new login of their
    organization's (no password; services/logins.py), never an existing one found by e-mail:
    this provider vouches for this organization's members only, and a login found by e-mail
    may be another organization's member (whose memberships would come with it) or an
    operator's account. A person in two organizations links them by accepting an invitation
    while signed in."""
    if member.user_id is not None:
        return member.user
    user = logins.member_login_create(member=member)
    member.user = user
    if member.status == Member.Status.INVITED:
        member.status = Member.Status.ACTIVE
    member.save(update_fields=["user", "status"])
    return user


def _refusal_for(
    provider: IdentityProvider, member: Member | None, found: dict, matched_by: str
) -> str:
    """'' when the matched (or JIT-creatable) account may sign in, else the reason code."""
    if member is None:
        if not provider.jit_enabled:
            return "unknown_user"
        if not (found["email"] and found["email_verified"]):
            return "email_unverified"
        return ""
    if member.status == Member.Status.DEACTIVATED:
        return "member_inactive"
    if member.sso_link_held and matched_by != "linked":
        # Someone else changed what this member is found by (Member.sso_link_held).
        return "link_held"
    return ""


@dataclass(frozen=True)
class SignIn:
    """A completed sign-in: the member, and the account and session at the provider."""

    member: Member
    subject: str
    name_id_format: str
    provider_session_id: str


@transaction.atomic
def sso_complete(
    *, provider: IdentityProvider, pending: dict, code: str, redirect_uri: str
) -> SignIn:
    """Exchange the code (SAML: check the posted response), check the account, match (or, if
    allowed, create) the member, apply the groups → roles mapping; audited.

    Raises SsoRefused; the caller records it with `sso_failure_record` (outside this
    transaction, which a refusal rolls back)."""
    _claims, found = sso_claims(
        provider=provider, pending=pending, code=code, redirect_uri=redirect_uri
    )
    member, matched_by = _match(provider, found)
    system = system_actor(provider.organization, label=f"sso:{provider.slug}")
    refusal = _refusal_for(provider, member, found, matched_by)
    if refusal:
        raise SsoRefused(refusal, found["email"] or found["sub"])
    if member is None:
        member = member_create(
            actor=system,
            display_name=found["name"] or found["email"],
            email=found["email"],
            employee_no=found["employee_id"],
            roles=["employee"],
        )
        if found["im_ids"]:
            # The connectors find the new member by their IM id from now on.
            IMIdentity.objects.get_or_create(
                organization_id=provider.organization_id,
                platform=provider.kind,
                tenant_key=found["tenant"],
                platform_user_id=found["im_ids"][0],
                defaults={"member": member, "display_name": found["name"][:150]},
            )
        audit.record(
            actor=system,
            action="sso.jit_create",
            target=member,
            after={"provider": provider.slug, "email": found["email"], "sub": found["sub"]},
        )
        matched_by = "created"
    claim_roles.roles_apply(provider=provider, member=member, groups=found["groups"], actor=system)
    _user_for(member)
    if matched_by == "linked" and member.sso_link_held:
        # The member signed in through an account already theirs: what others set is theirs.
        member.sso_link_held = False
        member.save(update_fields=["sso_link_held"])
    identity, newly_linked = SsoIdentity.objects.get_or_create(
        provider=provider,
        subject=found["sub"],
        defaults={"organization_id": provider.organization_id, "member": member},
    )
    identity.last_signed_in_at = timezone.now()
    identity.save(update_fields=["last_signed_in_at"])
    audit.record(
        actor=member_actor(member),
        action="sso.signin",
        target=member,
        after={
            "provider": provider.slug,
            "sub": found["sub"],
            "email": found["email"],
            "matched_by": matched_by,
            "newly_linked": newly_linked,
        },
    )
    return SignIn(member=member, subject=found["sub"], **found["session"])


def sso_preview(*, provider: IdentityProvider, pending: dict, code: str, redirect_uri: str) -> dict:
    """A test sign-in: the claims received and what a real sign-in would do (match, refusal,
    roles), without signing in, creating, linking or changing anything. A refusal while
    reading the account raises SsoRefused like a sign-in."""
    claims, found = sso_claims(
        provider=provider, pending=pending, code=code, redirect_uri=redirect_uri
    )
    try:
        member, matched_by = _match(provider, found)
    except SsoRefused as refusal:
        member, matched_by, refusal_reason = None, "", refusal.reason
    else:
        refusal_reason = _refusal_for(provider, member, found, matched_by)
    roles = claim_roles.roles_plan(provider, member, found["groups"])
    return {
        "claims": claims,
        "found": found,
        "member": member,
        "matched_by": matched_by or ("created" if not refusal_reason else ""),
        "refusal": refusal_reason,
        "refusal_message": str(REASONS.get(refusal_reason, "")),
        "roles": roles,
    }


@transaction.atomic
def sso_test_record(*, provider: IdentityProvider, actor, preview: dict | None, refusal=None):
    """Audit a test sign-in (its outcome only, never the claims); a refusal is kept as the
    provider's last error, like a real sign-in's."""
    if refusal is not None:
        provider.last_error = _last_error(refusal)
        provider.last_error_at = timezone.now()
        provider.save(update_fields=["last_error", "last_error_at"])
    outcome = refusal.reason if refusal is not None else (preview["refusal"] or "would_sign_in")
    audit.record(
        actor=actor,
        action="sso.test_signin",
        target=provider,
        reason=outcome,
        after={"provider": provider.slug, "outcome": outcome},
    )


def _last_error(refusal: SsoRefused) -> str:
    """The refusal as the provider's last error: its detail quotes what the browser or the
    provider sent (an `error` parameter, a RelayState), NUL bytes and lone surrogates
    included, which are kept escaped."""
    text = f"{refusal.reason}: {refusal.detail}".replace("\x00", "\\x00")
    return text.encode("utf-8", "backslashreplace").decode("utf-8")[:500]


@transaction.atomic
def sso_failure_record(*, provider: IdentityProvider, refusal: SsoRefused) -> None:
    """Audit a refused sign-in with its reason code and keep it as the provider's last error."""
    provider.last_error = _last_error(refusal)
    provider.last_error_at = timezone.now()
    provider.save(update_fields=["last_error", "last_error_at"])
    audit.record(
        actor=system_actor(provider.organization, label=f"sso:{provider.slug}"),
        action="sso.signin_failed",
        target=provider,
        reason=refusal.reason,
        after={"provider": provider.slug, "reason": refusal.reason},
    )


# --- password sign-in under "SSO required" ---------------------------------------------------


def sso_required(organization: Organization) -> bool:
    return bool((organization.settings or {}).get("sso_required"))


@transaction.atomic
def password_signin_screen(*, user) -> str:
    """'' when `user` may sign in with a password, else the refusal's reason code.

    A member of an organization that requires SSO is refused, except its owners (the
    break-glass account, for when the provider is down), whose password sign-in is audited."""
    members = Member.objects.select_related("organization").filter(
        user=user, status=Member.Status.ACTIVE, organization__status=Organization.Status.ACTIVE
    )
    break_glass = []
    for member in members:
        if not sso_required(member.organization):
            continue
        if "owner" not in member.roles:
            audit.record(
                actor=system_actor(member.organization, label="sso"),
                action="sso.password_refused",
                target=member,
                reason="sso_required",
            )
            return "sso_required"
        break_glass.append(member)
    for member in break_glass:
        audit.record(
            actor=member_actor(member),
            action="sso.break_glass",
            target=member,
            reason="password sign-in of an owner while SSO is required",
        )
    return ""


@transaction.atomic
def organization_sso_require(*, actor, required: bool) -> Organization:
    """Turn "SSO required" on or off for the actor's organization (owners only)."""
    organization = actor.organization
    if actor.member is None or "owner" not in actor.member.roles:
        raise NotPermitted(gettext("Only an owner may change whether SSO is required."))
    before = sso_required(organization)
    organization.settings = {**(organization.settings or {}), "sso_required": bool(required)}
    organization.save(update_fields=["settings"])
    audit.record(
        actor=actor,
        action="organization.sso_required",
        target=organization,
        before={"sso_required": before},
        after={"sso_required": bool(required)},
    )
    return organization


# --- managing providers ----------------------------------------------------------------------

PROVIDER_FIELDS = (
    "name",
    "slug",
    "kind",
    "issuer",
    "authorize_base_url",
    "api_base_url",
    "agent_id",
    "tenant_key",
    "client_id",
    "scopes",
    "saml_metadata_url",
    "saml_metadata_xml",
    "claim_email",
    "claim_name",
    "claim_employee_id",
    "claim_groups",
    "group_roles",
    "jit_enabled",
    "is_enabled",
)


# Audited: the metadata as its entity id, not its XML.
_AUDITED_FIELDS = (
    *(name for name in PROVIDER_FIELDS if name != "saml_metadata_xml"),
    "saml_entity_id",
)


def _check_manage(actor) -> None:
    if not actor.has("organization.manage"):
        raise NotPermitted(gettext("Identity providers need the organization.manage permission."))


@transaction.atomic
def identity_provider_save(
    *, actor, provider: IdentityProvider | None = None, client_secret: str = "", **fields
) -> IdentityProvider:
    """Create (provider None) or change an identity provider; the secret is write-only: an
    empty one keeps the stored value. Audited without the secret."""
    _check_manage(actor)
    creating = provider is None
    if creating:
        provider = IdentityProvider(organization=actor.organization)
    elif provider.organization_id != actor.organization.pk:
        raise NotPermitted(gettext("That identity provider belongs to another organization."))
    before = {} if creating else snapshot(provider, _AUDITED_FIELDS)
    if "group_roles" in fields:
        fields["group_roles"] = claim_roles.mapping_check(fields["group_roles"], actor=actor)
    for name, value in fields.items():
        if name not in PROVIDER_FIELDS:
            raise ValueError(f"unknown identity provider field {name!r}")
        setattr(provider, name, value)
    if provider.kind == IdentityProvider.Kind.OIDC and not provider.issuer:
        raise InvalidInput(
            gettext("An OpenID Connect provider needs its issuer."),
            details={"issuer": [gettext("Required.")]},
        )
    if fields.get("api_base_url"):
        # An IM login's API is called with the app secret and the user's code: a URL at (or
        # resolving to) metadata or an internal host not allowed is refused now, with a reason,
        # rather than only at the first sign-in (where the guard refuses the fetch anyway).
        provider.api_base_url = outbound.check_url(
            fields["api_base_url"], allow_setting=outbound.CONNECTOR_APIS, field="api_base_url"
        )
    if provider.kind == IdentityProvider.Kind.WECOM and not provider.agent_id:
        raise InvalidInput(
            gettext("A WeCom login needs the application's AgentId."),
            details={"agent_id": [gettext("Required.")]},
        )
    if provider.kind == IdentityProvider.Kind.SAML:
        if "saml_metadata_xml" in fields or not provider.saml_entity_id:
            # The metadata as fetched from saml_metadata_url (by the caller, through the
            # outbound-URL guard) or pasted: checked and read now, never at sign-in.
            facts = saml.metadata_read(provider.saml_metadata_xml)
            provider.saml_entity_id = facts["entity_id"]
            provider.saml_metadata_read_at = timezone.now()
        if creating or not provider.saml_sp_certificate:
            # Cadre's own SP key pair, made once (services/saml.py rotates it). A new row's
            # field holds its database default (an expression, truthy) until it is saved.
            provider.saml_sp_private_key, provider.saml_sp_certificate = saml.sp_key_pair_new(
                f"Cadre SP {provider.organization.slug}/{provider.slug}"
            )
    elif not provider.client_id:
        raise InvalidInput(
            gettext("This provider needs its client id."),
            details={"client_id": [gettext("Required.")]},
        )
    if client_secret:
        provider.client_secret = client_secret
    save_unique(provider, gettext("Another identity provider already has this slug."), "slug")
    after = snapshot(provider, _AUDITED_FIELDS)
    if client_secret:
        after["client_secret_changed"] = True
    cache.delete(f"oidc:discovery:{provider.issuer}")
    audit.record(
        actor=actor,
        action="identity_provider.create" if creating else "identity_provider.update",
        target=provider,
        before=before,
        after=after,
    )
    return provider
