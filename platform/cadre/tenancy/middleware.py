"""Resolve the signed-in user's current membership into `request.actor` for every request."""

from __future__ import annotations

from cadre.tenancy.actors import member_actor
from cadre.tenancy.models import Member, Organization

SESSION_KEY = "cadre_organization_id"


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
                member = memberships(user).filter(organization_id=wanted).first()
            if member is None:
                member = memberships(user).first()
                if member is not None:
                    request.session[SESSION_KEY] = member.organization_id
            if member is not None:
                request.member = member
                request.actor = member_actor(member)
        return self.get_response(request)
