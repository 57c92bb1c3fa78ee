"""Signing in and out, and accepting an invitation (a public page reached by its link)."""

from __future__ import annotations

import math

from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.views import LoginView, LogoutView
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone, translation
from django.utils.translation import gettext, gettext_lazy, pgettext_lazy
from django.views.decorators.cache import never_cache
from django.views.decorators.debug import sensitive_post_parameters

from cadre.console.forms import InvitationAcceptForm, add_service_error, organization_zone
from cadre.console.views.base import posted
from cadre.errors import CadreError
from cadre.tenancy import services
from cadre.tenancy.languages import request_language
from cadre.tenancy.middleware import SESSION_KEY, SIGNIN_SCOPE_KEY
from cadre.tenancy.models import IdentityProvider, Organization
from cadre.tenancy.services.oidc import password_signin_screen
from cadre.tenancy.services.signin import signin_lock_wait, signin_username
from cadre.tenancy.services.sso_logout import sso_signout

_BACKEND = "django.contrib.auth.backends.ModelBackend"


class ConsoleLoginView(LoginView):
    """Sign in; a locked account or address (django-axes, see cadre.tenancy.services.signin)
    gets 429 with Retry-After and says so, whatever password was typed."""

    template_name = "console/login.html"
    redirect_authenticated_user = True

    def get_context_data(self, **kwargs):
        # ?org=<slug> lists that organization's "Sign in with …" buttons (docs/identity.md).
        context = super().get_context_data(**kwargs)
        slug = self.request.GET.get("org") or self.request.POST.get("org") or ""
        context["sso_org"] = slug
        context["sso_providers"] = (
            IdentityProvider.objects.filter(
                organization__slug=slug,
                organization__status=Organization.Status.ACTIVE,
                is_enabled=True,
            ).select_related("organization")
            if slug
            else []
        )
        return context

    def form_valid(self, form):
        # "SSO required": the password was right, but this member must use the provider.
        if password_signin_screen(user=form.get_user()) == "sso_required":
            form.add_error(
                None,
                gettext(
                    "Your organization requires single sign-on: use its "
                    '"Sign in with …" button instead of a password.'
                ),
            )
            return self.render_to_response(self.get_context_data(form=form), status=403)
        response = super().form_valid(form)
        # A password is the person's own: the session reaches all their organizations.
        self.request.session.pop(SIGNIN_SCOPE_KEY, None)
        return response

    def form_invalid(self, form):
        if not getattr(self.request, "axes_locked_out", False):
            return super().form_invalid(form)
        wait = signin_lock_wait(self.request, signin_username(self.request))
        context = self.get_context_data(form=form, locked_minutes=max(1, math.ceil(wait / 60)))
        response = self.render_to_response(context, status=429)
        response["Retry-After"] = str(wait)
        return response


class ConsoleLogoutView(LogoutView):
    """POST only (Django 5): a link or an image cannot sign someone out. A session that came
    from an OpenID Connect provider goes on to the provider's end_session_endpoint (RP-initiated
    logout), which returns the browser to the sign-in page; one from a SAML IdP goes on to its
    single logout service with Cadre's signed LogoutRequest."""

    def post(self, request, *args, **kwargs):
        back = request.build_absolute_uri(reverse("console:login"))
        provider_logout = sso_signout(
            session_key=request.session.session_key, post_logout_redirect_uri=back
        )
        response = super().post(request, *args, **kwargs)
        return redirect(provider_logout) if provider_logout else response


_INVALID = {
    "accepted": (
        gettext_lazy("This invitation was already used"),
        gettext_lazy("Each link works once. If it was you, sign in with the account you created."),
    ),
    "revoked": (
        gettext_lazy("This invitation was withdrawn"),
        gettext_lazy("An administrator revoked it or sent a newer link. Ask them for a new one."),
    ),
    "expired": (
        gettext_lazy("This invitation has expired"),
        gettext_lazy("Ask the administrator who invited you to send a new link."),
    ),
    "unknown": (
        gettext_lazy("This invitation link is not valid"),
        gettext_lazy("Check that the whole link was copied, or ask for a new one."),
    ),
}
# The page's small heading: "Invitation accepted", … (the state code stays in the markup).
_STATE_LABELS = {
    "accepted": pgettext_lazy("invitation state", "Invitation accepted"),
    "revoked": pgettext_lazy("invitation state", "Invitation revoked"),
    "expired": pgettext_lazy("invitation state", "Invitation expired"),
    "unknown": pgettext_lazy("invitation state", "Invitation unknown"),
}


@never_cache
@sensitive_post_parameters("password", "password_confirm")
def invitation_accept(request, token: str):
    invitation = services.invitation_lookup(token)
    state = invitation.state if invitation is not None else "unknown"
    if state != "pending":
        title, hint = _INVALID[state]
        return render(
            request,
            "console/invite_invalid.html",
            {"title": title, "hint": hint, "state": state, "state_label": _STATE_LABELS[state]},
            status=404 if state == "unknown" else 410,
        )
    # The invitee has no preference yet: their browser's language, else the organization's.
    if getattr(request, "member", None) is None:
        translation.activate(request_language(request, organization=invitation.organization))
        request.LANGUAGE_CODE = translation.get_language()

    signed_in = request.user.is_authenticated
    form = (
        None
        if signed_in
        else InvitationAcceptForm(
            posted(request), initial={"display_name": invitation.member.display_name}
        )
    )
    error = None
    if request.method == "POST" and (signed_in or form.is_valid()):
        try:
            if signed_in:
                member = services.invitation_accept(token=token, password=None, user=request.user)
            else:
                member = services.invitation_accept(
                    token=token,
                    password=form.cleaned_data["password"],
                    display_name=form.cleaned_data["display_name"],
                )
        except CadreError as caught:
            if form is not None:
                add_service_error(form, caught)
            else:
                error = caught.message
        else:
            if not signed_in:
                login(request, member.user, backend=_BACKEND)
            scope = request.session.get(SIGNIN_SCOPE_KEY)
            if scope is not None:
                # Accepted in this session: the organization joins what it may reach.
                request.session[SIGNIN_SCOPE_KEY] = [*scope, member.organization_id]
            request.session[SESSION_KEY] = member.organization_id
            messages.success(
                request,
                gettext("Welcome to %(organization)s. Your agents and conversations are here.")
                % {"organization": member.organization.name},
            )
            # Home is the person's own: their agents (each a link to chat) and conversations.
            return redirect("console:home")
    with timezone.override(organization_zone(invitation.organization)):
        return render(
            request,
            "console/invite.html",
            {
                "invitation": invitation,
                "organization": invitation.organization,
                "form": form,
                "error": error,
                "signed_in": signed_in,
            },
        )
