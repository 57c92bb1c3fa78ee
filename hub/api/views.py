"""Cadre Hub API views (/api/v1/hub/): thin adapters over hub.services and hub.selectors.

Each write finds what it names as the caller may see it (404 otherwise), then checks that the
caller may act on it (403), and only then reads the body (400): a refused caller learns nothing
from the body's errors.
"""

from __future__ import annotations

import base64
import hashlib

from django.db.models import Prefetch
from django.http import HttpResponse
from django.utils.translation import gettext
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import APIView

from cadre import signing
from cadre.api.pagination import PagePagination
from cadre.api.parsers import BoundedJSONParser, BoundedMultiPartParser
from cadre.errors import InvalidInput, NotFound
from cadre.tenancy.models import Department
from hub import selectors, services
from hub.api import serializers as s
from hub.bundles import LIMITS, Bundle, BundleFile, read_bundle, write_zip
from hub.models import DistTag, SkillPackage, SkillVersion
from hub.outcomes import version_success_rates

MAX_UPLOAD = LIMITS.max_archive_bytes


def _require_view(request) -> None:
    request.actor.require("skill.view")


def _package(request, namespace: str, name: str) -> SkillPackage:
    _require_view(request)
    return selectors.package_get(request.actor, namespace, name)


def _version(request, package: SkillPackage, version: str) -> SkillVersion:
    found = selectors.versions_visible(request.actor, package).filter(version=version).first()
    if found is None:
        raise NotFound(
            gettext("%(package)s has no version %(version)s.")
            % {"package": package.full_name, "version": version}
        )
    return found


def _department(request, department_id: int | None) -> Department | None:
    if department_id is None:
        return None
    department = Department.objects.filter(
        organization=request.actor.organization, pk=department_id
    ).first()
    if department is None:
        raise InvalidInput(
            gettext("No such department."), details={"department": [gettext("Not found.")]}
        )
    return department


def _with_tags(queryset):
    return queryset.prefetch_related(
        Prefetch("tags", queryset=DistTag.objects.select_related("version"))
    ).select_related("namespace", "owner", "organization")


def read_upload(request) -> bytes:
    """The archive: the multipart `bundle` field or the raw request body, size-bounded."""
    upload = request.FILES.get("bundle") if request.content_type.startswith("multipart/") else None
    if upload is not None:
        if upload.size > MAX_UPLOAD:
            raise InvalidInput(
                gettext("The archive is %(size)s bytes; the limit is %(limit)s.")
                % {"size": upload.size, "limit": MAX_UPLOAD},
                code="payload_too_large",
            )
        return upload.read()
    data = request._request.read(MAX_UPLOAD + 1)
    if len(data) > MAX_UPLOAD:
        raise InvalidInput(
            gettext("The archive is over %(limit)s bytes.") % {"limit": MAX_UPLOAD},
            code="payload_too_large",
        )
    if not data:
        raise InvalidInput(
            gettext("Send the bundle as the request body or a multipart 'bundle' field.")
        )
    return data


class PackageListView(APIView):
    pagination_class = PagePagination  # also what the schema documents

    @extend_schema(
        parameters=[OpenApiParameter("namespace", str, description="@handle or handle")],
        responses=s.PackageSerializer(many=True),
        operation_id="hub_skills_list",
    )
    def get(self, request):
        _require_view(request)
        packages = _with_tags(selectors.packages_visible(request.actor)).order_by(
            "namespace__handle", "name"
        )
        namespace = request.query_params.get("namespace")
        if namespace:
            packages = packages.filter(namespace__handle=namespace.lstrip("@"))
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(packages, request, view=self)
        return paginator.get_paginated_response(s.PackageSerializer(page, many=True).data)


class PublishView(APIView):
    parser_classes = [BoundedMultiPartParser]

    @extend_schema(
        request={"multipart/form-data": s.PublishRequestSerializer},
        responses={201: s.PublishResponseSerializer, 200: s.PublishResponseSerializer},
        description="Upload a zip or tar.gz bundle (multipart `bundle`, or the raw body with "
        "the other fields as query parameters). `dry_run` validates and scans only.",
    )
    def post(self, request):
        request.actor.require("skill.publish")
        multipart = request.content_type.startswith("multipart/")
        source = request.data if multipart else request.query_params
        fields = {key: source.get(key) for key in s.PublishRequestSerializer().fields}
        fields = {key: value for key, value in fields.items() if value not in (None, "")}
        tags = source.getlist("tags") if hasattr(source, "getlist") else []
        if len(tags) == 1 and "," in tags[0]:
            tags = [tag.strip() for tag in tags[0].split(",") if tag.strip()]
        fields["tags"] = tags
        fields.pop("bundle", None)
        serializer = s.PublishRequestSerializer(data=fields)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        bundle = read_bundle(read_upload(request))
        outcome = services.package_publish(
            actor=request.actor,
            bundle=bundle,
            version=data["version"],
            namespace=data.get("namespace"),
            name=data.get("name"),
            changelog=data.get("changelog", ""),
            visibility=data.get("visibility"),
            department=_department(request, data.get("department")),
            display_name=data.get("display_name", ""),
            tags=data.get("tags", []),
            dry_run=data["dry_run"],
        )
        code = status.HTTP_200_OK if outcome.dry_run else status.HTTP_201_CREATED
        return Response(outcome.as_dict(), status=code)


class SearchView(APIView):
    @extend_schema(
        parameters=[OpenApiParameter("q", str), OpenApiParameter("limit", int)],
        responses=inline_serializer(
            "HubSearchResults", {"results": s.SearchResultSerializer(many=True)}
        ),
        operation_id="hub_search",
    )
    def get(self, request):
        _require_view(request)
        try:
            limit = int(request.query_params.get("limit", 20))
        except ValueError:
            raise InvalidInput(gettext("limit must be a number.")) from None
        results = selectors.search(request.actor, request.query_params.get("q", ""), limit=limit)
        packages = {
            p.pk: p
            for p in _with_tags(
                SkillPackage.objects.filter(pk__in=[package.pk for package, _ in results])
            )
        }
        items = []
        for package, score in results:
            item = s.PackageSerializer(packages[package.pk]).data
            item["score"] = score
            items.append(item)
        return Response({"results": items})


class PackageDetailView(APIView):
    @extend_schema(responses=s.PackageDetailSerializer, operation_id="hub_skill_retrieve")
    def get(self, request, namespace, name):
        package = _package(request, namespace, name)
        package = _with_tags(SkillPackage.objects.filter(pk=package.pk)).get()
        return Response(s.PackageDetailSerializer(package, context={"request": request}).data)

    @extend_schema(request=s.PackageUpdateSerializer, responses=s.PackageDetailSerializer)
    def patch(self, request, namespace, name):
        package = _package(request, namespace, name)
        services.require_maintainer(request.actor, package)
        serializer = s.PackageUpdateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        package = services.package_update(
            actor=request.actor,
            package=package,
            visibility=data.get("visibility"),
            department=_department(request, data.get("department")),
            display_name=data.get("display_name"),
            badges=data.get("badges"),
        )
        return Response(s.PackageDetailSerializer(package, context={"request": request}).data)


class DeprecateView(APIView):
    @extend_schema(request=s.DeprecateSerializer, responses=s.PackageDetailSerializer)
    def post(self, request, namespace, name):
        package = _package(request, namespace, name)
        services.require_maintainer(request.actor, package)
        serializer = s.DeprecateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        package = services.package_deprecate(
            actor=request.actor,
            package=package,
            message=serializer.validated_data.get("message", ""),
            deprecated=serializer.validated_data["deprecated"],
        )
        return Response(s.PackageDetailSerializer(package, context={"request": request}).data)


class VersionListView(APIView):
    @extend_schema(
        responses=inline_serializer("HubVersions", {"results": s.VersionSerializer(many=True)}),
        operation_id="hub_versions_list",
    )
    def get(self, request, namespace, name):
        package = _package(request, namespace, name)
        versions = selectors.ordered(selectors.versions_visible(request.actor, package))
        rates = version_success_rates([version.pk for version in versions])
        return Response(
            {"results": s.VersionSerializer(versions, many=True, context={"rates": rates}).data}
        )


class VersionDetailView(APIView):
    @extend_schema(responses=s.VersionDetailSerializer, operation_id="hub_version_retrieve")
    def get(self, request, namespace, name, version):
        package = _package(request, namespace, name)
        found = _version(request, package, version)
        return Response(s.VersionDetailSerializer(found, context={"request": request}).data)


class ReviewView(APIView):
    @extend_schema(request=s.ReviewSerializer, responses=s.VersionDetailSerializer)
    def post(self, request, namespace, name, version):
        package = _package(request, namespace, name)
        found = _version(request, package, version)
        services.require_reviewer(request.actor, package)
        serializer = s.ReviewSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        found = services.version_review(
            actor=request.actor,
            version=found,
            approve=serializer.validated_data["approve"],
            note=serializer.validated_data.get("note", ""),
        )
        return Response(s.VersionDetailSerializer(found, context={"request": request}).data)


class YankView(APIView):
    @extend_schema(request=s.YankSerializer, responses=s.VersionDetailSerializer)
    def post(self, request, namespace, name, version):
        package = _package(request, namespace, name)
        found = _version(request, package, version)
        services.require_maintainer(request.actor, package)
        serializer = s.YankSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        found = services.version_yank(
            actor=request.actor, version=found, reason=serializer.validated_data["reason"]
        )
        return Response(s.VersionDetailSerializer(found, context={"request": request}).data)


class UnyankView(APIView):
    @extend_schema(request=None, responses=s.VersionDetailSerializer)
    def post(self, request, namespace, name, version):
        package = _package(request, namespace, name)
        found = services.version_unyank(
            actor=request.actor, version=_version(request, package, version)
        )
        return Response(s.VersionDetailSerializer(found, context={"request": request}).data)


class TagView(APIView):
    @extend_schema(request=s.TagSerializer, responses=s.PackageDetailSerializer)
    def put(self, request, namespace, name, tag):
        package = _package(request, namespace, name)
        services.require_maintainer(request.actor, package)
        serializer = s.TagSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        found = _version(request, package, serializer.validated_data["version"])
        services.dist_tag_set(actor=request.actor, package=package, tag=tag, version=found)
        package = _with_tags(SkillPackage.objects.filter(pk=package.pk)).get()
        return Response(s.PackageDetailSerializer(package, context={"request": request}).data)

    @extend_schema(request=None, responses={204: None})
    def delete(self, request, namespace, name, tag):
        package = _package(request, namespace, name)
        services.dist_tag_remove(actor=request.actor, package=package, tag=tag)
        return Response(status=status.HTTP_204_NO_CONTENT)


def version_bundle(version: SkillVersion) -> Bundle:
    files = version.files.select_related("blob")
    return Bundle(files=[BundleFile(path=f.path, content=bytes(f.blob.content)) for f in files])


def integrity_headers(response: HttpResponse, version: SkillVersion, body: bytes) -> HttpResponse:
    digest = hashlib.sha256(body).digest()
    response["Digest"] = "sha-256=" + base64.b64encode(digest).decode()
    response["X-Checksum-Sha256"] = digest.hex()
    response["X-Cadre-Package"] = version.package.full_name
    response["X-Cadre-Version"] = version.version
    response["X-Cadre-Fingerprint"] = version.fingerprint
    response["X-Cadre-Signature"] = version.signature
    response["X-Cadre-Key-Id"] = version.key_id
    return response


class DownloadView(APIView):
    @extend_schema(
        parameters=[OpenApiParameter("version", str, description="version, dist-tag or range")],
        responses={(200, "application/zip"): bytes},
        description="The version as a ZIP. `Digest`/`X-Checksum-Sha256` cover the body; "
        "`X-Cadre-Signature` (Ed25519, key `X-Cadre-Key-Id`) covers the fingerprint and files.",
    )
    def get(self, request, namespace, name):
        package = _package(request, namespace, name)
        version = selectors.resolve_version(package, request.query_params.get("version"))
        body = write_zip(version_bundle(version))
        services.version_record_download(
            version, install=request.query_params.get("purpose") != "inspect"
        )
        response = HttpResponse(body, content_type="application/zip")
        response["Content-Disposition"] = (
            f'attachment; filename="{package.name}-{version.version}.zip"'
        )
        return integrity_headers(response, version, body)


class FileView(APIView):
    @extend_schema(responses={(200, "application/octet-stream"): bytes})
    def get(self, request, namespace, name, version, path):
        package = _package(request, namespace, name)
        found = _version(request, package, version)
        item = found.files.select_related("blob").filter(path=path).first()
        if item is None:
            raise NotFound(
                gettext("%(found)s has no file %(path)s.") % {"found": found, "path": path}
            )
        body = bytes(item.blob.content)
        response = HttpResponse(body, content_type=item.content_type)
        response["X-Checksum-Sha256"] = item.sha256
        response["X-Content-Type-Options"] = "nosniff"
        response["Content-Security-Policy"] = "sandbox"
        return response


class SigningKeyView(APIView):
    @extend_schema(responses=s.SigningKeySerializer, operation_id="hub_signing_key")
    def get(self, request):
        return Response(
            {
                "algorithm": "ed25519",
                "key_id": signing.key_id(),
                "public_key_pem": signing.public_key_pem(),
            }
        )


class NamespaceView(APIView):
    parser_classes = [BoundedJSONParser]

    @extend_schema(request=s.NamespaceSerializer, responses={201: s.NamespaceSerializer})
    def post(self, request):
        services.require_namespace_creator(request.actor)
        serializer = s.NamespaceSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        namespace = services.namespace_create(
            actor=request.actor,
            handle=data["handle"],
            department=_department(request, data.get("department")),
            display_name=data.get("display_name", ""),
        )
        return Response(
            {
                "handle": namespace.handle,
                "department": namespace.department_id,
                "display_name": namespace.display_name,
            },
            status=status.HTTP_201_CREATED,
        )
