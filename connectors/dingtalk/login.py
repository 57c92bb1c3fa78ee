"""DingTalk login (not OpenID Connect): the authorization page (state; no PKCE), then the
code for the personal account and, through the app, the corp's member.

`login.dingtalk.com/oauth2/auth` → POST `api.dingtalk.com/v1.0/oauth2/userAccessToken` →
GET `/v1.0/contact/users/me` (unionId, openId, nick, email of the personal account) → the
corp's userid through `oapi.dingtalk.com/gettoken` + `/topapi/user/getbyunionid` and its
directory entry through `/topapi/v2/user/get` (job_number, org_email, dept_id_list).
"""

from __future__ import annotations

from urllib.parse import urlencode

from cadre.tenancy.models import IdentityProvider
from cadre.tenancy.services.im_login import call, refused

OAPI = "https://oapi.dingtalk.com"


def oapi_base(provider: IdentityProvider) -> str:
    """The old API's base URL (a provider's `api_base_url` serves both)."""
    return (provider.api_base_url or OAPI).rstrip("/")


class DingTalkLogin:
    """DingTalk's login, registered for `IdentityProvider.Kind.DINGTALK`."""

    default_urls = ("https://login.dingtalk.com", "https://api.dingtalk.com")
    default_employee_claim = "job_number"

    def authorize_url(
        self,
        provider: IdentityProvider,
        *,
        base: str,
        redirect_uri: str,
        state: str,
        challenge: str,
    ) -> str:
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

    def user_claims(
        self, provider: IdentityProvider, *, api: str, code: str, verifier: str, redirect_uri: str
    ) -> dict:
        status, token = call(
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
            raise refused(
                "token_exchange_failed", f"{token.get('code', status)}: {token.get('message', '')}"
            )
        status, me = call(
            "GET",
            f"{api}/v1.0/contact/users/me",
            headers={"x-acs-dingtalk-access-token": token["accessToken"]},
        )
        if status != 200 or not me.get("unionId"):
            raise refused(
                "platform_error", f"users/me {me.get('code', status)}: {me.get('message', '')}"
            )
        claims = {"corpId": token.get("corpId") or "", **me}
        # The corp's own userid (what the connector sees as senderStaffId) and directory entry.
        oapi = oapi_base(provider)
        _, app = call(
            "GET",
            f"{oapi}/gettoken",
            params={"appkey": provider.client_id, "appsecret": provider.client_secret},
        )
        if app.get("errcode", 0) != 0 or not app.get("access_token"):
            raise refused(
                "platform_error", f"gettoken errcode {app.get('errcode')}: {app.get('errmsg')}"
            )
        _, found = call(
            "POST",
            f"{oapi}/topapi/user/getbyunionid",
            params={"access_token": app["access_token"]},
            json={"unionid": me["unionId"]},
        )
        if found.get("errcode") == 60121:  # no such user in this corp
            return claims
        if found.get("errcode", 0) != 0:
            raise refused(
                "platform_error",
                f"getbyunionid errcode {found.get('errcode')}: {found.get('errmsg')}",
            )
        userid = str((found.get("result") or {}).get("userid") or "")
        if not userid:
            return claims
        _, detail = call(
            "POST",
            f"{oapi}/topapi/v2/user/get",
            params={"access_token": app["access_token"]},
            json={"userid": userid},
        )
        if detail.get("errcode", 0) != 0:
            raise refused(
                "platform_error",
                f"user/get errcode {detail.get('errcode')}: {detail.get('errmsg')}",
            )
        return {**claims, **(detail.get("result") or {}), "userid": userid}

    def found(self, provider: IdentityProvider, claims: dict) -> dict:
        if provider.tenant_key and claims.get("corpId") != provider.tenant_key:
            raise refused("wrong_tenant", f"corpId {claims.get('corpId')!r}")
        if not claims.get("userid") and provider.tenant_key:
            raise refused("not_in_directory", "the account is not in the corp's directory")
        # The directory's addresses are the corp's; users/me's `email` is the personal
        # account's, which DingTalk does not vouch for.
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


LOGIN = DingTalkLogin()
