"""Feishu / Lark login (not OpenID Connect): the authorization page with state and PKCE S256,
then the code for a user_access_token and the user.

`accounts.feishu.cn/open-apis/authen/v1/authorize` → POST
`open.feishu.cn/open-apis/authen/v2/oauth/token` (RFC 6749 body, JSON) → GET
`/open-apis/authen/v1/user_info` (Bearer user_access_token): open_id, union_id, user_id,
tenant_key, name, email, enterprise_email, employee_no.
"""

from __future__ import annotations

from urllib.parse import urlencode

from cadre.tenancy.models import IdentityProvider
from cadre.tenancy.services.im_login import call, refused


class FeishuLogin:
    """Feishu / Lark's login, registered for `IdentityProvider.Kind.FEISHU`."""

    default_urls = ("https://accounts.feishu.cn", "https://open.feishu.cn")
    default_employee_claim = "employee_no"

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

    def user_claims(
        self, provider: IdentityProvider, *, api: str, code: str, verifier: str, redirect_uri: str
    ) -> dict:
        status, token = call(
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
            raise refused("token_exchange_failed", detail.strip())
        status, answer = call(
            "GET",
            f"{api}/open-apis/authen/v1/user_info",
            headers={"Authorization": f"Bearer {token['access_token']}"},
        )
        if status != 200 or answer.get("code") != 0 or not isinstance(answer.get("data"), dict):
            raise refused(
                "platform_error", f"user_info code {answer.get('code')}: {answer.get('msg')}"
            )
        return dict(answer["data"])

    def found(self, provider: IdentityProvider, claims: dict) -> dict:
        if not (claims.get("union_id") or claims.get("open_id")):
            raise refused("invalid_token", "user_info has neither union_id nor open_id")
        if provider.tenant_key and claims.get("tenant_key") != provider.tenant_key:
            raise refused("wrong_tenant", f"tenant_key {claims.get('tenant_key')!r}")
        # Both addresses come from the tenant's directory (set by its admins), not typed by the
        # user.
        email = claims.get("enterprise_email") or claims.get("email") or ""
        return {
            "sub": str(claims.get("union_id") or claims["open_id"]),
            "im_ids": [claims[k] for k in ("open_id", "union_id", "user_id") if claims.get(k)],
            "tenant": claims.get("tenant_key") or "",
            "email": email,
            "email_verified": bool(email),
            "name": claims.get("name") or claims.get("en_name") or "",
        }


LOGIN = FeishuLogin()
