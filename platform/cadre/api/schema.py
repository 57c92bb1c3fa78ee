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


# Error responses every operation may give, by status: when each applies and what it means.
# The body is the one error envelope (cadre.api.errors); the ClawHub-compatible routes
# answer errors as plain text because the ClawHub CLI prints the body as it is.
_ERRORS: dict[str, str] = {
    "400": "Invalid input (code `invalid`; `details` names the fields).",
    "401": "No credentials, or an unknown, revoked or expired API key.",
    "403": "Authenticated, but neither the caller's role nor the key's scopes allow this.",
    "404": "No such object in the caller's organization (another organization's objects are "
    "never revealed), or a page past the last one.",
    "409": "The object's state does not allow this change now.",
    "413": "The request body is larger than CADRE_MAX_BODY_BYTES.",
    "415": "The request body's media type is not accepted here.",
    "429": "Rate limit reached (code `throttled`; `Retry-After` says when to retry).",
}
_WRITES = {"post", "put", "patch", "delete"}

ERROR_SCHEMA = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message", "details"],
            "properties": {
                "code": {"type": "string", "example": "not_found"},
                "message": {"type": "string", "example": "Not found."},
                "details": {
                    "description": "Field errors for `invalid`, `retry_after` for `throttled`, "
                    "else empty.",
                    "anyOf": [{"type": "object", "additionalProperties": {}}, {"type": "array"}],
                },
            },
        }
    },
}


def _error_statuses(operation: dict, method: str) -> list[str]:
    parameters = operation.get("parameters", [])
    has_body = "requestBody" in operation
    clawhub = operation.get("operationId", "").startswith("clawhub_")
    statuses = ["429"]
    if has_body or any(p["in"] == "query" for p in parameters):
        statuses.append("400")
    # Public writes (signed business events) check their own signature and CSRF.
    if operation.get("security") or method in _WRITES:
        statuses += ["401", "403"]
    # ClawHub routes name their skill in the query (?slug=) as often as in the path.
    if clawhub or any(p["in"] == "path" or p["name"] == "page" for p in parameters):
        statuses.append("404")
    if method in _WRITES:
        statuses.append("409")
    if has_body:
        statuses += ["413", "415"]
    return sorted(statuses)


def document_errors(result, generator, request, public):
    """drf-spectacular postprocessing hook: every operation documents the error responses it
    can give, with the error envelope, so clients (and schemathesis) know every status."""
    components = result.setdefault("components", {})
    components.setdefault("schemas", {})["Error"] = ERROR_SCHEMA
    shared = components.setdefault("responses", {})
    for status, description in _ERRORS.items():
        shared[f"Error{status}"] = {
            "description": description,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
        }
        shared[f"PlainError{status}"] = {
            "description": description,
            "content": {"text/plain": {"schema": {"type": "string"}}},
        }
    for item in result.get("paths", {}).values():
        for method, operation in item.items():
            plain = operation.get("operationId", "").startswith("clawhub_")
            prefix = "PlainError" if plain else "Error"
            responses = operation["responses"]
            for status in _error_statuses(operation, method):
                responses.setdefault(status, {"$ref": f"#/components/responses/{prefix}{status}"})
            # An error a view documents itself (OpenApiResponse with a description) gets the
            # envelope as its body.
            for status, response in responses.items():
                if status in _ERRORS and "$ref" not in response and "content" not in response:
                    response["content"] = shared[f"{prefix}{status}"]["content"]
    return result
