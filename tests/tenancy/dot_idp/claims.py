"""The identity provider's claims, as an IdP administrator configures them in
django-oauth-toolkit: e-mail with `email_verified`, name, an employee number and a `groups`
claim (the user's Django groups) behind a `groups` scope. The userinfo endpoint answers the
same claims (OAuth2Validator.get_userinfo_claims reads get_additional_claims)."""

from __future__ import annotations

from oauth2_provider.oauth2_validators import OAuth2Validator

from tests.tenancy.dot_idp.models import Profile


class ClaimsValidator(OAuth2Validator):
    oidc_claim_scope = {
        **OAuth2Validator.oidc_claim_scope,
        "employee_no": "profile",
        "groups": "groups",
    }

    def get_additional_claims(self, request):
        user = request.user
        profile = Profile.objects.filter(user=user).first()
        claims = {
            "email": user.email,
            "email_verified": bool(profile and profile.email_verified),
            "name": user.get_full_name() or user.username,
            "preferred_username": user.username,
            "groups": sorted(user.groups.values_list("name", flat=True)),
        }
        if profile and profile.employee_no:
            claims["employee_no"] = profile.employee_no
        return claims
