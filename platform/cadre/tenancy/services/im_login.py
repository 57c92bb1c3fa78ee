"""Sign-in with the IM platforms' own OAuth logins: Feishu/Lark, WeCom and DingTalk.

None of them is OpenID Connect (no discovery, no id_token): each has an authorization page
that returns a one-time `code` to the callback, and APIs that turn the code into the user.

- Feishu/Lark: `accounts.feishu.cn/open-apis/authen/v1/authorize` (state, PKCE S256) →
  POST `open.feishu.cn/open-apis/authen/v2/oauth/token` (RFC 6749 body, JSON) →
  GET `/open-apis/authen/v1/user_info` (Bearer user_access_token): open_id, union_id,
  user_id, tenant_key, name, email, enterprise_email, employee_no.
- WeCom: `login.work.weixin.qq.com/wwlogin/sso/login` (corp id, agent id, state; no PKCE) →
  GET `/cgi-bin/gettoken` (corp id + app secret) → GET `/cgi-bin/auth/getuserinfo`
  (access_token + code): `userid` for a member of the corp, `openid` for an outsider →
  GET `/cgi-bin/user/get`: name, department, position, email, biz_mail.
- DingTalk: `login.dingtalk.com/oauth2/auth` (state; no PKCE) →
  POST `api.dingtalk.com/v1.0/oauth2/userAccessToken` → GET `/v1.0/contact/users/me`
  (unionId, openId, nick, email of the personal account) → the corp's userid through
  `oapi.dingtalk.com/gettoken` + `/topapi/user/getbyunionid` and its directory entry through
  `/topapi/v2/user/get` (job_number, org_email, dept_id_list).

Each adapter returns the platform's user as one flat dict of claims (what "test sign-in"
shows) and the normalized facts matching uses (`found`). Every call goes through the outbound
guard (an admin chooses `api_base_url`): the IM platforms' allow-list applies, the one the
connectors' API base URLs use (CADRE_CONNECTOR_ALLOWED_HOSTS).
"""

from __future__ import annotations

from urllib.parse import urlencode

import httpx
from django.core.cache import cache

from cadre import outbound
from cadre.tenancy.models import IdentityProvider

_HTTP_TIMEOUT = 10
# The IM platforms' APIs: the allow-list connectors.transport.PLATFORM_APIS names (a login and
# a connector of a private deployment reach the same host).
_ALLOW_SETTING = outbound.CONNECTOR_APIS

DEFAULT_URLS = {
    "feishu": ("https://accounts.feishu.cn", "https://open.feishu.cn"),
    "wecom": ("https://login.work.weixin.qq.com", "https://qyapi.weixin.qq.com"),
    "dingtalk": ("https://login.dingtalk.com", "https://api.dingtalk.com"),
}
_DINGTALK_OAPI = "https://oapi.dingtalk.com"

# Which claim carries the employee id by default, per platform (the provider's own setting wins).
DEFAULT_EMPLOYEE_CLAIM = {"feishu": "employee_no", "wecom": "", "dingtalk": "job_number"}

# Whether the platform supports PKCE on its authorization page.
SUPPORTS_PKCE = {"feishu": True, "wecom": False, "dingtalk": False}


def _refused(reason: str, detail: str = ""):
    from cadre.tenancy.services.oidc import SsoRefused

    return SsoRefused(reason, detail[:300])


def _urls(provider: IdentityProvider) -> tuple[str, str]:
    authorize, api = DEFAULT_URLS[provider.kind]
    return (
        (provider.authorize_base_url or authorize).rstrip("/"),
        (provider.api_base_url or api).rstrip("/"),
    )


def _call(method: str, url: str, **kwargs) -> tuple[int, dict]:
    try:
        with outbound.http_client(allow_setting=_ALLOW_SETTING, timeout=_HTTP_TIMEOUT) as client:
            response = client.request(method, url, **kwargs)
    except outbound.OutboundRefused as refused:
        raise _refused("provider_unreachable", f"{url.split('?')[0]}: {refused.message}") from None
    except httpx.HTTPError as caught:
        raise _refused("provider_unreachable", f"{url.split('?')[0]}: {caught}") from None
    try:
        body = response.json()
    except ValueError:
        raise _refused(
            "platform_error", f"HTTP {response.status_code} from {url.split('?')[0]}"
        ) from None
    if not isinstance(body, dict):
        raise _refused("platform_error", f"unexpected answer from {url.split('?')[0]}")
    return response.status_code, body


# --- authorization URLs --------------------------------------------------------------------


def authorize_url(
    provider: IdentityProvider, *, redirect_uri: str, state: str, challenge: str
) -> str:
    base, _ = _urls(provider)
    if provider.kind == "feishu":
        query = {
            "client_id": provider.client_id,
            "response_type": "code",
            "redirect_uri": redirect_uri,
            "state": state,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
        }
        if provider.scopes and provider.scopes != "openid email profile":
            query["scope"] = provider.scopes
        return f"{base}/open-apis/authen/v1/authorize?{urlencode(query)}"
    if provider.kind == "wecom":
        query = {
            "login_type": "CorpApp",
            "appid": provider.client_id,
            "agentid": provider.agent_id,
            "redirect_uri": redirect_uri,
            "state": state,
        }
        return f"{base}/wwlogin/sso/login?{urlencode(query)}"
    if provider.kind == "dingtalk":
        query = {
            "redirect_uri": redirect_uri,
            "response_type": "code",
            "client_id": provider.client_id,
            "scope": "openid corpid",
            "state": state,
            "prompt": "consent",
        }
        if provider.tenant_key:
            query["org_type"] = "management"
            query["corpId"] = provider.tenant_key
        return f"{base}/oauth2/auth?{urlencode(query)}"
    raise ValueError(f"not an IM login: {provider.kind}")


# --- Feishu / Lark -------------------------------------------------------------------------


def _feishu(provider: IdentityProvider, *, code: str, verifier: str, redirect_uri: str) -> dict:
    _, api = _urls(provider)
    status, token = _call(
        "POST",
        f"{api}/open-apis/authen/v2/oauth/token",
        json={
            "grant_type": "authorization_code",
            "client_id": provider.client_id,
            "client_secret": provider.client_secret,
            "code": code,
            "redirect_uri": redirect_uri,
            "code_verifier": verifier,
        },
    )
    if status != 200 or token.get("code", 0) != 0 or not token.get("access_token"):
        error = f"{token.get('error', '')} {token.get('error_description', '')}"
        detail = f"code {token.get('code')}: {error}"
        raise _refused("token_exchange_failed", detail.strip())
    status, answer = _call(
        "GET",
        f"{api}/open-apis/authen/v1/user_info",
        headers={"Authorization": f"Bearer {token['access_token']}"},
    )
    if status != 200 or answer.get("code") != 0 or not isinstance(answer.get("data"), dict):
        raise _refused(
            "platform_error", f"user_info code {answer.get('code')}: {answer.get('msg')}"
        )
    return dict(answer["data"])


def _feishu_found(provider: IdentityProvider, claims: dict) -> dict:
    if not (claims.get("union_id") or claims.get("open_id")):
        raise _refused("invalid_token", "user_info has neither union_id nor open_id")
    if provider.tenant_key and claims.get("tenant_key") != provider.tenant_key:
        raise _refused("wrong_tenant", f"tenant_key {claims.get('tenant_key')!r}")
    # Both addresses come from the tenant's directory (set by its admins), not typed by the user.
    email = claims.get("enterprise_email") or claims.get("email") or ""
    return {
        "sub": str(claims.get("union_id") or claims["open_id"]),
        "im_ids": [claims[k] for k in ("open_id", "union_id", "user_id") if claims.get(k)],
        "tenant": claims.get("tenant_key") or "",
        "email": email,
        "email_verified": bool(email),
        "name": claims.get("name") or claims.get("en_name") or "",
    }


# --- WeCom ---------------------------------------------------------------------------------


def _wecom_errcode(body: dict, what: str) -> None:
    if body.get("errcode", 0) != 0:
        raise _refused(
            "platform_error", f"{what} errcode {body.get('errcode')}: {body.get('errmsg')}"
        )


def _wecom_token(provider: IdentityProvider, api: str) -> str:
    key = f"imlogin:wecom:token:{provider.pk}:{provider.client_id}"
    token = cache.get(key)
    if token:
        return token
    _, body = _call(
        "GET",
        f"{api}/cgi-bin/gettoken",
        params={"corpid": provider.client_id, "corpsecret": provider.client_secret},
    )
    _wecom_errcode(body, "gettoken")
    token = str(body.get("access_token") or "")
    if not token:
        raise _refused("platform_error", "gettoken returned no access_token")
    cache.set(key, token, max(60, int(body.get("expires_in") or 7200) - 300))
    return token


def _wecom(provider: IdentityProvider, *, code: str, verifier: str, redirect_uri: str) -> dict:
    _, api = _urls(provider)
    token = _wecom_token(provider, api)
    _, who = _call(
        "GET", f"{api}/cgi-bin/auth/getuserinfo", params={"access_token": token, "code": code}
    )
    if who.get("errcode") in (40014, 42001):  # the cached app token expired early: once more
        cache.delete(f"imlogin:wecom:token:{provider.pk}:{provider.client_id}")
        raise _refused("platform_error", f"getuserinfo errcode {who.get('errcode')}: retry")
    if who.get("errcode", 0) != 0:
        reason = (
            "token_exchange_failed" if who.get("errcode") in (40029, 40163) else "platform_error"
        )
        raise _refused(reason, f"getuserinfo errcode {who.get('errcode')}: {who.get('errmsg')}")
    userid = str(who.get("userid") or who.get("UserId") or "")
    if not userid:
        # An `openid` instead: someone outside this corp's directory.
        raise _refused("not_in_directory", "getuserinfo returned no userid")
    _, detail = _call(
        "GET", f"{api}/cgi-bin/user/get", params={"access_token": token, "userid": userid}
    )
    _wecom_errcode(detail, "user/get")
    return {**{k: v for k, v in detail.items() if k not in ("errcode", "errmsg")}, "userid": userid}


def _wecom_found(provider: IdentityProvider, claims: dict) -> dict:
    email = claims.get("biz_mail") or claims.get("email") or ""
    return {
        "sub": claims["userid"],
        "im_ids": [claims["userid"]],
        "tenant": provider.client_id,
        "email": email,
        "email_verified": bool(email),  # both are kept by the corp's admins
        "name": claims.get("name") or "",
    }


# --- DingTalk ------------------------------------------------------------------------------


def _dingtalk_oapi(provider: IdentityProvider) -> str:
    return (provider.api_base_url or _DINGTALK_OAPI).rstrip("/")


def _dingtalk(provider: IdentityProvider, *, code: str, verifier: str, redirect_uri: str) -> dict:
    _, api = _urls(provider)
    status, token = _call(
        "POST",
        f"{api}/v1.0/oauth2/userAccessToken",
        json={
            "clientId": provider.client_id,
            "clientSecret": provider.client_secret,
            "code": code,
            "grantType": "authorization_code",
        },
    )
    if status != 200 or not token.get("accessToken"):
        raise _refused(
            "token_exchange_failed", f"{token.get('code', status)}: {token.get('message', '')}"
        )
    status, me = _call(
        "GET",
        f"{api}/v1.0/contact/users/me",
        headers={"x-acs-dingtalk-access-token": token["accessToken"]},
    )
    if status != 200 or not me.get("unionId"):
        raise _refused(
            "platform_error", f"users/me {me.get('code', status)}: {me.get('message', '')}"
        )
    claims = {"corpId": token.get("corpId") or "", **me}
    # The corp's own userid (what the connector sees as senderStaffId) and directory entry.
    oapi = _dingtalk_oapi(provider)
    _, app = _call(
        "GET",
        f"{oapi}/gettoken",
        params={"appkey": provider.client_id, "appsecret": provider.client_secret},
    )
    if app.get("errcode", 0) != 0 or not app.get("access_token"):
        raise _refused(
            "platform_error", f"gettoken errcode {app.get('errcode')}: {app.get('errmsg')}"
        )
    _, found = _call(
        "POST",
        f"{oapi}/topapi/user/getbyunionid",
        params={"access_token": app["access_token"]},
        json={"unionid": me["unionId"]},
    )
    if found.get("errcode") == 60121:  # no such user in this corp
        return claims
    if found.get("errcode", 0) != 0:
        raise _refused(
            "platform_error", f"getbyunionid errcode {found.get('errcode')}: {found.get('errmsg')}"
        )
    userid = str((found.get("result") or {}).get("userid") or "")
    if not userid:
        return claims
    _, detail = _call(
        "POST",
        f"{oapi}/topapi/v2/user/get",
        params={"access_token": app["access_token"]},
        json={"userid": userid},
    )
    if detail.get("errcode", 0) != 0:
        raise _refused(
            "platform_error", f"user/get errcode {detail.get('errcode')}: {detail.get('errmsg')}"
        )
    return {**claims, **(detail.get("result") or {}), "userid": userid}


def _dingtalk_found(provider: IdentityProvider, claims: dict) -> dict:
    if provider.tenant_key and claims.get("corpId") != provider.tenant_key:
        raise _refused("wrong_tenant", f"corpId {claims.get('corpId')!r}")
    if not claims.get("userid") and provider.tenant_key:
        raise _refused("not_in_directory", "the account is not in the corp's directory")
    # The directory's addresses are the corp's; users/me's `email` is the personal account's,
    # which DingTalk does not vouch for.
    org_email = claims.get("org_email") or ""
    directory_email = claims.get("email") if claims.get("userid") else ""
    email = org_email or directory_email or claims.get("email") or ""
    return {
        "sub": claims["unionId"],
        "im_ids": [claims[k] for k in ("userid", "unionId", "openId") if claims.get(k)],
        "tenant": claims.get("corpId") or "",
        "email": email,
        "email_verified": bool(org_email or directory_email),
        "name": claims.get("name") or claims.get("nick") or "",
    }


_ADAPTERS = {
    "feishu": (_feishu, _feishu_found),
    "wecom": (_wecom, _wecom_found),
    "dingtalk": (_dingtalk, _dingtalk_found),
}


def user_claims(
    provider: IdentityProvider, *, code: str, verifier: str, redirect_uri: str
) -> tuple[dict, dict]:
    """The platform user's claims (flat) and what matching uses: sub, im_ids, tenant, email,
    email_verified, name, employee_id. Raises SsoRefused."""
    fetch, normalize = _ADAPTERS[provider.kind]
    claims = fetch(provider, code=code, verifier=verifier, redirect_uri=redirect_uri)
    found = normalize(provider, claims)
    employee_claim = provider.claim_employee_id or DEFAULT_EMPLOYEE_CLAIM[provider.kind]
    found["employee_id"] = str(claims.get(employee_claim) or "").strip() if employee_claim else ""
    found["email"] = str(found["email"]).strip()
    found["name"] = str(found["name"]).strip()
    found["sub"] = str(found["sub"])
    found["im_ids"] = [str(value) for value in found["im_ids"]]
    return claims, found
