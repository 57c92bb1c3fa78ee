"""IM logins (Feishu/Lark, WeCom, DingTalk) call the platform's API through the outbound guard:
an `api_base_url` at, or resolving to, a metadata or internal address gets nothing — the code
and the app secret are never sent there — and the sign-in is refused as unreachable."""

from __future__ import annotations

import pytest

from cadre.outbound import OutboundRefused
from cadre.tenancy.actors import member_actor
from cadre.tenancy.models import IdentityProvider
from cadre.tenancy.services import im_login, oidc
from cadre.tenancy.services.oidc import SsoRefused
from connectors.tests import guard
from connectors.tests.guard import reached

pytestmark = pytest.mark.django_db

dns = guard.dns
connections = guard.connections
METADATA = "169.254.169.254"


def _provider(org, kind: str, api_base_url: str) -> IdentityProvider:
    return IdentityProvider.objects.create(
        organization=org,
        name=f"{kind} login",
        slug=kind,
        kind=kind,
        client_id="cli_a",
        client_secret="app-secret",
        agent_id="1000002",
        api_base_url=api_base_url,
    )


@pytest.mark.parametrize("kind", ["feishu", "wecom", "dingtalk"])
@pytest.mark.parametrize(
    "api_base_url",
    ["http://169.254.169.254", "https://open.example.test", "http://[fd00:ec2::254]"],
)
def test_a_login_whose_api_is_a_metadata_address_sends_nothing(
    org_a, dns, connections, kind, api_base_url
):
    dns["open.example.test"] = METADATA  # a name that resolves there by sign-in time
    provider = _provider(org_a, kind, api_base_url)
    with pytest.raises(SsoRefused) as refused:
        im_login.user_claims(provider, code="code-1", verifier="v", redirect_uri="https://x/cb")
    assert refused.value.reason == "provider_unreachable"
    assert reached(connections, METADATA, "open.example.test", "fd00:ec2::254") == []


def test_a_login_whose_api_is_loopback_is_refused_unless_allowed(org_a, connections, settings):
    settings.CADRE_CONNECTOR_ALLOWED_HOSTS = []
    provider = _provider(org_a, "feishu", "http://127.0.0.1:9")
    with pytest.raises(SsoRefused) as refused:
        im_login.user_claims(provider, code="code-1", verifier="v", redirect_uri="https://x/cb")
    assert "internal address" in refused.value.detail
    assert connections == []


# --- when the provider is saved ---------------------------------------------------------------


@pytest.mark.parametrize(
    "api_base_url",
    [
        "http://169.254.169.254",
        "https://open.example.test",
        "http://[fd00:ec2::254]",
        "http://127.0.0.1:9",
        "http://10.0.0.5",
        "file:///etc/passwd",
    ],
)
def test_an_api_base_url_at_an_internal_address_is_refused_when_saved(
    org_a, alice, dns, connections, settings, api_base_url
):
    settings.CADRE_CONNECTOR_ALLOWED_HOSTS = []
    dns["open.example.test"] = METADATA
    with pytest.raises(OutboundRefused) as refused:
        oidc.identity_provider_save(
            actor=member_actor(alice),
            name="Feishu login",
            slug="feishu",
            kind="feishu",
            client_id="cli_a",
            client_secret="app-secret",
            api_base_url=api_base_url,
        )
    assert refused.value.status == 400
    assert set(refused.value.details) == {"api_base_url"}
    assert not IdentityProvider.objects.filter(organization=org_a).exists()
    assert connections == []


def test_changing_a_saved_login_to_an_internal_api_keeps_the_old_url(org_a, alice, settings):
    settings.CADRE_CONNECTOR_ALLOWED_HOSTS = []
    provider = _provider(org_a, "feishu", "https://open.feishu.cn")
    with pytest.raises(OutboundRefused):
        oidc.identity_provider_save(
            actor=member_actor(alice), provider=provider, api_base_url="http://127.0.0.1:9"
        )
    provider.refresh_from_db()
    assert provider.api_base_url == "https://open.feishu.cn"
    # An administrator allows the internal gateway: it is saved.
    settings.CADRE_CONNECTOR_ALLOWED_HOSTS = ["127.0.0.1"]
    saved = oidc.identity_provider_save(
        actor=member_actor(alice), provider=provider, api_base_url="http://127.0.0.1:9"
    )
    saved.refresh_from_db()
    assert saved.api_base_url == "http://127.0.0.1:9"
