"""Feishu/Lark, WeCom and DingTalk logins against loopback fakes of their OAuth endpoints:
matching (IM identity, then verified e-mail, then employee id), JIT, and every refusal path
leaving no session, member, user, link or IM identity behind."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from django.test import Client
from django.urls import reverse

from cadre.governance.audit_models import AuditEvent
from cadre.tenancy.models import IdentityProvider, IMIdentity, Member, SsoIdentity, User
from tests.refusals import nothing_changes
from tests.tenancy.im_oauth_fakes import DingTalkFake, FeishuFake, WeComFake


def _provider(org, fake, kind, **extra):
    return IdentityProvider.objects.create(
        organization=org,
        name=f"{kind} login",
        slug=kind,
        kind=kind,
        client_id=fake.client_id,
        client_secret=fake.client_secret,
        authorize_base_url=fake.url,
        api_base_url=fake.url,
        **extra,
    )


@pytest.fixture
def feishu():
    with FeishuFake() as fake:
        fake.users["bob"] = {
            "name": "Bob",
            "en_name": "Bob",
            "open_id": "ou_bob",
            "union_id": "on_bob",
            "user_id": "u_bob",
            "tenant_key": "tk-acme",
            "email": "bob@acme.test",
            "enterprise_email": "",
            "employee_no": "E-1",
        }
        yield fake


@pytest.fixture
def wecom():
    with WeComFake() as fake:
        fake.users["bob"] = {
            "userid": "bob.w",
            "name": "Bob",
            "department": [1, 7],
            "position": "Engineer",
            "email": "",
            "biz_mail": "bob@acme.test",
            "status": 1,
        }
        yield fake


@pytest.fixture
def dingtalk():
    with DingTalkFake() as fake:
        fake.users["bob"] = {
            "userid": "manager4220",
            "unionid": "union-bob",
            "name": "Bob",
            "org_email": "bob@acme.test",
            "job_number": "E-1",
            "dept_id_list": [2, 5],
            "personal_email": "bob@gmail.test",
        }
        yield fake


def im_login(client: Client, provider: IdentityProvider, fake, login: str):
    """ "Sign in with …", the platform's authorization page, and its redirect back to Cadre.

    Returns (the callback response, the callback URL)."""
    start = client.get(
        reverse("console:sso_start", args=[provider.organization.slug, provider.slug])
    )
    assert start.status_code == 302, start.content
    authorize = start["Location"]
    assert authorize.startswith(fake.url + fake.authorize_path)
    page = httpx.get(authorize)
    assert page.status_code == 200 and fake.title in page.text
    params = {k: v[0] for k, v in parse_qs(urlsplit(authorize).query).items()}
    approved = httpx.post(authorize.split("?")[0], data={**params, "login": login})
    assert approved.status_code == 302
    back = urlsplit(approved.headers["Location"])
    callback = f"{back.path}?{back.query}"
    return client.get(callback), callback


def signed_in_as(client, member) -> bool:
    return client.session.get("_auth_user_id") == str(member.user_id)


def refused_reason(response) -> str:
    assert response.status_code == 403, response.content[:300]
    return response.content.decode().split('data-reason="')[1].split('"')[0]


def _refused(client, provider, fake, login="bob", *, callback=None) -> str:
    """A sign-in refused with nothing stored but the failure's audit and last error."""
    since = AuditEvent.objects.order_by("-id").values_list("id", flat=True).first() or 0
    events = AuditEvent.objects.filter(id__gt=since)
    with nothing_changes(Member, User, SsoIdentity, IMIdentity, audit=False, enqueued=False):
        if callback is None:
            response, _ = im_login(client, provider, fake, login)
        else:
            response = client.get(callback)
    reason = refused_reason(response)
    assert "_auth_user_id" not in client.session
    provider.refresh_from_db()
    assert provider.last_error.startswith(reason)
    assert events.filter(action="sso.signin_failed", reason=reason).exists()
    assert not events.filter(action__in=["sso.signin", "sso.jit_create"]).exists()
    return reason


# --- Feishu / Lark -----------------------------------------------------------------------


def test_feishu_matches_the_member_by_their_im_identity(client, org_a, bob, make_member, feishu):
    # Another member has Bob's e-mail-like identity elsewhere; the IM id wins.
    bob.email = "bob@personal.test"
    bob.save()
    IMIdentity.objects.create(
        organization=org_a, member=bob, platform="feishu", platform_user_id="ou_bob"
    )
    provider = _provider(org_a, feishu, "feishu")
    response, _ = im_login(client, provider, feishu, "bob")
    assert response.status_code == 302 and response["Location"] == reverse("console:home")
    assert signed_in_as(client, bob)
    event = AuditEvent.objects.get(action="sso.signin")
    assert event.changes["after"]["matched_by"] == "im_identity"
    assert SsoIdentity.objects.get(provider=provider).subject == "on_bob"  # union_id
    assert "/open-apis/authen/v2/oauth/token" in feishu.calls  # with the PKCE verifier


def test_feishu_matches_by_directory_email_then_employee_id(client, org_a, bob, feishu):
    provider = _provider(org_a, feishu, "feishu")
    response, _ = im_login(client, provider, feishu, "bob")
    assert response.status_code == 302 and signed_in_as(client, bob)
    assert AuditEvent.objects.get(action="sso.signin").changes["after"]["matched_by"] == "email"


def test_feishu_matches_by_employee_id_without_email(client, org_a, make_member, feishu):
    carol = make_member(display_name="Carol", email="carol@old.test", employee_no="E-9")
    feishu.users["carol"] = {
        "name": "Carol",
        "open_id": "ou_c",
        "union_id": "on_c",
        "employee_no": "E-9",
    }
    provider = _provider(org_a, feishu, "feishu")
    response, _ = im_login(client, provider, feishu, "carol")
    assert response.status_code == 302 and signed_in_as(client, carol)
    assert (
        AuditEvent.objects.get(action="sso.signin").changes["after"]["matched_by"] == "employee_id"
    )


def test_feishu_member_without_email_or_login_signs_in(client, org_a, make_member, feishu):
    """A chat-only member (no e-mail, no login) found by their IM id gets a login of their
    organization's; it used to fail with a 500 ("users need an email address")."""
    dana = make_member(display_name="Dana", email="", user=None)
    IMIdentity.objects.create(
        organization=org_a, member=dana, platform="feishu", platform_user_id="ou_bob"
    )
    provider = _provider(org_a, feishu, "feishu")
    feishu.users["bob"].update(email="", enterprise_email="")
    response, _ = im_login(client, provider, feishu, "bob")
    assert response.status_code == 302
    dana.refresh_from_db()
    assert dana.user is not None and signed_in_as(client, dana)
    assert dana.user.email == f"m{dana.pk}@acme.invalid"
    assert not dana.user.has_usable_password()


def test_feishu_unknown_user_with_jit_off_is_refused(client, org_a, feishu):
    provider = _provider(org_a, feishu, "feishu")
    assert _refused(client, provider, feishu) == "unknown_user"


def test_feishu_jit_creates_the_member_and_their_im_identity(client, org_a, feishu):
    provider = _provider(org_a, feishu, "feishu", jit_enabled=True)
    response, _ = im_login(client, provider, feishu, "bob")
    assert response.status_code == 302
    member = Member.objects.get(organization=org_a, email="bob@acme.test")
    assert member.employee_no == "E-1" and signed_in_as(client, member)
    identity = IMIdentity.objects.get(member=member)
    assert (identity.platform, identity.platform_user_id, identity.tenant_key) == (
        "feishu",
        "ou_bob",
        "tk-acme",
    )
    assert AuditEvent.objects.filter(action="sso.jit_create").count() == 1


def test_feishu_replayed_callback_is_refused_as_unknown_state(client, org_a, bob, feishu):
    provider = _provider(org_a, feishu, "feishu")
    response, callback = im_login(client, provider, feishu, "bob")
    assert response.status_code == 302
    client.logout()
    assert _refused(client, provider, feishu, callback=callback) == "state_unknown"


def test_feishu_replayed_code_is_refused_by_the_platform(client, org_a, bob, feishu):
    provider = _provider(org_a, feishu, "feishu")
    response, callback = im_login(client, provider, feishu, "bob")
    assert response.status_code == 302
    used_code = parse_qs(urlsplit(callback).query)["code"][0]
    client.logout()
    # A fresh sign-in (new, valid state) carrying the already used code.
    start = client.get(reverse("console:sso_start", args=["acme", "feishu"]))
    state = parse_qs(urlsplit(start["Location"]).query)["state"][0]
    callback = f"{urlsplit(callback).path}?code={used_code}&state={state}"
    assert _refused(client, provider, feishu, callback=callback) == "token_exchange_failed"
    assert "20003" in IdentityProvider.objects.get(pk=provider.pk).last_error


def test_feishu_bad_state_is_refused(client, org_a, bob, feishu):
    provider = _provider(org_a, feishu, "feishu")
    client.get(reverse("console:sso_start", args=["acme", "feishu"]))
    callback = reverse("console:sso_callback", args=["acme", "feishu"]) + "?code=x&state=forged"
    assert _refused(client, provider, feishu, callback=callback) == "state_unknown"


def test_feishu_user_info_error_code_is_refused(client, org_a, bob, feishu):
    provider = _provider(org_a, feishu, "feishu")
    feishu.errors["/open-apis/authen/v1/user_info"] = {"code": 99991672, "msg": "no permission"}
    assert _refused(client, provider, feishu) == "platform_error"
    assert "99991672" in IdentityProvider.objects.get(pk=provider.pk).last_error


def test_feishu_account_of_another_tenant_is_refused(client, org_a, bob, feishu):
    provider = _provider(org_a, feishu, "feishu", tenant_key="tk-other")
    assert _refused(client, provider, feishu) == "wrong_tenant"


def test_feishu_denied_authorization_is_refused(client, org_a, bob, feishu):
    provider = _provider(org_a, feishu, "feishu")
    assert _refused(client, provider, feishu, login="deny") == "provider_error"


def test_feishu_wrong_secret_is_refused(client, org_a, bob, feishu):
    provider = _provider(org_a, feishu, "feishu")
    provider.client_secret = "wrong"
    provider.save()
    assert _refused(client, provider, feishu) == "token_exchange_failed"


def test_two_members_sharing_one_im_account_are_refused(client, org_a, bob, make_member, feishu):
    other = make_member(display_name="Other", email="other@acme.test")
    IMIdentity.objects.create(
        organization=org_a, member=bob, platform="feishu", platform_user_id="ou_bob"
    )
    IMIdentity.objects.create(
        organization=org_a, member=other, platform="feishu", platform_user_id="on_bob"
    )
    provider = _provider(org_a, feishu, "feishu")
    assert _refused(client, provider, feishu) == "ambiguous_user"


# --- WeCom -------------------------------------------------------------------------------


def test_wecom_matches_by_userid_and_maps_departments_to_roles(client, org_a, bob, wecom):
    IMIdentity.objects.create(
        organization=org_a, member=bob, platform="wecom", platform_user_id="bob.w"
    )
    provider = _provider(
        org_a,
        wecom,
        "wecom",
        agent_id=wecom.agent_id,
        claim_groups="department",
        group_roles=[{"value": "7", "roles": ["auditor"]}],
    )
    response, _ = im_login(client, provider, wecom, "bob")
    assert response.status_code == 302 and signed_in_as(client, bob)
    bob.refresh_from_db()
    assert bob.roles == ["employee", "auditor"]
    change = AuditEvent.objects.get(action="sso.role_change")
    assert change.reason == "role changed from claims"
    assert (
        AuditEvent.objects.get(action="sso.signin").changes["after"]["matched_by"] == "im_identity"
    )


def test_wecom_outsider_is_refused(client, org_a, bob, wecom):
    wecom.outsiders.add("bob")
    provider = _provider(org_a, wecom, "wecom", agent_id=wecom.agent_id)
    assert _refused(client, provider, wecom) == "not_in_directory"


def test_wecom_app_secret_error_code_is_refused(client, org_a, bob, wecom):
    provider = _provider(org_a, wecom, "wecom", agent_id=wecom.agent_id)
    provider.client_secret = "wrong"
    provider.save()
    assert _refused(client, provider, wecom) == "platform_error"
    assert "40001" in IdentityProvider.objects.get(pk=provider.pk).last_error


def test_wecom_invalid_code_is_refused(client, org_a, bob, wecom):
    provider = _provider(org_a, wecom, "wecom", agent_id=wecom.agent_id)
    start = client.get(reverse("console:sso_start", args=["acme", "wecom"]))
    state = parse_qs(urlsplit(start["Location"]).query)["state"][0]
    callback = reverse("console:sso_callback", args=["acme", "wecom"]) + f"?code=used&state={state}"
    assert _refused(client, provider, wecom, callback=callback) == "token_exchange_failed"


# --- DingTalk ----------------------------------------------------------------------------


def test_dingtalk_matches_by_the_corp_userid(client, org_a, bob, dingtalk):
    bob.email = "bob@elsewhere.test"
    bob.save()
    IMIdentity.objects.create(
        organization=org_a, member=bob, platform="dingtalk", platform_user_id="manager4220"
    )
    provider = _provider(org_a, dingtalk, "dingtalk", tenant_key=dingtalk.corp_id)
    response, callback = im_login(client, provider, dingtalk, "bob")
    assert "authCode=" in callback
    assert response.status_code == 302 and signed_in_as(client, bob)
    assert (
        AuditEvent.objects.get(action="sso.signin").changes["after"]["matched_by"] == "im_identity"
    )


def test_dingtalk_matches_by_job_number(client, org_a, make_member, dingtalk):
    dave = make_member(display_name="Dave", email="dave@acme.test", employee_no="E-1")
    provider = _provider(org_a, dingtalk, "dingtalk")
    dingtalk.users["bob"]["org_email"] = ""
    response, _ = im_login(client, provider, dingtalk, "bob")
    assert response.status_code == 302 and signed_in_as(client, dave)


def test_dingtalk_personal_email_is_not_trusted(client, org_a, make_member, dingtalk):
    make_member(display_name="G", email="bob@gmail.test")
    del dingtalk.users["bob"]["userid"]  # not in the corp: only users/me's personal account
    provider = _provider(org_a, dingtalk, "dingtalk")
    assert _refused(client, provider, dingtalk) == "unknown_user"


def test_dingtalk_account_outside_the_corp_is_refused(client, org_a, bob, dingtalk):
    del dingtalk.users["bob"]["userid"]
    provider = _provider(org_a, dingtalk, "dingtalk", tenant_key=dingtalk.corp_id)
    assert _refused(client, provider, dingtalk) == "not_in_directory"


def test_dingtalk_other_corp_is_refused(client, org_a, bob, dingtalk):
    dingtalk.users["bob"]["_corp"] = "ding-corp-other"
    provider = _provider(org_a, dingtalk, "dingtalk", tenant_key=dingtalk.corp_id)
    assert _refused(client, provider, dingtalk) == "wrong_tenant"


def test_dingtalk_bad_client_secret_is_refused(client, org_a, bob, dingtalk):
    provider = _provider(org_a, dingtalk, "dingtalk")
    provider.client_secret = "wrong"
    provider.save()
    assert _refused(client, provider, dingtalk) == "token_exchange_failed"


def test_dingtalk_directory_error_code_is_refused(client, org_a, bob, dingtalk):
    provider = _provider(org_a, dingtalk, "dingtalk")
    dingtalk.errors["/topapi/v2/user/get"] = {"errcode": 60011, "errmsg": "no permission"}
    assert _refused(client, provider, dingtalk) == "platform_error"


# --- hostile account details ---------------------------------------------------------------


@pytest.mark.parametrize(
    "field, value",
    [
        ("email", "bob\x00@acme.test"),
        ("enterprise_email", "bob@acme.test\ud800"),
        ("name", "Bob\x00"),
        ("name", "\udfffBob"),
        ("union_id", "on_" + "x" * 300),
        ("open_id", "ou_\x00"),
        ("employee_no", "E" * 65),
        ("tenant_key", "tk\x00"),
        ("email", "b" * 250 + "@acme.test"),
    ],
)
def test_feishu_unstorable_account_details_are_refused(client, org_a, feishu, field, value):
    """NUL bytes, lone surrogates and values longer than Cadre stores, from the platform's
    user info (which a provider's base URL can point anywhere): a refusal, never a 500."""
    provider = _provider(org_a, feishu, "feishu", jit_enabled=True)
    feishu.users["bob"][field] = value
    assert _refused(client, provider, feishu) == "claims_invalid"


def test_feishu_long_display_name_is_shortened_not_refused(client, org_a, feishu):
    provider = _provider(org_a, feishu, "feishu", jit_enabled=True)
    feishu.users["bob"]["name"] = "Bob " + "z" * 300
    response, _ = im_login(client, provider, feishu, "bob")
    assert response.status_code == 302
    member = Member.objects.get(organization=org_a, email="bob@acme.test")
    assert member.display_name.startswith("Bob z") and len(member.display_name) == 150


def test_nul_in_the_callbacks_error_is_refused_at_the_edge(client, org_a, feishu):
    provider = _provider(org_a, feishu, "feishu")
    before = provider.last_error
    start = client.get(reverse("console:sso_start", args=["acme", "feishu"]))
    state = parse_qs(urlsplit(start["Location"]).query)["state"][0]
    callback = reverse("console:sso_callback", args=["acme", "feishu"])
    response = client.get(callback, {"state": state, "error": "denied\x00", "code": "x"})
    assert response.status_code == 400 and response.json()["error"]["code"] == "bad_request"
    provider.refresh_from_db()
    assert provider.last_error == before  # nothing of the request was kept
