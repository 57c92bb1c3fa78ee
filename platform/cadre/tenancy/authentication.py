"""API authentication: organization API keys (Bearer), console sessions and SCIM tokens."""

from __future__ import annotations

import hmac

from django.utils import translation
from django.utils.translation import gettext
from rest_framework import authentication, exceptions

from cadre.api.throttles import (
    AuthFailureThrottle,
    blocked_message,
    record_auth_failure,
    refuse_if_auth_blocked,
)
from cadre.tenancy.actors import Actor, api_key_actor
from cadre.tenancy.languages import request_language
from cadre.tenancy.models import ApiKey, Member, Organization, ScimToken
from cadre.tenancy.roles import permissions_for_roles
from cadre.tenancy.services import (
    api_key_hash,
    api_key_parse,
    api_key_touch,
    scim_token_resolve,
)


class KeyRefused(Exception):
    """A presented API key that may not be used (the message says why)."""


def api_key_resolve(token: str) -> ApiKey:
    """The active key a raw Bearer token names, or KeyRefused: the one lookup every edge that
    takes Cadre keys uses (the REST API here, the MCP server)."""
    parsed = api_key_parse(token.strip())
    if parsed is None:
        raise KeyRefused(gettext("Malformed API key."))
    prefix, secret = parsed
    key = ApiKey.objects.select_related("organization", "created_by").filter(prefix=prefix).first()
    if key is None or not hmac.compare_digest(key.key_hash, api_key_hash(secret)):
        raise KeyRefused(gettext("Invalid API key."))
    if key.state != "active":
        raise KeyRefused(
            {
                "revoked": gettext("This API key is revoked."),
                "expired": gettext("This API key is expired."),
            }.get(key.state)
            or gettext("This API key is %(state)s.") % {"state": key.state}
        )
    if key.created_by.status != Member.Status.ACTIVE:
        raise KeyRefused(gettext("The member who created this key is deactivated."))
    if key.organization.status != Organization.Status.ACTIVE:
        raise KeyRefused(gettext("The organization is suspended."))
    return key


class KeyPrincipal:
    """request.user for API-key requests (DRF expects an authenticated user object)."""

    is_authenticated = True
    is_anonymous = False

    def __init__(self, key: ApiKey):
        self.key = key
        self.pk = None

    def __str__(self) -> str:
        return str(self.key)


class ApiKeyAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        scheme, _, token = header.partition(" ")
        if scheme.lower() != self.keyword.lower():
            return None
        # An address past its failed-auth limit may not try keys at all (429, before the
        # lookup), so a brute force cannot tell a right guess from a wrong one.
        refuse_if_auth_blocked(request)
        try:
            key = api_key_resolve(token)
        except KeyRefused as refused:
            raise exceptions.AuthenticationFailed(str(refused)) from None
        api_key_touch(key, request.META.get("REMOTE_ADDR"))
        request._request.actor = api_key_actor(key)
        # The answer speaks the key member's language (the middleware could not know the key).
        language = request_language(request._request, key.created_by)
        translation.activate(language)
        request._request.LANGUAGE_CODE = language
        return KeyPrincipal(key), key

    def authenticate_header(self, request):
        return self.keyword


class SessionAuthentication(authentication.SessionAuthentication):
    """A signed-in console user acting in their current organization (CSRF enforced)."""

    def authenticate(self, request):
        result = super().authenticate(request)
        if result is None:
            return None
        if getattr(request._request, "actor", None) is None:
            raise exceptions.PermissionDenied(
                gettext("You have no active membership in an organization.")
            )
        return result


# --- SCIM tokens ----------------------------------------------------------------------------

# What provisioning does: read and write members and departments. A token holds no more than
# this, and no more than its creator holds now (as an API key is capped by its creator).
SCIM_PERMISSIONS = frozenset(
    {"member.view", "member.manage", "department.view", "department.manage"}
)


class ScimTokenRefused(Exception):
    """A SCIM request without a usable token: 401, or 429 while its address is throttled."""

    def __init__(self, message: str, status: int = 401, retry_after: float | None = None):
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


def scim_token_authenticate(request) -> ScimToken:
    """The SCIM token a request's `Authorization: Bearer` presents, or ScimTokenRefused.

    Refusals count against the caller's address in the same failed-authentication budget as
    API keys (CADRE_API_RATE_AUTH_FAILURE); once over it every token is refused 429 before
    the lookup, a right one too, so a brute force cannot tell a hit from a miss.
    """
    wait = AuthFailureThrottle().wait(request)
    if wait is not None:
        raise ScimTokenRefused(blocked_message(wait), status=429, retry_after=wait)
    scheme, _, secret = request.headers.get("Authorization", "").partition(" ")
    token = scim_token_resolve(secret.strip()) if scheme.lower() == "bearer" else None
    message = gettext("A valid SCIM bearer token is required.")
    creator = token.created_by if token is not None else None
    if creator is not None and creator.status != Member.Status.ACTIVE:
        # As for API keys: a token outlives no one's authority.
        token = None
        message = gettext("The member who created this SCIM token is deactivated.")
    if token is None:
        wait = record_auth_failure(request)
        if wait is not None:
            raise ScimTokenRefused(blocked_message(wait), status=429, retry_after=wait)
        raise ScimTokenRefused(message)
    return token


def scim_token_actor(token: ScimToken) -> Actor:
    """Who a SCIM request acts as: the token, within its creator's current permissions.

    The creator is the token's `member`, so the member services' owner rules see who stands
    behind it: only an owner's token may deactivate, reactivate or delete an owner, and a
    token made on the command line (no creator) never acts as one.
    """
    creator = token.created_by
    if creator is None:
        permissions = SCIM_PERMISSIONS
    elif creator.is_active:
        permissions = SCIM_PERMISSIONS & permissions_for_roles(creator.roles)
    else:
        permissions = frozenset()
    return Actor(
        kind="scim_token",
        organization=token.organization,
        permissions=permissions,
        member=creator,
        label=f"SCIM token {token.name} ({token.prefix})",
    )
