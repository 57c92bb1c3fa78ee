"""Static files through the ASGI application as production serves them: the console's own
files, the npm packages under vendor/ and the favicon, with no warning from Django's handler."""

from __future__ import annotations

import asyncio
import warnings

import pytest
from asgiref.testing import ApplicationCommunicator


def _asgi_get(path: str) -> tuple[int, dict[bytes, bytes], bytes]:
    from cadre.asgi import application

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"testserver")],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 80),
    }

    async def exchange():
        communicator = ApplicationCommunicator(application, scope)
        await communicator.send_input({"type": "http.request", "body": b"", "more_body": False})
        start = await communicator.receive_output(timeout=30)
        body = b""
        while True:
            message = await communicator.receive_output(timeout=30)
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        await communicator.wait(timeout=5)
        return start["status"], {k.lower(): v for k, v in start["headers"]}, body

    return asyncio.run(exchange())


@pytest.mark.parametrize(
    ("path", "content_type", "piece"),
    [
        ("/static/console/cadre.css", b"text/css", b"--font"),
        ("/static/vendor/htmx.org/dist/htmx.min.js", b"text/javascript", b"htmx"),
        ("/static/vendor/lucide-static/icons/search.svg", b"image/svg+xml", b"<svg"),
        ("/static/console/favicon.svg", b"image/svg+xml", b"<svg"),
    ],
)
def test_a_static_file_is_served_under_asgi_without_a_warning(path, content_type, piece):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        status, headers, body = _asgi_get(path)
    assert status == 200
    assert headers[b"content-type"].startswith(content_type)
    assert piece in body
    assert [str(w.message) for w in caught if "StreamingHttpResponse" in str(w.message)] == []


@pytest.mark.django_db
def test_the_favicon_is_found_where_browsers_look_for_it(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 301
    assert response["Location"] == "/static/console/favicon.svg"


def test_an_icon_is_inline_svg_in_the_texts_colour_and_a_misspelt_one_is_an_error():
    from django.template import Context, Template, TemplateSyntaxError

    html = Template('{% load console %}{% icon "search" %}').render(Context())
    assert html.startswith('<svg aria-hidden="true" focusable="false"')
    assert 'stroke="currentColor"' in html and "@license" not in html
    with pytest.raises(TemplateSyntaxError, match="no icon 'serach'"):
        Template('{% load console %}{% icon "serach" %}').render(Context())


def test_pages_render_without_icons_when_the_package_is_not_installed(settings, tmp_path):
    from django.template import Context, Template

    from cadre.console.templatetags import console

    settings.FRONTEND_DIR = tmp_path  # no node_modules: `cadre doctor` says so
    settings.STATICFILES_DIRS = []
    console._icon_svg.cache_clear()
    try:
        assert Template('{% load console %}{% icon "plus" %}').render(Context()) == ""
    finally:
        console._icon_svg.cache_clear()
