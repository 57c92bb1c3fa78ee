"""Template context for every console page: navigation, organization switcher, actor.

The navigation and the membership list are lazy: pages that do not draw the shell (the
sign-in page, error pages, API responses) cost no queries, and an error page still renders
when the database is the thing that failed.
"""

from __future__ import annotations

from django.utils.functional import SimpleLazyObject

from cadre.console.navigation import navigation_for


def console(request) -> dict:
    actor = getattr(request, "actor", None)
    context = {"actor": actor, "current_member": getattr(request, "member", None)}
    if actor is not None:
        from cadre.tenancy.middleware import memberships

        context["navigation"] = SimpleLazyObject(lambda: navigation_for(actor, request.path))
        context["memberships"] = SimpleLazyObject(lambda: list(memberships(request.user)))
    return context
