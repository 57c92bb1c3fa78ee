"""Sign-in with the IM platforms' own OAuth logins (Feishu/Lark, WeCom, DingTalk, …).

Tenancy knows no platform: each login is a `LoginProvider` its connector platform folder
registers (`cadre.tenancy.services.login_providers`), which builds the authorization page,
turns the callback's one-time `code` into the platform's user (one flat dict of claims, what
"test sign-in" shows) and says what matching uses (`found`). This module holds what every
login shares: the base URLs (the provider's own, else the platform's public ones), the one
guarded HTTP call, the refusal, and the normalization of what matching reads.

Every call goes through the outbound guard (an admin chooses `api_base_url`): the IM
platforms' allow-list applies, the one the connectors' API base URLs use
(CADRE_CONNECTOR_ALLOWED_HOSTS).
"""

from __future__ import annotations

import httpx

from cadre import outbound
from cadre.tenancy.models import IdentityProvider
from cadre.tenancy.services.login_providers import login_provider
from cadre.tenancy.services.refusals import SsoRefused

HTTP_TIMEOUT = 10
# The IM platforms' APIs: the allow-list connectors.base.transport.PLATFORM_APIS names (a login
# and a connector of a private deployment reach the same host).
ALLOW_SETTING = outbound.CONNECTOR_APIS


def refused(reason: str, detail: str = ""):
    """The SsoRefused a login raises (`reason`: a key of refusals.REASONS)."""
    return SsoRefused(reason, detail[:300])


def provider_urls(provider: IdentityProvider) -> tuple[str, str]:
    """(authorization page base, API base): the provider's own, else the platform's public."""
    authorize, api = login_provider(provider.kind).default_urls
    return (
        (provider.authorize_base_url or authorize).rstrip("/"),
        (provider.api_base_url or api).rstrip("/"),
    )


def call(method: str, url: str, **kwargs) -> tuple[int, dict]:
    """One guarded request to a platform's API: (status, JSON object). Raises SsoRefused
    (provider_unreachable, platform_error) for a refused or failed call or a non-object."""
    try:
        with outbound.http_client(allow_setting=ALLOW_SETTING, timeout=HTTP_TIMEOUT) as client:
            response = client.request(method, url, **kwargs)
    except outbound.OutboundRefused as refusal:
        raise refused("provider_unreachable", f"{url.split('?')[0]}: {refusal.message}") from None
    except httpx.HTTPError as caught:
        raise refused("provider_unreachable", f"{url.split('?')[0]}: {caught}") from None
    try:
        body = response.json()
    except ValueError:
        raise refused(
            "platform_error", f"HTTP {response.status_code} from {url.split('?')[0]}"
        ) from None
    if not isinstance(body, dict):
        raise refused("platform_error", f"unexpected answer from {url.split('?')[0]}")
    return response.status_code, body


def authorize_url(
    provider: IdentityProvider, *, redirect_uri: str, state: str, challenge: str
) -> str:
    """The platform's authorization page for this sign-in; ValueError for a kind that is not
    a registered IM login."""
    login = login_provider(provider.kind)
    base, _ = provider_urls(provider)
    return login.authorize_url(
        provider, base=base, redirect_uri=redirect_uri, state=state, challenge=challenge
    )


def user_claims(
    provider: IdentityProvider, *, code: str, verifier: str, redirect_uri: str
) -> tuple[dict, dict]:
    """The platform user's claims (flat) and what matching uses: sub, im_ids, tenant, email,
    email_verified, name, employee_id. Raises SsoRefused."""
    login = login_provider(provider.kind)
    _, api = provider_urls(provider)
    claims = login.user_claims(
        provider, api=api, code=code, verifier=verifier, redirect_uri=redirect_uri
    )
    found = login.found(provider, claims)
    employee_claim = provider.claim_employee_id or login.default_employee_claim
    found["employee_id"] = str(claims.get(employee_claim) or "").strip() if employee_claim else ""
    found["email"] = str(found["email"]).strip()
    found["name"] = str(found["name"]).strip()
    found["sub"] = str(found["sub"])
    found["im_ids"] = [str(value) for value in found["im_ids"]]
    return claims, found
