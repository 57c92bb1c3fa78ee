"""cadre.asgi with views that fail on purpose, for the live server of tests/api/test_error_path.py.

uvicorn serves `tests.api.error_path_app:application`: Cadre's own application, whose URLconf is
this module (Cadre's routes plus the failing ones under /_test/ and /api/v1/_test/). Each failing
view takes a pooled connection first, as a real view does before it fails.
"""

from __future__ import annotations

import threading

from django.conf import settings
from django.http import HttpResponse, StreamingHttpResponse
from django.urls import path

from cadre.asgi import application  # noqa: F401 - what uvicorn serves


class Failed(RuntimeError):
    """The failure the views raise on purpose."""


def _touch_database() -> None:
    from cadre.tenancy.models import Member

    Member.objects.exists()


def fails(request):
    """A console-style Django view that fails after a query (session, anonymous)."""
    _touch_database()
    raise Failed("on purpose")


def _fails_in_api_view():
    """A DRF view that fails after a query; under /_test/ it stands for /mem0/ and /memos/
    (a DRF view with API-key auth on a path that is not /api/). Built on first use: DRF's
    APIView imports Cadre's authentication classes, which need the apps ready."""
    from rest_framework.permissions import AllowAny
    from rest_framework.views import APIView

    class FailsInApi(APIView):
        permission_classes = [AllowAny]
        throttle_classes: list = []

        def get(self, request):
            _touch_database()
            raise Failed("on purpose")

    return FailsInApi.as_view()


def stream_fails(request):
    """A streamed body whose producer fails after a query (an export that breaks mid-way)."""

    def chunks():
        yield b"first chunk\n"
        _touch_database()
        raise Failed("on purpose, mid-stream")

    return StreamingHttpResponse(chunks(), content_type="text/plain")


def thread_keeps_connection(request):
    """A view that hands the ORM to a thread of its own, which ends without closing its
    connection: nothing in Django will give that connection back."""
    worker = threading.Thread(target=_touch_database)
    worker.start()
    worker.join()
    return HttpResponse("done")


def _test_routes() -> list:
    in_api_view = _fails_in_api_view()
    return [
        path("_test/fails/", fails),
        path("_test/fails-in-api-view/", in_api_view),
        path("_test/fails-twice/", fails),
        path("_test/stream-fails/", stream_fails),
        path("_test/thread-keeps-connection/", thread_keeps_connection),
        path("api/v1/_test/fails/", in_api_view),
    ]


def __getattr__(name: str):
    """The URLconf's other attributes are Cadre's (imported on first use: its modules need
    the apps ready, which importing cadre.asgi above made them)."""
    from cadre import urls

    if name == "urlpatterns":
        return [*_test_routes(), *urls.urlpatterns]
    if name in ("handler400", "handler403", "handler404"):
        return getattr(urls, name)
    raise AttributeError(name)


def handler500(request):
    """Cadre's 500 page, except under /_test/fails-twice/, where the 500 page itself fails
    (what the console's 500 page did for an API key)."""
    from cadre.api.views import server_error

    if request.path == "/_test/fails-twice/":
        _touch_database()
        raise Failed("the error page failed too")
    return server_error(request)


settings.ROOT_URLCONF = __name__
