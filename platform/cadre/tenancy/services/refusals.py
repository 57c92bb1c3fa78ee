"""Why a sign-in was refused: the sentence a person reads for each reason, and `SsoRefused`,
which every login raises (OpenID Connect, SAML, the IM platforms' logins, single logout)."""

from __future__ import annotations

from django.utils.translation import gettext_lazy as _

REASONS = {
    "state_unknown": _("The sign-in link was already used or has expired. Start again."),
    "provider_error": _("The identity provider refused the sign-in."),
    "provider_unreachable": _("The identity provider could not be reached."),
    "code_missing": _("The identity provider returned no authorization code."),
    "token_exchange_failed": _("The identity provider did not accept the authorization code."),
    "bad_signature": _("The identity token's signature is not valid."),
    "unknown_key": _("The identity token is signed with a key the provider does not publish."),
    "wrong_issuer": _("The identity token was issued by another provider."),
    "wrong_audience": _("The identity token was issued for another application."),
    "expired": _("The identity token has expired."),
    "nonce_mismatch": _("The identity token does not belong to this sign-in."),
    "nonce_replayed": _("The identity token was already used."),
    "invalid_token": _("The identity token is malformed or incomplete."),
    "email_unverified": _("The provider does not vouch for this e-mail address."),
    "unknown_user": _("No member of this organization matches this account."),
    "ambiguous_user": _("This account matches more than one member; an administrator must fix it."),
    "platform_error": _("The IM platform returned an error."),
    "wrong_tenant": _("This account belongs to another company on the IM platform."),
    "not_in_directory": _("This account is not in the company's directory on the IM platform."),
    "member_inactive": _("This member is deactivated."),
    "link_held": _(
        "Someone other than this member changed the e-mail, employee number or IM account this "
        "sign-in matched: an owner must allow single sign-on to link the account first."
    ),
    "signature_missing": _("The SAML response and its assertion are not signed."),
    "not_yet_valid": _("The SAML assertion is not valid yet (check the clocks)."),
    "wrong_destination": _("The SAML assertion was sent to another address."),
    "response_invalid": _("The SAML response is malformed or incomplete."),
    "assertion_replayed": _("The SAML assertion was already used."),
    "relay_state_invalid": _("The sign-in came back with a RelayState Cadre did not issue."),
    "logout_token_invalid": _("The logout token is not valid."),
    "claims_invalid": _(
        "The identity provider sent account details Cadre cannot keep (control characters, "
        "broken text or values too long)."
    ),
}


class SsoRefused(Exception):
    """A sign-in refused for `reason` (a key of REASONS)."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(reason)
        self.reason = reason
        self.detail = detail

    @property
    def message(self) -> str:
        return str(REASONS[self.reason])
