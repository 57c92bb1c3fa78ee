"""OpenAPI descriptions of Cadre's authentication schemes (drf-spectacular extensions)."""

from __future__ import annotations

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class ApiKeyScheme(OpenApiAuthenticationExtension):
    target_class = "cadre.tenancy.authentication.ApiKeyAuthentication"
    name = "ApiKey"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "Organization API key: `Authorization: Bearer cadre_<prefix>_<secret>`",
        }


class SessionScheme(OpenApiAuthenticationExtension):
    target_class = "cadre.tenancy.authentication.SessionAuthentication"
    name = "Session"

    def get_security_definition(self, auto_schema):
        return {"type": "apiKey", "in": "cookie", "name": "sessionid"}
