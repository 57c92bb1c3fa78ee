"""API authentication: organization API keys (Bearer) and console sessions."""

from __future__ import annotations

import hmac

from rest_framework import authentication, exceptions

from cadre.api.throttles import refuse_if_auth_blocked
from cadre.tenancy.actors import api_key_actor
from cadre.tenancy.models import ApiKey, Member, Organization
from cadre.tenancy.services import api_key_hash, api_key_parse, api_key_touch


class KeyRefused(Exception):
    """A presented API key that may not be used (the message says why)."""


def api_key_resolve(token: str) -> ApiKey:
    """The active key a raw Bearer token names, or KeyRefused: the one lookup every edge that
    takes Cadre keys uses (the REST API here, the MCP server)."""
    parsed = api_key_parse(token.strip())
    if parsed is None:
        raise KeyRefused("Malformed API key.")
    prefix, secret = parsed
    key = ApiKey.objects.select_related("organization", "created_by").filter(prefix=prefix).first()
    if key is None or not hmac.compare_digest(key.key_hash, api_key_hash(secret)):
        raise KeyRefused("Invalid API key.")
    if key.state != "active":
        raise KeyRefused(f"This API key is {key.state}.")
    if key.created_by.status != Member.Status.ACTIVE:
        raise KeyRefused("The member who created this key is deactivated.")
    if key.organization.status != Organization.Status.ACTIVE:
        raise KeyRefused("The organization is suspended.")
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
            raise exceptions.PermissionDenied("You have no active membership in an organization.")
        return result
