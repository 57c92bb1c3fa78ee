"""OIDC discovery, keys and token endpoint behind the outbound guard (issue #29, finding 9): an
anonymous visit to a sign-in link makes Cadre fetch the issuer's discovery document, so an
issuer on loopback is fetched only where CADRE_OIDC_ALLOWED_HOSTS allows it, and a discovery
document cannot send Cadre to a link-local or metadata address even from an allowed issuer."""

from __future__ import annotations

import json
import threading
from http.server import ThreadingHTTPServer

import pytest
from django.core.cache import cache
from django.urls import reverse

from cadre.tenancy.models import IdentityProvider
from cadre.tenancy.services import oidc
from tests.tenancy.loopback import QuietHandler

pytestmark = pytest.mark.django_db


class _Issuer(QuietHandler):
    """A discovery document naming the endpoints the test chooses; every request recorded."""

    def do_GET(self):
        self.server.received.append(self.path)
        issuer = f"http://127.0.0.1:{self.server.server_address[1]}"
        document = {
            "issuer": issuer,
            "authorization_endpoint": f"{issuer}/authorize",
            "token_endpoint": self.server.token_endpoint or f"{issuer}/token",
            "jwks_uri": self.server.jwks_uri or f"{issuer}/jwks",
        }
        if self.path == "/.well-known/openid-configuration":
            self._send(200, json.dumps(document).encode())
        else:
            self._send(200, b'{"keys": []}')


@pytest.fixture
def issuer():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Issuer)
    server.received, server.jwks_uri, server.token_endpoint = [], None, None
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def provider(org_a, issuer):
    url = f"http://127.0.0.1:{issuer.server_address[1]}"
    cache.delete(f"oidc:discovery:{url}")
    cache.delete(f"oidc:jwks:{url}")
    return IdentityProvider.objects.create(
        organization=org_a,
        name="Loopback IdP",
        slug="loopback",
        issuer=url,
        client_id="cadre",
        client_secret="s3cret",
    )


def _start(client, provider):
    return client.get(
        reverse("console:sso_start", args=[provider.organization.slug, provider.slug])
    )


def test_an_anonymous_sign_in_link_does_not_make_cadre_fetch_a_loopback_issuer(
    client, provider, issuer, settings
):
    settings.CADRE_OIDC_ALLOWED_HOSTS = []
    response = _start(client, provider)
    assert response.status_code == 403
    assert 'data-reason="provider_unreachable"' in response.content.decode()
    assert issuer.received == []


def test_an_allowed_issuer_is_fetched(client, provider, issuer, settings):
    settings.CADRE_OIDC_ALLOWED_HOSTS = ["127.0.0.1"]
    response = _start(client, provider)
    assert response.status_code == 302
    assert issuer.received == ["/.well-known/openid-configuration"]


@pytest.mark.parametrize(
    "jwks_uri",
    ["http://169.254.169.254/latest/meta-data/", "http://[fd00:ec2::254]/", "http://0.0.0.0:1/"],
)
def test_keys_at_a_metadata_address_are_refused_even_from_an_allowed_issuer(
    provider, issuer, settings, jwks_uri
):
    settings.CADRE_OIDC_ALLOWED_HOSTS = ["*"]
    issuer.jwks_uri = jwks_uri
    with pytest.raises(oidc.SsoRefused) as refused:
        oidc._key_set(provider, refresh=True)
    assert refused.value.reason == "provider_unreachable"
    assert "never calls" in refused.value.detail
    assert issuer.received == ["/.well-known/openid-configuration"]


def test_a_token_endpoint_at_a_metadata_address_is_refused(provider, issuer, settings):
    settings.CADRE_OIDC_ALLOWED_HOSTS = ["127.0.0.1"]
    issuer.token_endpoint = "http://169.254.169.254/token"
    with pytest.raises(oidc.SsoRefused) as refused:
        oidc._exchange(
            provider=provider,
            pending={"verifier": "v" * 43},
            code="code",
            redirect_uri="http://testserver/sso/acme/loopback/callback/",
        )
    assert refused.value.reason == "token_exchange_failed"
    assert "never calls" in refused.value.detail


@pytest.mark.parametrize(
    ("issuer", "allowed"),
    [
        ("http://127.0.0.1:8080/realms/acme", []),
        ("http://169.254.169.254/latest", ["*"]),
        ("http://[fd00:ec2::254]/", ["*"]),
    ],
)
def test_the_console_refuses_an_internal_issuer_when_saved(
    client, alice, settings, issuer, allowed
):
    settings.CADRE_OIDC_ALLOWED_HOSTS = allowed
    client.force_login(alice.user)
    form = {
        "name": "Internal",
        "slug": "internal",
        "kind": "oidc",
        "issuer": issuer,
        "client_id": "client-1",
        "client_secret": "s3cret",
        "scopes": "openid email profile",
        "claim_email": "email",
        "claim_name": "name",
        "is_enabled": "on",
    }
    response = client.post(reverse("console:identity_provider_new"), form)
    assert response.status_code == 200
    assert "internal address" in response.content.decode()
    assert not IdentityProvider.objects.exists()
