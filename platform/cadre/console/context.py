"""Template context for every console page: navigation, organization switcher, actor."""

from __future__ import annotations

from cadre.console.navigation import navigation_for


def console(request) -> dict:
    actor = getattr(request, "actor", None)
    context = {"actor": actor, "current_member": getattr(request, "member", None)}
    if actor is not None:
        from cadre.tenancy.middleware import memberships

        context["navigation"] = navigation_for(actor, request.path)
        context["memberships"] = list(memberships(request.user))
    return context
