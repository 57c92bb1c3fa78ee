"""Top-level URL map: console, REST API, OpenAPI schema and docs, health checks."""

from __future__ import annotations

from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

import connectors.urls as connectors_urls
import hub.urls as hub_urls
from cadre.api import views as api_views
from cadre.compat import urls as compat_urls
from cadre.runtime.health import healthz, readyz

api_v1 = [
    path("", include("cadre.tenancy.api.urls")),
    path("", include("cadre.governance.api.urls")),
    path("", include("cadre.memory.api.urls")),
    path("", include("cadre.viewer.urls")),
    path("", include("cadre.governance.masking.api")),
    path("", include("cadre.agents.api.urls")),
    path("evaluation/", include("cadre.agents.evaluation.api")),
    path("", include(connectors_urls.api_urlpatterns)),
    path("hub/", include(hub_urls.api_urlpatterns)),
    path("skills/", include("cadre.skills.api")),
    path("", include(hub_urls.clawhub_urlpatterns)),
]

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("readyz", readyz, name="readyz"),
    # Browsers and feed readers ask for /favicon.ico whatever the page links to.
    path("favicon.ico", RedirectView.as_view(url=static("console/favicon.svg"), permanent=True)),
    path("api/v1/", include(api_v1)),
    path("connectors/", include(connectors_urls.urlpatterns)),
    # Memory APIs other clients speak: MemoryClient(host="<CADRE_BASE_URL>/mem0"),
    # MemOS plugins with MEMOS_BASE_URL=<CADRE_BASE_URL>/memos
    path("mem0/", include(compat_urls.mem0_urlpatterns)),
    path("memos/", include(compat_urls.memos_urlpatterns)),
    path("scim/v2/", include("cadre.tenancy.scim.urls")),
    path("", include(hub_urls.site_urlpatterns)),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="schema"), name="api-docs"),
    path("api/", api_views.unknown_endpoint),
    path("api/<path:rest>", api_views.unknown_endpoint),
    path("", include("cadre.console.urls")),
]

handler400 = "cadre.api.views.bad_request"
handler403 = "cadre.api.views.permission_denied"
handler404 = "cadre.api.views.not_found"
handler500 = "cadre.api.views.server_error"
