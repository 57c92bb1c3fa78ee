"""Template context for every console page: navigation, organization switcher, actor.

The navigation and the membership list are lazy: pages that do not draw the shell (the
sign-in page, error pages, API responses) cost no queries. They exist only for a member signed
in to the console: an API key's principal (`KeyPrincipal`) or an anonymous visitor has no
memberships to list, and asking the database for them with such a principal would raise inside
an error page. The 500 page renders without this processor at all (cadre.api.views).
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.utils.functional import SimpleLazyObject

from cadre.console.navigation import navigation_for
from cadre.tenancy.middleware import session_memberships


def console(request) -> dict:
    actor = getattr(request, "actor", None)
    member = getattr(request, "member", None)
    context = {"actor": actor, "current_member": member}
    user = getattr(request, "user", None)
    if actor is not None and member is not None and isinstance(user, get_user_model()):
        context["navigation"] = SimpleLazyObject(lambda: navigation_for(actor, request.path))
        context["memberships"] = SimpleLazyObject(
            lambda: list(session_memberships(request.session, user))
        )
    return context
