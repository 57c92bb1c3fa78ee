"""The console's identity providers page: add and edit (secret write-only), SSO required."""

from __future__ import annotations

import pytest
from django.urls import reverse

from cadre.governance.audit_models import AuditEvent
from cadre.tenancy.actors import member_actor
from cadre.tenancy.models import IdentityProvider
from cadre.tenancy.services import saml

FORM = {
    "name": "Okta",
    "slug": "okta",
    "issuer": "https://acme.okta.test",
    "client_id": "client-1",
    "client_secret": "first-secret",
    "scopes": "openid email profile",
    "claim_email": "email",
    "claim_name": "name",
    "claim_employee_id": "",
    "is_enabled": "on",
}


@pytest.fixture
def owner_client(client, alice):
    client.force_login(alice.user)
    return client


def test_owner_adds_a_provider_and_sees_its_callback_url(owner_client, org_a):
    response = owner_client.post(reverse("console:identity_provider_new"), FORM)
    assert response.status_code == 302
    provider = IdentityProvider.objects.get(organization=org_a)
    assert provider.client_secret == "first-secret" and not provider.jit_enabled
    page = owner_client.get(reverse("console:identity_providers")).content.decode()
    assert "http://testserver/sso/acme/okta/callback/" in page
    event = AuditEvent.objects.get(action="identity_provider.create")
    assert "first-secret" not in str(event.changes)


def test_secret_is_write_only_and_kept_when_left_empty(owner_client, org_a):
    owner_client.post(reverse("console:identity_provider_new"), FORM)
    provider = IdentityProvider.objects.get()
    edit = reverse("console:identity_provider_edit", args=[provider.pk])
    assert "first-secret" not in owner_client.get(edit).content.decode()
    owner_client.post(edit, {**FORM, "client_secret": "", "name": "Okta EU"})
    provider.refresh_from_db()
    assert (provider.name, provider.client_secret) == ("Okta EU", "first-secret")


def test_outsider_gets_404_for_another_orgs_provider(client, org_a, charlie):
    provider = IdentityProvider.objects.create(
        organization=org_a, name="Okta", slug="okta", issuer="https://x.test", client_id="c"
    )
    client.force_login(charlie.user)
    url = reverse("console:identity_provider_edit", args=[provider.pk])
    assert client.get(url).status_code == 404
    assert client.post(url, {**FORM, "name": "Hijacked"}).status_code == 404
    provider.refresh_from_db()
    assert provider.name == "Okta"


def test_employee_cannot_open_the_page_or_add(client, bob):
    client.force_login(bob.user)
    assert client.get(reverse("console:identity_providers")).status_code == 403
    assert client.post(reverse("console:identity_provider_new"), FORM).status_code == 403
    assert not IdentityProvider.objects.exists()


def test_owner_turns_sso_required_on_audited(owner_client, org_a):
    owner_client.post(reverse("console:identity_providers"), {"sso_required": "on"})
    org_a.refresh_from_db()
    assert org_a.settings["sso_required"] is True
    assert AuditEvent.objects.filter(action="organization.sso_required").exists()


def test_im_logins_are_added_from_the_same_form(owner_client, org_a):
    form = {
        **FORM,
        "name": "WeCom",
        "slug": "wecom",
        "kind": "wecom",
        "issuer": "",
        "client_id": "ww5823bf96d3bd56c7",
    }
    response = owner_client.post(reverse("console:identity_provider_new"), form)
    assert response.status_code == 200 and "AgentId" in response.content.decode()
    assert not IdentityProvider.objects.exists()
    form["agent_id"] = "1000002"
    response = owner_client.post(reverse("console:identity_provider_new"), form)
    assert response.status_code == 302
    provider = IdentityProvider.objects.get(organization=org_a)
    assert (provider.kind, provider.agent_id, provider.issuer) == ("wecom", "1000002", "")
    page = owner_client.get(reverse("console:identity_providers")).content.decode()
    assert "WeCom login" in page and 'data-test-signin="wecom"' in page


def test_an_oidc_provider_needs_its_issuer(owner_client):
    response = owner_client.post(reverse("console:identity_provider_new"), {**FORM, "issuer": ""})
    assert response.status_code == 200
    assert not IdentityProvider.objects.exists()


# --- SAML 2.0 ----------------------------------------------------------------------------------

SAML_FORM = {
    "name": "Acme AD FS",
    "slug": "adfs",
    "kind": "saml",
    "claim_email": "email",
    "claim_name": "name",
    "claim_groups": "groups",
    "is_enabled": "on",
}


@pytest.fixture
def saml_idp():
    from tests.tenancy.saml_idp import SamlIdp

    with SamlIdp() as idp:
        yield idp


def test_a_saml_provider_from_pasted_metadata_shows_the_sp_urls(
    owner_client, org_a, alice, saml_idp
):
    form = {**SAML_FORM, "saml_metadata_xml": saml_idp.metadata()}
    response = owner_client.post(reverse("console:identity_provider_new"), form)
    assert response.status_code == 302, response.content.decode()[:2000]
    provider = IdentityProvider.objects.get(organization=org_a)
    assert (provider.kind, provider.saml_entity_id) == ("saml", saml_idp.entity_id)
    assert provider.client_id == "" and provider.saml_metadata_read_at is not None
    page = owner_client.get(reverse("console:identity_providers")).content.decode()
    assert "http://testserver/sso/acme/adfs/saml/metadata/" in page
    assert "http://testserver/sso/acme/adfs/saml/acs/" in page
    edit = owner_client.get(reverse("console:identity_provider_edit", args=[provider.pk]))
    assert "http://testserver/sso/acme/adfs/saml/slo/" in edit.content.decode()
    event = AuditEvent.objects.get(action="identity_provider.create")
    assert event.changes["after"]["saml_entity_id"] == saml_idp.entity_id
    assert "saml_metadata_xml" not in event.changes["after"]
    # The SP key pair made at creation, shown by its fingerprint; a rotation shows the next one.
    current = saml.certificate_fingerprint(provider.saml_sp_certificate)
    page = edit.content.decode()
    assert current and f'<code class="saml-sp-certificate">{current}</code>' in page
    assert "saml-sp-next-certificate" not in page
    rotating = saml.sp_key_rotate_begin(actor=member_actor(alice), provider=provider)
    edit = owner_client.get(reverse("console:identity_provider_edit", args=[provider.pk]))
    following = saml.certificate_fingerprint(rotating.saml_sp_next_certificate)
    assert following != current
    assert f'<code class="saml-sp-certificate">{current}</code>' in edit.content.decode()
    assert f'<code class="saml-sp-next-certificate">{following}</code>' in edit.content.decode()


def test_a_saml_metadata_url_is_read_through_the_outbound_guard(
    owner_client, org_a, saml_idp, settings
):
    form = {**SAML_FORM, "saml_metadata_url": f"{saml_idp.url}/metadata"}
    settings.CADRE_SAML_METADATA_ALLOWED_HOSTS = []
    response = owner_client.post(reverse("console:identity_provider_new"), form)
    assert response.status_code == 200 and "internal address" in response.content.decode()
    assert not IdentityProvider.objects.exists()
    settings.CADRE_SAML_METADATA_ALLOWED_HOSTS = ["127.0.0.1"]
    response = owner_client.post(reverse("console:identity_provider_new"), form)
    assert response.status_code == 302
    provider = IdentityProvider.objects.get(organization=org_a)
    assert provider.saml_entity_id == saml_idp.entity_id
    assert "SingleSignOnService" in provider.saml_metadata_xml


@pytest.mark.parametrize(
    ("metadata", "error"),
    [
        ("not xml at all", "not SAML metadata XML"),
        ('<md:EntityDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata" entityID="x">'
         "</md:EntityDescriptor>", "exactly one identity provider"),
        ("", "metadata URL or paste its XML"),
    ],
)  # fmt: skip
def test_bad_saml_metadata_is_a_form_error_and_nothing_is_saved(owner_client, metadata, error):
    form = {**SAML_FORM, "saml_metadata_xml": metadata}
    response = owner_client.post(reverse("console:identity_provider_new"), form)
    assert response.status_code == 200
    assert error in response.content.decode()
    assert not IdentityProvider.objects.exists()
    assert not AuditEvent.objects.filter(action="identity_provider.create").exists()


def test_saml_metadata_without_a_signing_certificate_is_refused(owner_client, saml_idp):
    metadata = saml_idp.metadata()
    start = metadata.index("<md:KeyDescriptor")
    end = metadata.index("</md:KeyDescriptor>") + len("</md:KeyDescriptor>")
    form = {**SAML_FORM, "saml_metadata_xml": metadata[:start] + metadata[end:]}
    response = owner_client.post(reverse("console:identity_provider_new"), form)
    assert response.status_code == 200 and "no signing certificate" in response.content.decode()
    assert not IdentityProvider.objects.exists()
