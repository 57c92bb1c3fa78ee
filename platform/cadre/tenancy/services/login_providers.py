"""The IM platforms' own OAuth logins, as a port: tenancy signs members in through them and
names none; each connector platform folder registers its login here (in
`ConnectorsConfig.ready()`), under the `IdentityProvider.kind` it serves.

A login is not OpenID Connect (no discovery, no id_token): an authorization page returns a
one-time `code` to the callback, and the platform's APIs turn the code into the user.
"""

from __future__ import annotations

from typing import Protocol

from cadre.ports import Registry
from cadre.tenancy.models import IdentityProvider


class LoginProvider(Protocol):
    """One IM platform's login, as `cadre.tenancy.services.im_login` uses it."""

    # The authorization page's and the API's public base URLs (a provider's own win).
    default_urls: tuple[str, str]
    # Which claim carries the employee id by default ("": none; the provider's setting wins).
    default_employee_claim: str

    def authorize_url(
        self,
        provider: IdentityProvider,
        *,
        base: str,
        redirect_uri: str,
        state: str,
        challenge: str,
    ) -> str:
        """The authorization page for this sign-in (`base`: the page's base URL)."""
        ...

    def user_claims(
        self, provider: IdentityProvider, *, api: str, code: str, verifier: str, redirect_uri: str
    ) -> dict:
        """The platform user behind `code`, as one flat dict of claims (`api`: the API's base
        URL). Raises SsoRefused."""
        ...

    def found(self, provider: IdentityProvider, claims: dict) -> dict:
        """What matching uses: sub, im_ids, tenant, email, email_verified, name. Raises
        SsoRefused (wrong tenant, not in the directory, no user id)."""
        ...


LOGIN_PROVIDERS: Registry[LoginProvider] = Registry("tenancy.login_providers")


def login_provider(kind: str) -> LoginProvider:
    """The registered login of an `IdentityProvider.kind`; ValueError when there is none."""
    provider = LOGIN_PROVIDERS.get(kind)
    if provider is None:
        raise ValueError(f"not an IM login: {kind}")
    return provider
