"""WeCom login (not OpenID Connect): the corp's SSO page (corp id, agent id, state; no PKCE),
then the code for the member of the corp.

`login.work.weixin.qq.com/wwlogin/sso/login` → GET `/cgi-bin/gettoken` (corp id + app secret)
→ GET `/cgi-bin/auth/getuserinfo` (access_token + code): `userid` for a member of the corp,
`openid` for an outsider → GET `/cgi-bin/user/get`: name, department, position, email,
biz_mail.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.core.cache import cache

from cadre.tenancy.models import IdentityProvider
from cadre.tenancy.services.im_login import call, refused


def errcode_check(body: dict, what: str) -> None:
    """SsoRefused (platform_error) for an answer with a non-zero errcode."""
    if body.get("errcode", 0) != 0:
        raise refused(
            "platform_error", f"{what} errcode {body.get('errcode')}: {body.get('errmsg')}"
        )


def token_cache_key(provider: IdentityProvider) -> str:
    return f"imlogin:wecom:token:{provider.pk}:{provider.client_id}"


def app_token(provider: IdentityProvider, api: str) -> str:
    """The app's access token (cached below its lifetime)."""
    key = token_cache_key(provider)
    token = cache.get(key)
    if token:
        return token
    _, body = call(
        "GET",
        f"{api}/cgi-bin/gettoken",
        params={"corpid": provider.client_id, "corpsecret": provider.client_secret},
    )
    errcode_check(body, "gettoken")
    token = str(body.get("access_token") or "")
    if not token:
        raise refused("platform_error", "gettoken returned no access_token")
    cache.set(key, token, max(60, int(body.get("expires_in") or 7200) - 300))
    return token


class WeComLogin:
    """WeCom's login, registered for `IdentityProvider.Kind.WECOM`."""

    default_urls = ("https://login.work.weixin.qq.com", "https://qyapi.weixin.qq.com")
    default_employee_claim = ""

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
            "login_type": "CorpApp",
            "appid": provider.client_id,
            "agentid": provider.agent_id,
            "redirect_uri": redirect_uri,
            "state": state,
        }
        return f"{base}/wwlogin/sso/login?{urlencode(query)}"

    def user_claims(
        self, provider: IdentityProvider, *, api: str, code: str, verifier: str, redirect_uri: str
    ) -> dict:
        token = app_token(provider, api)
        _, who = call(
            "GET", f"{api}/cgi-bin/auth/getuserinfo", params={"access_token": token, "code": code}
        )
        if who.get("errcode") in (40014, 42001):  # the cached app token expired early: once more
            cache.delete(token_cache_key(provider))
            raise refused("platform_error", f"getuserinfo errcode {who.get('errcode')}: retry")
        if who.get("errcode", 0) != 0:
            reason = (
                "token_exchange_failed"
                if who.get("errcode") in (40029, 40163)
                else "platform_error"
            )
            raise refused(reason, f"getuserinfo errcode {who.get('errcode')}: {who.get('errmsg')}")
        userid = str(who.get("userid") or who.get("UserId") or "")
        if not userid:
            # An `openid` instead: someone outside this corp's directory.
            raise refused("not_in_directory", "getuserinfo returned no userid")
        _, detail = call(
            "GET", f"{api}/cgi-bin/user/get", params={"access_token": token, "userid": userid}
        )
        errcode_check(detail, "user/get")
        kept = {k: v for k, v in detail.items() if k not in ("errcode", "errmsg")}
        return {**kept, "userid": userid}

    def found(self, provider: IdentityProvider, claims: dict) -> dict:
        email = claims.get("biz_mail") or claims.get("email") or ""
        return {
            "sub": claims["userid"],
            "im_ids": [claims["userid"]],
            "tenant": provider.client_id,
            "email": email,
            "email_verified": bool(email),  # both are kept by the corp's admins
            "name": claims.get("name") or "",
        }


LOGIN = WeComLogin()
