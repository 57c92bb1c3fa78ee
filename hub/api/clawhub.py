"""The ClawHub-compatible API, so the real `clawhub` CLI (0.23.x) works against Cadre.

Mapping: ClawHub's `ownerHandle` is the Hub namespace (`@acme` → `acme`) and its `slug` is the
package name, so `clawhub install acme/pdf-tools` is `@acme/pdf-tools`. The bearer token is a
Cadre organization API key (`hub:read` to read, `hub:publish` to publish and tag). Visibility
and review apply unchanged: what the key may not see is "Skill not found" (404), and a version
that is not published is neither listed nor downloadable. Errors are plain text, which the CLI
shows as its error message. Timestamps are milliseconds since the epoch, as ClawHub's are.
"""

from __future__ import annotations

from django.conf import settings
from django.db.models import Prefetch
from django.http import HttpResponse, JsonResponse
from django.utils.translation import gettext
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from cadre.api.permissions import IsOrganizationActor
from cadre.errors import InvalidInput, NotFound
from cadre.tenancy.authentication import ApiKeyAuthentication, SessionAuthentication
from hub import selectors, services, uploads
from hub.api.views import integrity_headers, version_bundle
from hub.bundles import write_zip
from hub.models import DistTag, SkillPackage, SkillVersion


class ClawHubUploadUrl(serializers.Serializer):
    path = serializers.CharField()
    size = serializers.IntegerField()
    sha256 = serializers.CharField()
    contentType = serializers.CharField(required=False)


class ClawHubPublishFile(serializers.Serializer):
    path = serializers.CharField()
    size = serializers.IntegerField()
    storageId = serializers.CharField()
    sha256 = serializers.CharField()
    contentType = serializers.CharField(required=False)
    uploadTicket = serializers.CharField()


class ClawHubPublish(serializers.Serializer):
    slug = serializers.CharField()
    displayName = serializers.CharField(required=False)
    ownerHandle = serializers.CharField(required=False)
    version = serializers.CharField()
    changelog = serializers.CharField(required=False, allow_blank=True)
    acceptLicenseTerms = serializers.BooleanField(required=False)
    tags = serializers.ListField(child=serializers.CharField(), required=False)
    files = ClawHubPublishFile(many=True)


class ClawHubTag(serializers.Serializer):
    version = serializers.CharField()
    ownerHandle = serializers.CharField(required=False)


MAX_PAGE = 200


def millis(moment) -> int | None:
    return int(moment.timestamp() * 1000) if moment else None


class ClawHubView(APIView):
    """API-key bearer auth (what the CLI sends) or a console session; errors as plain text."""

    authentication_classes = [ApiKeyAuthentication, SessionAuthentication]
    permission_classes = [IsOrganizationActor]

    def handle_exception(self, exc):
        if isinstance(exc, exceptions.NotAuthenticated):
            exc = exceptions.NotAuthenticated(
                gettext(
                    "Authentication required: run `clawhub login --token <Cadre API key>` "
                    "(a key with the hub:read or hub:publish scope)."
                )
            )
        response = super().handle_exception(exc)
        error = response.data.get("error", {}) if isinstance(response.data, dict) else {}
        message = error.get("message") or str(response.data)
        plain = HttpResponse(
            message, status=response.status_code, content_type="text/plain; charset=utf-8"
        )
        for header in ("WWW-Authenticate", "Retry-After"):
            if header in response:
                plain[header] = response[header]
        return plain

    @property
    def actor(self):
        return self.request.actor


def _int(value, default: int, maximum: int) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        return default
    return max(1, min(number, maximum))


def _skill_not_found() -> NotFound:
    return NotFound(gettext("Skill not found"))


def _package(request, slug: str, owner_handle: str | None = None) -> SkillPackage:
    """The visible package `owner/slug`; without an owner: the caller's own organization's,
    else the single visible one, else the most installed (never an invisible one)."""
    request.actor.require("skill.view")
    owner_handle = (owner_handle or request.query_params.get("ownerHandle") or "").lstrip("@")
    packages = selectors.packages_visible(request.actor).filter(name=slug.strip().lower())
    if owner_handle:
        packages = packages.filter(namespace__handle=owner_handle.lower())
    candidates = list(packages)
    if not candidates:
        raise _skill_not_found()
    if len(candidates) == 1:
        return candidates[0]
    own = [p for p in candidates if p.organization_id == request.actor.organization.pk]
    if len(own) == 1:
        return own[0]
    installs = selectors.installs_since([p.pk for p in candidates])
    return max(candidates, key=lambda p: (installs.get(p.pk, 0), -p.created_at.timestamp()))


def _published(package: SkillPackage):
    return SkillVersion.objects.filter(package=package, status=SkillVersion.Status.PUBLISHED)


def _tags(package: SkillPackage) -> dict[str, str]:
    return {tag.tag: tag.version.version for tag in package.tags.all()}


def _latest(package: SkillPackage) -> SkillVersion | None:
    try:
        return selectors.resolve_version(package, "latest")
    except NotFound:
        return None


def _version_summary(version: SkillVersion | None) -> dict | None:
    if version is None:
        return None
    return {
        "version": version.version,
        "createdAt": millis(version.published_at or version.created_at),
        "changelog": version.changelog,
        "license": None,
    }


def _stats(package: SkillPackage) -> dict:
    stats = selectors.package_stats(package)
    return {
        "downloads": stats["downloads"],
        "installsAllTime": stats["installs"],
        "installsCurrent": stats["installs_60d"],
        "stars": 0,
        "versions": stats["versions"],
        "comments": 0,
    }


def _skill(package: SkillPackage) -> dict:
    return {
        "slug": package.name,
        "displayName": package.display_name or package.name,
        "summary": package.summary or None,
        "tags": _tags(package),
        "stats": _stats(package),
        "createdAt": millis(package.created_at),
        "updatedAt": millis(package.updated_at),
    }


def _moderation(version: SkillVersion | None) -> dict:
    verdict = version.scan_verdict if version else "pass"
    suspicious = verdict in ("warn", "block")
    return {
        "isSuspicious": suspicious,
        "isMalwareBlocked": verdict == "block",
        "verdict": "clean" if not suspicious else "suspicious",
        "reasonCodes": sorted({f["rule"] for f in version.scan_findings}) if version else [],
    }


def _with_tags(queryset):
    return queryset.prefetch_related(
        Prefetch("tags", queryset=DistTag.objects.select_related("version"))
    ).select_related("namespace", "owner")


class WhoamiView(ClawHubView):
    @extend_schema(operation_id="clawhub_whoami", responses={200: dict})
    def get(self, request):
        member = request.actor.member
        return Response(
            {
                "user": {
                    "handle": request.actor.organization.slug,
                    "displayName": getattr(member, "display_name", None),
                    "image": None,
                    "role": "user",
                }
            }
        )


class SearchView(ClawHubView):
    @extend_schema(operation_id="clawhub_search", responses={200: dict})
    def get(self, request):
        request.actor.require("skill.view")
        limit = _int(request.query_params.get("limit"), 20, 100)
        found = selectors.search(request.actor, request.query_params.get("q", ""), limit=limit)
        latest = selectors.annotate_latest([package for package, _ in found])
        results = []
        for package, score in found:
            version = latest.get(package.pk)
            results.append(
                {
                    "score": score,
                    "slug": package.name,
                    "displayName": package.display_name or package.name,
                    "summary": package.summary or None,
                    "version": version.version if version else None,
                    "ownerHandle": package.namespace.handle,
                    "updatedAt": millis(package.updated_at),
                }
            )
        return Response({"results": results})


class SkillsView(ClawHubView):
    @extend_schema(operation_id="clawhub_skills_list", responses={200: dict})
    def get(self, request):
        request.actor.require("skill.view")
        limit = _int(request.query_params.get("limit"), 25, MAX_PAGE)
        offset = (
            _int(request.query_params.get("cursor"), 0, 10**9)
            if request.query_params.get("cursor")
            else 0
        )
        packages = _with_tags(
            selectors.packages_visible(request.actor)
            .filter(versions__status=SkillVersion.Status.PUBLISHED)
            .distinct()
        )
        sort = request.query_params.get("sort", "updated")
        packages = packages.order_by("-created_at" if sort == "newest" else "-updated_at", "pk")
        page = list(packages[offset : offset + limit + 1])
        items = []
        for package in page[:limit]:
            item = _skill(package)
            latest = _latest(package)
            if latest is not None:
                item["latestVersion"] = _version_summary(latest)
            items.append(item)
        next_cursor = str(offset + limit) if len(page) > limit else None
        return Response({"items": items, "nextCursor": next_cursor})

    @extend_schema(operation_id="clawhub_publish", request=ClawHubPublish, responses={200: dict})
    def post(self, request):
        """Publish a version from files uploaded through upload tickets."""
        request.actor.require("skill.publish")  # before the body: a refusal tells nothing of it
        data = request.data if isinstance(request.data, dict) else {}
        slug = str(data.get("slug") or "").strip().lower()
        version = str(data.get("version") or "").strip()
        files = data.get("files")
        if not slug or not version or not isinstance(files, list) or not files:
            raise InvalidInput(gettext("slug, version and files are required."))
        tags = [t for t in data.get("tags") or [] if isinstance(t, str) and t != "latest"]
        outcome = uploads.upload_tickets_publish(
            actor=request.actor,
            slug=slug,
            version=version,
            files=files,
            namespace=str(data.get("ownerHandle") or "") or None,
            changelog=str(data.get("changelog") or ""),
            display_name=str(data.get("displayName") or ""),
            tags=tags,
        )
        published = outcome.version.status == SkillVersion.Status.PUBLISHED
        return Response(
            {
                "ok": True,
                "skillId": str(outcome.version.package_id),
                "versionId": str(outcome.version.pk),
                "slug": slug,
                "version": outcome.version.version,
                "publicationStatus": "published" if published else "pending",
            }
        )


class UploadUrlView(ClawHubView):
    @extend_schema(
        operation_id="clawhub_upload_url", request=ClawHubUploadUrl, responses={200: dict}
    )
    def post(self, request):
        data = request.data if isinstance(request.data, dict) else {}
        ticket = uploads.upload_ticket_create(
            actor=request.actor,
            path=str(data.get("path") or ""),
            size=data.get("size"),
            sha256=str(data.get("sha256") or ""),
            content_type=str(data.get("contentType") or ""),
        )
        upload_url = f"{settings.CADRE_BASE_URL}/api/v1/hub/uploads/{ticket.ticket}"
        return Response({"uploadUrl": upload_url, "uploadTicket": ticket.ticket})


class UploadView(ClawHubView):
    """Receives the raw bytes of one ticketed file (the `uploadUrl`)."""

    @extend_schema(
        operation_id="clawhub_upload",
        request={"application/octet-stream": bytes},
        responses={200: dict},
    )
    def post(self, request, ticket):
        found = uploads.upload_ticket_receive(
            actor=request.actor, ticket=ticket, read=request._request.read
        )
        return Response({"storageId": found.ticket})


class SkillView(ClawHubView):
    @extend_schema(operation_id="clawhub_skill", responses={200: dict})
    def get(self, request, slug):
        package = _package(request, slug)
        package = _with_tags(SkillPackage.objects.filter(pk=package.pk)).get()
        latest = _latest(package)
        return Response(
            {
                "skill": _skill(package),
                "latestVersion": _version_summary(latest),
                "owner": {
                    "handle": package.namespace.handle,
                    "displayName": package.namespace.display_name or package.namespace.handle,
                    "image": None,
                },
                "moderation": _moderation(latest),
            }
        )


class ModerationView(ClawHubView):
    """Scan findings of `latest` (evidence only for the skill's maintainers and reviewers)."""

    severities = {"review": "info", "warn": "warn", "block": "critical"}

    @extend_schema(operation_id="clawhub_moderation", responses={200: dict})
    def get(self, request, slug):
        package = _package(request, slug)
        latest = _latest(package)
        moderation = _moderation(latest)
        evidence = []
        if latest is not None and selectors.can_maintain(request.actor, package):
            evidence = [
                {
                    "code": f["rule"],
                    "severity": self.severities.get(f["severity"], "info"),
                    "file": f["file"],
                    "line": f["line"],
                    "message": f["message"],
                    "evidence": f["excerpt"],
                }
                for f in latest.scan_findings
            ]
        moderation.update(
            {
                "updatedAt": millis(latest.created_at) if latest else None,
                "engineVersion": "cadre-scan-1",
                "summary": None,
                "evidence": evidence,
            }
        )
        return Response({"moderation": moderation})


class VersionsView(ClawHubView):
    @extend_schema(operation_id="clawhub_versions", responses={200: dict})
    def get(self, request, slug):
        package = _package(request, slug)
        limit = _int(request.query_params.get("limit"), 50, MAX_PAGE)
        offset = (
            _int(request.query_params.get("cursor"), 0, 10**9)
            if request.query_params.get("cursor")
            else 0
        )
        versions = selectors.ordered(_published(package))
        page = versions[offset : offset + limit]
        return Response(
            {
                "items": [
                    {
                        "version": v.version,
                        "createdAt": millis(v.published_at or v.created_at),
                        "changelog": v.changelog,
                    }
                    for v in page
                ],
                "nextCursor": str(offset + limit) if len(versions) > offset + limit else None,
            }
        )


class VersionView(ClawHubView):
    @extend_schema(operation_id="clawhub_version", responses={200: dict})
    def get(self, request, slug, version):
        package = _package(request, slug)
        found = _published(package).filter(version=version).first()
        if found is None:
            raise NotFound(gettext("Version not found"))
        files = [
            {"path": f.path, "size": f.size, "sha256": f.sha256, "contentType": f.content_type}
            for f in found.files.all()
        ]
        return Response(
            {
                "version": {**_version_summary(found), "files": files},
                "skill": {
                    "slug": package.name,
                    "displayName": package.display_name or package.name,
                },
            }
        )


class FileView(ClawHubView):
    @extend_schema(operation_id="clawhub_file", responses={200: bytes})
    def get(self, request, slug):
        package = _package(request, slug)
        spec = request.query_params.get("version") or request.query_params.get("tag")
        version = selectors.resolve_version(package, spec)
        path = request.query_params.get("path", "")
        item = version.files.select_related("blob").filter(path=path).first()
        if item is None:
            raise NotFound(gettext("File not found"))
        response = HttpResponse(bytes(item.blob.content), content_type=item.content_type)
        response["X-Checksum-Sha256"] = item.sha256
        response["X-Content-Type-Options"] = "nosniff"
        response["Content-Security-Policy"] = "sandbox"
        return response


class TagView(ClawHubView):
    @extend_schema(operation_id="clawhub_tag", request=ClawHubTag, responses={200: dict})
    def post(self, request, slug, tag):
        data = request.data if isinstance(request.data, dict) else {}
        package = _package(request, slug, str(data.get("ownerHandle") or "") or None)
        version = _published(package).filter(version=str(data.get("version") or "")).first()
        if version is None:
            raise NotFound(gettext("Version not found"))
        services.dist_tag_set(actor=request.actor, package=package, tag=tag, version=version)
        return Response({"ok": True, "slug": package.name, "tag": tag, "version": version.version})


class DownloadView(ClawHubView):
    @extend_schema(operation_id="clawhub_download", responses={200: bytes})
    def get(self, request):
        slug = request.query_params.get("slug", "")
        package = _package(request, slug)
        spec = request.query_params.get("version") or request.query_params.get("tag")
        version = selectors.resolve_version(package, spec)
        body = write_zip(version_bundle(version))
        services.version_record_download(version, install=True)
        response = HttpResponse(body, content_type="application/zip")
        response["Content-Disposition"] = (
            f'attachment; filename="{package.name}-{version.version}.zip"'
        )
        return integrity_headers(response, version, body)


class ResolveView(ClawHubView):
    @extend_schema(operation_id="clawhub_resolve", responses={200: dict})
    def get(self, request):
        package = _package(request, request.query_params.get("slug", ""))
        fingerprint = request.query_params.get("hash", "").strip().lower()
        match = _published(package).filter(fingerprint=fingerprint).first() if fingerprint else None
        latest = _latest(package)
        return Response(
            {
                "match": {"version": match.version} if match else None,
                "latestVersion": {"version": latest.version} if latest else None,
            }
        )


def well_known(request):
    """Registry discovery: ClawHub needs an absolute apiBase (the site root)."""
    return JsonResponse({"apiBase": settings.CADRE_BASE_URL})
