"""What every console view shares: the permission gate, the 403 page, pagination.

The gate resolves the actor (`request.actor`); what a view reads is scoped to that actor by
`cadre.console.scoping` (`restricted`, `get_restricted_or_404`), the console's one tenancy gate.
"""

from __future__ import annotations

from functools import wraps
from urllib.parse import urlencode

from django.contrib.auth.views import redirect_to_login
from django.core.paginator import Paginator
from django.shortcuts import render
from django.utils import timezone
from django.utils.translation import gettext as _

from cadre.console.forms import organization_zone
from cadre.tenancy.roles import PERMISSIONS

PAGE_SIZE = 25


def denied(request, message: str, *, status: int = 403):
    """The console's 'access denied' page (the same template as Django's error handlers)."""
    return render(
        request, "errors/error.html", {"status": status, "message": message}, status=status
    )


def require_permission(permission: str | None = None):
    """Gate a view: anonymous → sign-in page; no membership or no permission → 403 page.

    `actor.may` is used (organization-wide or through an object grant), so a department HR
    lead reaches the members page; the services still check each object they touch.
    """

    def decorator(view):
        @wraps(view)
        def wrapped(request, *args, **kwargs):
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            actor = getattr(request, "actor", None)
            if actor is None:
                return render(request, "console/no_membership.html", status=403)
            if permission and not actor.may(permission):
                description = PERMISSIONS.get(permission, permission)
                return denied(
                    request,
                    _(
                        "This page needs the “%(description)s” permission (%(permission)s). "
                        "Ask an owner or an IT admin of your organization if you need it."
                    )
                    % {"description": description, "permission": permission},
                )
            # Dates on console pages are shown in the organization's time zone.
            with timezone.override(organization_zone(actor.organization)):
                return view(request, *args, **kwargs)

        wrapped.permission = permission
        return wrapped

    return decorator


def paginate(request, queryset, per_page: int = PAGE_SIZE):
    """A page of `queryset` from ?page= (out-of-range pages show the last page)."""
    paginator = Paginator(queryset, per_page)
    return paginator.get_page(request.GET.get("page"))


def query_without_page(request) -> str:
    """The current filters as a query string, for pagination links to carry them."""
    params = [
        (key, value)
        for key, values in request.GET.lists()
        if key != "page"
        for value in values
        if value != ""
    ]
    return urlencode(params)


def posted(request):
    """The POST data on a POST (even an empty one, which must still be validated), else None.

    `request.POST or None` would leave a form unbound on an empty POST and skip validation.
    """
    return request.POST if request.method == "POST" else None
