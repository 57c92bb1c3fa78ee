"""The console's language switcher and its JavaScript catalog (docs/i18n.md)."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpResponseBadRequest
from django.shortcuts import redirect
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.views.decorators.http import last_modified, require_POST
from django.views.i18n import JavaScriptCatalog

from cadre.tenancy.languages import supported
from cadre.tenancy.services import member_language_set

# Only the console's own scripts' strings (the `djangojs` domain). It changes only when the
# process does (a release): a browser asking again gets a 304 (Django's recommended setup).
STARTED = timezone.now()
javascript_catalog = last_modified(lambda request: STARTED)(
    JavaScriptCatalog.as_view(packages=["cadre.console"])
)


def _back(request) -> str:
    """Where the form was sent from, if it is one of this site's pages."""
    for candidate in (request.POST.get("next", ""), request.headers.get("Referer", "")):
        if candidate and url_has_allowed_host_and_scheme(
            candidate, allowed_hosts={request.get_host()}, require_https=request.is_secure()
        ):
            return candidate
    return "console:home" if request.member is not None else "console:login"


@require_POST
def set_language(request):
    """Switch the language: a signed-in member's preference is saved on them (every device,
    IM included); anyone's browser keeps it in a cookie (the sign-in page)."""
    asked = request.POST.get("language", "")
    language = supported(asked) if asked else ""
    if language is None:
        return HttpResponseBadRequest(_("Cadre does not speak that language."))
    if request.member is not None:
        member_language_set(actor=request.actor, member=request.member, language=language)
    response = redirect(_back(request))
    if language:
        response.set_cookie(
            settings.LANGUAGE_COOKIE_NAME,
            language,
            max_age=365 * 86400,
            samesite=settings.LANGUAGE_COOKIE_SAMESITE,
            secure=settings.LANGUAGE_COOKIE_SECURE,
            httponly=True,
        )
    else:
        response.delete_cookie(settings.LANGUAGE_COOKIE_NAME)
    return response
