"""ASGI entry point: HTTP through Django, websockets through Channels.

IM platform callbacks (/connectors/<platform>/<public id>/events) are answered by the
connectors' inbound edge in front of Django: the hot path skips the middleware stack (it bounds
their bodies itself, per platform). Everything else reaches Django through the body limit on the
bytes received (`cadre.api.middleware.ASGIBodySizeLimit`): a chunked body cannot pass the 413.
/mcp/ is the MCP server (`cadre.mcp_server`), outside Django: the SDK is an ASGI app.
"""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cadre.settings")
django_application = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from cadre.api.middleware import ASGIBodySizeLimit  # noqa: E402
from cadre.mcp_server.server import with_mcp  # noqa: E402
from cadre.routing import websocket_urlpatterns  # noqa: E402
from connectors.inbound.views import InboundEdge  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": with_mcp(InboundEdge(ASGIBodySizeLimit(django_application))),
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        ),
    }
)
