"""The SSO tests' real OpenID Connect provider: django-oauth-toolkit as its own process, started
once per test session (tests/tenancy/dot_provider.py), and Cadre configured for it."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.urls import reverse

from cadre.tenancy.models import IdentityProvider

DOT_SLUG = "dot-idp"  # the IdentityProvider slug Cadre's callback URL is registered with


def forget_provider_keys(issuer: str) -> None:
    """Drop the discovery document and key set Cadre cached for this issuer: the cache outlives
    a test, and a later provider on the same loopback port would meet the earlier one's keys
    (same kid, another key: a refused signature) or skip the fetches a test counts."""
    cache.delete_many([f"oidc:discovery:{issuer}", f"oidc:jwks:{issuer}"])


@pytest.fixture(scope="session")
def dot_idp_process(tmp_path_factory):
    pytest.importorskip("oauth2_provider", reason="django-oauth-toolkit (the dev extra) is needed")
    from tests.tenancy.dot_provider import DotIdp

    idp = DotIdp(tmp_path_factory.mktemp("dot-idp"))
    base = "http://testserver"
    idp.start(
        redirect_uris=[base + reverse("console:sso_callback", args=["acme", DOT_SLUG])],
        post_logout_redirect_uris=[base + reverse("console:login")],
    )
    yield idp
    idp.stop()


@pytest.fixture
def dot(dot_idp_process):
    """django-oauth-toolkit's provider, with Bob as a user whose e-mail it verified. Its users
    outlive a test: a test sets the claims of every user it signs in as."""
    forget_provider_keys(dot_idp_process.issuer)
    dot_idp_process.user("bob", email="bob@acme.test", email_verified=True, name="Bob")
    return dot_idp_process


@pytest.fixture
def dot_provider(org_a, dot):
    """Cadre configured for the DOT provider as an administrator would: issuer, client, scopes."""
    return IdentityProvider.objects.create(
        organization=org_a,
        name="DOT IdP",
        slug=DOT_SLUG,
        issuer=dot.issuer,
        client_id=dot.client_id,
        client_secret=dot.client_secret,
        scopes="openid email profile groups",
    )
