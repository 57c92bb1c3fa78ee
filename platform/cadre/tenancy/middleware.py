"""Resolve the signed-in user's current membership into `request.actor` for every request."""

from __future__ import annotations

from django.utils import translation
from django.utils.cache import patch_vary_headers

from cadre.tenancy.actors import member_actor
from cadre.tenancy.languages import request_language
from cadre.tenancy.models import Member, Organization

SESSION_KEY = "cadre_organization_id"
# The organizations a session may act in when an identity provider opened it: the provider
# vouches for its own organization's member only, so a login that also belongs to other
# organizations (joined by accepting their invitations) reaches them only after a password
# sign-in or an invitation accepted in this session. Absent: every membership.
SIGNIN_SCOPE_KEY = "cadre_signin_organizations"


def memberships(user):
    return (
        Member.objects.select_related("organization")
        .filter(
            user=user,
            status=Member.Status.ACTIVE,
            organization__status=Organization.Status.ACTIVE,
        )
        .order_by("organization__name")
    )


def session_memberships(session, user):
    """The user's memberships this session may act in (see SIGNIN_SCOPE_KEY)."""
    members = memberships(user)
    scope = session.get(SIGNIN_SCOPE_KEY) if session is not None else None
    if scope is not None:
        members = members.filter(organization_id__in=scope)
    return members


class ActorMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        request.actor = None
        request.member = None
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated:
            wanted = request.session.get(SESSION_KEY)
            member = None
            if wanted:
                member = (
                    session_memberships(request.session, user)
                    .filter(organization_id=wanted)
                    .first()
                )
            if member is None:
                member = session_memberships(request.session, user).first()
                if member is not None:
                    request.session[SESSION_KEY] = member.organization_id
            if member is not None:
                request.member = member
                request.actor = member_actor(member)
        return self.get_response(request)


class LanguageMiddleware:
    """Activates the language the reader reads (cadre.tenancy.languages): the signed-in
    member's preference, else the browser's, else the organization's default. API keys are
    resolved later, by DRF: their authentication activates the key member's language."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        language = request_language(request, request.member)
        translation.activate(language)
        request.LANGUAGE_CODE = language
        response = self.get_response(request)
        patch_vary_headers(response, ("Accept-Language", "Cookie"))
        response.headers.setdefault("Content-Language", translation.get_language())
        return response
