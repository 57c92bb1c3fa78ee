"""SCIM 2.0 endpoints: thin adapters from the protocol to the provisioning services."""

from __future__ import annotations

import json
import re

from django.core.exceptions import RequestDataTooBig
from django.db import transaction
from django.http import HttpResponse, JsonResponse
from django.utils.translation import gettext
from django.views.decorators.csrf import csrf_exempt
from pydantic import ValidationError
from scim2_models import (
    Context,
    Error,
    Group,
    ListResponse,
    NotFoundException,
    NotImplementedException,
    PatchOp,
    PreconditionFailedException,
    ResponseParameters,
    SCIMException,
)

from cadre.errors import CadreError, Conflict, InvalidInput, NotPermitted
from cadre.identifiers import parse_pk
from cadre.tenancy.authentication import (
    ScimTokenRefused,
    scim_token_actor,
    scim_token_authenticate,
)
from cadre.tenancy.models import Department, Member
from cadre.tenancy.scim import schemas
from cadre.tenancy.scim.mapping import (
    GROUP_FILTER_FIELDS,
    USER_FILTER_FIELDS,
    filter_q,
    group_document,
    user_document,
    user_fields,
)
from cadre.tenancy.services import (
    scim_group_delete,
    scim_group_provision,
    scim_user_delete,
    scim_user_provision,
)

CONTENT_TYPE = "application/scim+json"
UserResource = schemas.UserResource


class MethodNotAllowed(SCIMException):
    status = 405


def _error(status: int, detail: str, scim_type: str | None = None) -> JsonResponse:
    body = Error(status=status, scim_type=scim_type, detail=detail).model_dump(
        scim_ctx=Context.RESOURCE_QUERY_RESPONSE
    )
    response = JsonResponse(body, status=status, content_type=CONTENT_TYPE)
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="scim"'
    return response


def _refused(exc: ScimTokenRefused) -> JsonResponse:
    response = _error(exc.status, str(exc))
    if exc.retry_after is not None:
        response["Retry-After"] = str(int(exc.retry_after + 0.999))
    return response


def _scim_error(exc: SCIMException) -> JsonResponse:
    return _error(exc.status, exc.detail, exc.scim_type or None)


def _cadre_error(exc: CadreError) -> JsonResponse:
    if isinstance(exc, Conflict):
        code = getattr(exc, "code", "")
        return _error(409, str(exc), "uniqueness" if code == "duplicate" else None)
    if isinstance(exc, NotPermitted):
        return _error(403, str(exc))
    if isinstance(exc, InvalidInput):
        return _error(400, str(exc), "invalidValue")
    return _error(getattr(exc, "status", 400), str(exc))


def _base_url(request) -> str:
    return request.build_absolute_uri("/scim/v2/")


def _respond(body: dict, status: int = 200, etag: str | None = None) -> JsonResponse:
    response = JsonResponse(body, status=status, content_type=CONTENT_TYPE)
    if etag:
        response["ETag"] = etag
    if status == 201 and body.get("meta", {}).get("location"):
        response["Location"] = body["meta"]["location"]
    return response


def _invalid(detail: str) -> SCIMException:
    return SCIMException(detail=detail, scim_type="invalidValue")


def _check_text(value: str) -> None:
    """PostgreSQL stores no NUL character and no lone surrogate: both are the client's mistake."""
    if "\x00" in value:
        raise _invalid(gettext("Text may not contain NUL characters."))
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise _invalid(gettext("Text may not contain lone surrogates.")) from None


def _check_values(document) -> None:
    """Every string (keys too) of a parsed body, walked without recursion."""
    pending = [document]
    while pending:
        value = pending.pop()
        if isinstance(value, str):
            _check_text(value)
        elif isinstance(value, dict):
            pending.extend(value.keys())
            pending.extend(value.values())
        elif isinstance(value, list):
            pending.extend(value)


def _body(request) -> dict:
    try:
        body = json.loads(request.body or b"{}")
    except (ValueError, RecursionError):  # RecursionError: nesting deeper than Python parses
        raise SCIMException(detail=gettext("The body is not JSON.")) from None
    if not isinstance(body, dict):
        raise SCIMException(detail=gettext("The body must be a JSON object."))
    _check_values(body)
    return body


def _parameters(query, model) -> ResponseParameters:
    def names(key):
        value = query.get(key) or None
        return ",".join(value) if isinstance(value, list) else value

    try:
        return ResponseParameters[model].model_validate(
            {"attributes": names("attributes"), "excludedAttributes": names("excludedAttributes")}
        )
    except ValidationError as exc:
        raise SCIMException(
            detail=gettext("Bad attributes: %(msg)s") % {"msg": exc.errors()[0]["msg"]}
        ) from None


def _dump(model, document: dict, parameters=None) -> dict:
    return model.model_validate(document).model_dump(
        scim_ctx=Context.RESOURCE_QUERY_RESPONSE, response_parameters=parameters
    )


def _check_if_match(request, document: dict) -> None:
    wanted = request.headers.get("If-Match")
    if wanted and wanted.strip() != "*":
        tags = {tag.strip() for tag in wanted.split(",")}
        version = document["meta"]["version"]
        if version not in tags and version.removeprefix("W/") not in tags:
            raise PreconditionFailedException(
                detail=gettext("The resource changed since that version (If-Match).")
            )


def scim_view(handler):
    """Authenticate the organization's SCIM token; map every refusal to a SCIM Error."""

    @csrf_exempt
    def view(request, *args, **kwargs):
        try:
            token = scim_token_authenticate(request)
        except ScimTokenRefused as refused:
            return _refused(refused)
        actor = scim_token_actor(token)
        try:
            for name, values in request.GET.lists():
                _check_values([name, *values])
            if request.method in ("GET", "HEAD"):
                return handler(request, actor, *args, **kwargs)
            # A change commits only with its answer: a response that cannot be built (and
            # answers an error) rolls the change back, so the identity provider's retry
            # finds the resource as it was.
            with transaction.atomic():
                return handler(request, actor, *args, **kwargs)
        except RequestDataTooBig:
            return _error(413, gettext("The request body is larger than allowed."))
        except SCIMException as exc:
            return _scim_error(exc)
        except ValidationError as exc:
            return _error(
                400, Error.from_validation_error(exc.errors()[0]).detail or str(exc), "invalidValue"
            )
        except CadreError as exc:
            return _cadre_error(exc)

    return view


# --- discovery ----------------------------------------------------------------------------


def _listed(items: list[dict]) -> dict:
    return {
        "schemas": ["urn:ietf:params:scim:api:messages:2.0:ListResponse"],
        "totalResults": len(items),
        "startIndex": 1,
        "itemsPerPage": len(items),
        "Resources": items,
    }


def _with_meta(item, resource_type: str, location: str) -> dict:
    body = item.model_dump(scim_ctx=Context.RESOURCE_QUERY_RESPONSE)
    body["meta"] = {"resourceType": resource_type, "location": location}
    return body


def _read_only(request) -> None:
    if request.method != "GET":
        raise MethodNotAllowed(detail=gettext("Discovery endpoints are read-only."))


@scim_view
def service_provider_config(request, actor):
    _read_only(request)
    base = _base_url(request)
    return _respond(
        _with_meta(
            schemas.service_provider_config(),
            "ServiceProviderConfig",
            f"{base}ServiceProviderConfig",
        )
    )


@scim_view
def resource_types(request, actor, name=None):
    _read_only(request)
    base = _base_url(request)
    items = {
        t.id: _with_meta(t, "ResourceType", f"{base}ResourceTypes/{t.id}")
        for t in schemas.resource_types()
    }
    if name is None:
        return _respond(_listed(list(items.values())))
    if name not in items:
        raise NotFoundException(detail=gettext("No such resource type."))
    return _respond(items[name])


@scim_view
def schemas_view(request, actor, urn=None):
    _read_only(request)
    base = _base_url(request)
    items = {
        s.id: _with_meta(s, "Schema", f"{base}Schemas/{s.id}") for s in schemas.published_schemas()
    }
    if urn is None:
        return _respond(_listed(list(items.values())))
    if urn not in items:
        raise NotFoundException(detail=gettext("No such schema."))
    return _respond(items[urn])


# --- listing ------------------------------------------------------------------------------


_INTEGER = re.compile(r"-?[0-9]{1,30}")


def _page(query) -> tuple[int, int]:
    def number(name, default):
        raw = query.get(name)
        if raw is None or raw == "":
            return default
        if isinstance(raw, int) and not isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and _INTEGER.fullmatch(raw):
            return int(raw)
        raise _invalid(gettext("%(name)s must be an integer.") % {"name": name})

    start = max(number("startIndex", 1), 1)
    count = min(max(number("count", schemas.MAX_RESULTS), 0), schemas.MAX_RESULTS)
    return start, count


def _list(request, queryset, model, fields, document, query=None):
    """GET with query parameters, or POST /.search with the same names in a SearchRequest."""
    query = request.GET if query is None else query
    parameters = _parameters(query, model)
    text = query.get("filter")
    if text:
        queryset = queryset.filter(filter_q(text, model, fields)).distinct()
    start, count = _page(query)
    total = queryset.count()
    # Past the last result the page is empty (RFC 7644 §3.4.2.4), and PostgreSQL is never
    # asked for an offset beyond bigint.
    rows = (
        list(queryset.order_by("pk")[start - 1 : start - 1 + count])
        if count and start <= total
        else []
    )
    resources = [model.model_validate(document(row)) for row in rows]
    body = ListResponse[model](
        total_results=total, start_index=start, items_per_page=len(resources), resources=resources
    ).model_dump(scim_ctx=Context.SEARCH_RESPONSE, response_parameters=parameters)
    return _respond(body)


# --- users --------------------------------------------------------------------------------


def _members(actor):
    actor.require("member.view")
    return Member.objects.filter(
        organization=actor.organization, scim_deleted_at=None
    ).select_related("department")


def _member(actor, pk: str | int) -> Member:
    key = parse_pk(pk)
    member = _members(actor).filter(pk=key).first() if key is not None else None
    if member is None:
        raise NotFoundException(detail=gettext("No such user."))
    return member


@scim_view
def users(request, actor):
    base = _base_url(request)
    if request.method == "GET":
        return _list(
            request,
            _members(actor),
            UserResource,
            USER_FILTER_FIELDS,
            lambda m: user_document(m, base),
        )
    if request.method != "POST":
        return _error(405, gettext("Use GET or POST."))
    parsed = UserResource.model_validate(_body(request), scim_ctx=Context.RESOURCE_CREATION_REQUEST)
    member = scim_user_provision(actor=actor, member=None, fields=user_fields(parsed))
    document = user_document(_member(actor, member.pk), base)
    return _respond(_dump(UserResource, document), 201, document["meta"]["version"])


def _read(request, resource, document: dict) -> HttpResponse:
    """GET of one resource: 304 when the client holds its version, else the document with the
    attributes asked for and its ETag."""
    if request.headers.get("If-None-Match") == document["meta"]["version"]:
        return HttpResponse(status=304)
    body = _dump(resource, document, _parameters(request.GET, resource))
    return _respond(body, etag=document["meta"]["version"])


@scim_view
def user(request, actor, pk):
    base = _base_url(request)
    member = _member(actor, pk)
    document = user_document(member, base)
    if request.method == "GET":
        return _read(request, UserResource, document)
    _check_if_match(request, document)
    if request.method == "DELETE":
        scim_user_delete(actor=actor, member=member)
        return HttpResponse(status=204)
    if request.method == "PUT":
        parsed = UserResource.model_validate(
            _body(request), scim_ctx=Context.RESOURCE_REPLACEMENT_REQUEST
        )
    elif request.method == "PATCH":
        parsed = UserResource.model_validate(document)
        PatchOp[UserResource].model_validate(
            _body(request), scim_ctx=Context.RESOURCE_PATCH_REQUEST
        ).patch(parsed)
    else:
        return _error(405, gettext("Use GET, PUT, PATCH or DELETE."))
    scim_user_provision(actor=actor, member=member, fields=user_fields(parsed))
    document = user_document(_member(actor, pk), base)
    return _respond(_dump(UserResource, document), etag=document["meta"]["version"])


# --- groups -------------------------------------------------------------------------------


def _departments(actor):
    actor.require("department.view")
    return Department.objects.filter(
        organization=actor.organization, is_archived=False
    ).prefetch_related("members")


def _department(actor, pk: str | int) -> Department:
    key = parse_pk(pk)
    department = _departments(actor).filter(pk=key).first() if key is not None else None
    if department is None:
        raise NotFoundException(detail=gettext("No such group."))
    return department


def _group_values(parsed: Group) -> dict:
    return {
        "name": parsed.display_name or "",
        "external_id": parsed.external_id or "",
        "member_ids": [m.value for m in parsed.members or [] if m.value],
    }


@scim_view
def groups(request, actor):
    base = _base_url(request)
    if request.method == "GET":
        return _list(
            request,
            _departments(actor),
            Group,
            GROUP_FILTER_FIELDS,
            lambda d: group_document(d, base),
        )
    if request.method != "POST":
        return _error(405, gettext("Use GET or POST."))
    parsed = Group.model_validate(_body(request), scim_ctx=Context.RESOURCE_CREATION_REQUEST)
    department = scim_group_provision(actor=actor, department=None, **_group_values(parsed))
    document = group_document(_department(actor, department.pk), base)
    return _respond(_dump(Group, document), 201, document["meta"]["version"])


@scim_view
def group(request, actor, pk):
    base = _base_url(request)
    department = _department(actor, pk)
    document = group_document(department, base)
    if request.method == "GET":
        return _read(request, Group, document)
    _check_if_match(request, document)
    if request.method == "DELETE":
        scim_group_delete(actor=actor, department=department)
        return HttpResponse(status=204)
    if request.method == "PUT":
        parsed = Group.model_validate(_body(request), scim_ctx=Context.RESOURCE_REPLACEMENT_REQUEST)
    elif request.method == "PATCH":
        parsed = Group.model_validate(document)
        PatchOp[Group].model_validate(
            _body(request), scim_ctx=Context.RESOURCE_PATCH_REQUEST
        ).patch(parsed)
    else:
        return _error(405, gettext("Use GET, PUT, PATCH or DELETE."))
    scim_group_provision(actor=actor, department=department, **_group_values(parsed))
    document = group_document(_department(actor, pk), base)
    return _respond(_dump(Group, document), etag=document["meta"]["version"])


def _search_body(request) -> dict:
    if request.method != "POST":
        raise MethodNotAllowed(detail=gettext("Use POST for .search."))
    body = _body(request)
    return {key: value for key, value in body.items() if key != "schemas"}


@scim_view
def users_search(request, actor):
    base = _base_url(request)
    return _list(
        request,
        _members(actor),
        UserResource,
        USER_FILTER_FIELDS,
        lambda m: user_document(m, base),
        query=_search_body(request),
    )


@scim_view
def groups_search(request, actor):
    base = _base_url(request)
    return _list(
        request,
        _departments(actor),
        Group,
        GROUP_FILTER_FIELDS,
        lambda d: group_document(d, base),
        query=_search_body(request),
    )


@scim_view
def root_search(request, actor):
    """Searching Users and Groups at once is not offered (RFC 7644 §3.4.3 lets it be 501)."""
    raise NotImplementedException(detail=gettext("Search /Users/.search or /Groups/.search."))


@scim_view
def unknown(request, actor, rest=""):
    raise NotFoundException(detail=gettext("No such SCIM endpoint."))
