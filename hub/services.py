"""Hub write paths: publish (validate → scan → version), review, sign, tags, yank, deprecate.

Publishing a version or moving a dist-tag hands the version to `hub.distribution`, which
updates (or offers the update to) the agents whose installs select it.

Every state change is audited in its own transaction. A version's number is burnt the moment
it is created (`UsedVersion`), so it is never reused, even after the version is removed.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field

from django.conf import settings
from django.contrib.postgres.search import SearchVector
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone
from django.utils.translation import gettext

from cadre import signing
from cadre.api.parsers import text_problem_in
from cadre.errors import Conflict, InvalidInput, NotFound, NotPermitted
from cadre.governance import audit
from cadre.queues import enqueue
from cadre.tenancy.actors import Actor
from cadre.tenancy.models import Department
from hub.approval import Approval, version_approval
from hub.bundles import Bundle
from hub.distribution import version_distribute
from hub.integrity import signed_payload
from hub.models import (
    DistTag,
    HubNamespace,
    SkillBlob,
    SkillDailyStat,
    SkillFile,
    SkillPackage,
    SkillVersion,
    UsedVersion,
)
from hub.scan import ScanResult, scan_files
from hub.selectors import can_maintain, namespace_publish_refusal, ordered
from hub.validation import SKILL_FILE, Problem, ValidationReport, validate_files
from hub.versions import is_range, parse_version

logger = logging.getLogger(__name__)
TAG_PATTERN = re.compile(r"^[a-z][a-z0-9._-]{0,63}$")
NAME_PATTERN = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
AUTO_PUBLISH_VERDICTS = ("pass", "review")


@dataclass
class PublishOutcome:
    validation: ValidationReport
    scan: ScanResult
    fingerprint: str
    files: list[dict]
    dry_run: bool
    version: SkillVersion | None = None
    problems: list[dict] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.validation.ok and self.scan.verdict != "block"

    def as_dict(self) -> dict:
        data = {
            "ok": self.ok,
            "dry_run": self.dry_run,
            "fingerprint": self.fingerprint,
            "validation": self.validation.as_dict(),
            "scan": self.scan.as_dict(),
            "files": self.files,
        }
        if self.version is not None:
            data["version"] = self.version.version
            data["status"] = self.version.status
            data["package"] = self.version.package.full_name
        return data


def _version_snapshot(version: SkillVersion) -> dict:
    return {
        "version": version.version,
        "status": version.status,
        "yanked": version.yanked,
        "fingerprint": version.fingerprint,
        "scan_verdict": version.scan_verdict,
    }


# --- who may act ------------------------------------------------------------------------------
# Views call these before they read the body, so a caller who may not act is refused (403) the
# same whatever they sent, and never learns from a 400 what a valid body would be. The services
# call them again: they are the rule, the views' calls only put it first.


def require_namespace_creator(actor: Actor) -> None:
    """Team namespaces are created by skill reviewers (or whoever runs the organization)."""
    if not (actor.has("skill.review") or actor.has("organization.manage")):
        raise NotPermitted(gettext("Creating a Hub namespace needs 'skill.review'."))


def require_reviewer(actor: Actor, package: SkillPackage) -> None:
    """Approving or rejecting a version needs `skill.review` reaching its package (the Hub's
    review stage, `hub.approval.version_approval`)."""
    if not version_approval(actor, package).allowed:
        raise NotPermitted(gettext("You do not have the 'skill.review' permission on this skill."))


def require_maintainer(actor: Actor, package: SkillPackage) -> None:
    """Tags, yanks, deprecation and settings: the package's owner or one of its reviewers."""
    if not can_maintain(actor, package):
        raise NotPermitted(
            gettext("Only the owner of %(skill)s or a skill reviewer may change it.")
            % {"skill": package.full_name}
        )


# --- namespaces ------------------------------------------------------------------------------


@transaction.atomic
def namespace_create(
    *, actor: Actor, handle: str, department: Department | None = None, display_name: str = ""
) -> HubNamespace:
    """A team namespace (`@sales-emea`) owned by the actor's organization."""
    require_namespace_creator(actor)
    handle = handle.strip().lstrip("@").lower()
    if not NAME_PATTERN.match(handle) or len(handle) > 64:
        raise InvalidInput(
            gettext("A namespace is 1-64 lowercase letters, digits and single hyphens."),
            details={"handle": [gettext("Invalid handle.")]},
        )
    if department is not None and department.organization_id != actor.organization.pk:
        raise NotFound(gettext("No such department."))
    namespace = HubNamespace(
        organization=actor.organization,
        handle=handle,
        department=department,
        display_name=display_name or handle,
    )
    try:
        with transaction.atomic():
            namespace.save()
    except IntegrityError:
        raise Conflict(
            gettext("The namespace @%(handle)s is taken.") % {"handle": handle},
            code="namespace_taken",
        ) from None
    audit.record(
        actor=actor,
        action="hub.namespace.create",
        target=namespace,
        after={"handle": handle, "department": getattr(department, "pk", None)},
    )
    return namespace


def _namespace_for_publish(actor: Actor, handle: str | None) -> HubNamespace:
    organization = actor.organization
    handle = (handle or organization.slug).lstrip("@").lower()
    namespace = HubNamespace.objects.filter(handle=handle).first()
    if namespace is None:
        if handle != organization.slug:
            raise NotFound(
                gettext(
                    "No namespace @%(handle)s; publish under @%(slug)s or ask a reviewer "
                    "to create a team namespace."
                )
                % {"handle": handle, "slug": organization.slug},
                code="namespace_not_found",
            )
        namespace, _ = HubNamespace.objects.get_or_create(
            handle=handle,
            defaults={"organization": organization, "display_name": organization.name},
        )
    refusal = namespace_publish_refusal(actor, namespace)
    if refusal is not None:
        code, message = refusal
        raise NotPermitted(message, code=code, details={"namespace": f"@{namespace.handle}"})
    return namespace


# --- publish ---------------------------------------------------------------------------------


# The review note of a version published without review (version pages say so).
NO_REVIEW_NOTE = "published without review (reviewer or org policy)"


def _store_files(version: SkillVersion, bundle: Bundle) -> None:
    existing = set(
        SkillBlob.objects.filter(sha256__in=[f.sha256 for f in bundle.files]).values_list(
            "sha256", flat=True
        )
    )
    SkillBlob.objects.bulk_create(
        [
            SkillBlob(sha256=f.sha256, size=f.size, content=f.content)
            for f in {f.sha256: f for f in bundle.files if f.sha256 not in existing}.values()
        ],
        ignore_conflicts=True,
    )
    SkillFile.objects.bulk_create(
        [
            SkillFile(
                version=version,
                path=f.path,
                size=f.size,
                sha256=f.sha256,
                content_type=f.content_type,
                blob_id=f.sha256,
            )
            for f in bundle.files
        ]
    )


def check_bundle(bundle: Bundle, *, name: str | None = None) -> tuple[ValidationReport, ScanResult]:
    """Validation (with the folder-name rule) and the security scan of a bundle."""
    files = {f.path: f.content for f in bundle.files}
    report = validate_files(files, folder_name=name or bundle.folder_name)
    problem = _unstorable_skill_md(report)
    if problem is not None:
        # Reported without the parsed document: its frontmatter would reach a JSON answer (a
        # dry run's) and its body a text column, neither of which holds such text.
        report = ValidationReport([problem])
    scan = scan_files(files.items())
    return report, scan


def _unstorable_skill_md(report: ValidationReport) -> Problem | None:
    """A SKILL.md whose body or frontmatter holds a NUL (raw, or YAML's "\\0") or a lone
    surrogate (YAML's "\\ud800"): text PostgreSQL does not store."""
    document = report.document
    if document is None:
        return None
    keys = [key for key, value in document.frontmatter.items() if text_problem_in([key, value])]
    if keys:
        line = document.key_lines.get(str(keys[0]))
    elif "\x00" in document.body:
        line = document.body_line + document.body.split("\x00", 1)[0].count("\n")
    else:
        return None
    return Problem(
        SKILL_FILE,
        line,
        "unstorable_text",
        gettext("SKILL.md holds a NUL character or a lone surrogate, which cannot be stored."),
    )


def package_publish(
    *,
    actor: Actor,
    bundle: Bundle,
    version: str,
    namespace: str | None = None,
    name: str | None = None,
    changelog: str = "",
    visibility: str | None = None,
    department: Department | None = None,
    display_name: str = "",
    tags: list[str] | tuple[str, ...] = (),
    dry_run: bool = False,
    review_note: str = "",
    approval: Approval | None = None,
) -> PublishOutcome:
    """Upload a version. Invalid or blocked uploads raise (or, with dry_run, report).

    Whether it publishes at once is the Hub's review stage (`version_approval` at upload),
    unless `approval` — the final approval of the skill review stages, which decided the
    stage already — completes the review: then the approver needs neither `skill.publish`
    nor to maintain the package. `review_note` says how a version that publishes at once was
    reviewed elsewhere; without it such a version is recorded as published without review."""
    reviewed = approval is not None and approval.allowed and approval.completes_review
    if not reviewed:
        actor.require("skill.publish")
    if actor.member is None:
        raise NotPermitted(gettext("Publishing needs a member (a person or their API key)."))
    parsed = parse_version(version)
    report, scan = check_bundle(bundle, name=name)
    frontmatter_name = report.frontmatter.get("name") if report.document else None
    name = name or (frontmatter_name if isinstance(frontmatter_name, str) else None)
    outcome = PublishOutcome(
        validation=report,
        scan=scan,
        fingerprint=bundle.fingerprint,
        files=[
            {"path": f.path, "size": f.size, "sha256": f.sha256, "contentType": f.content_type}
            for f in bundle.files
        ],
        dry_run=dry_run,
    )
    if dry_run:
        return outcome
    if not report.ok:
        raise InvalidInput(
            gettext("The skill is not valid: %(errors)s") % {"errors": report.errors[0]},
            code="invalid_skill",
            details={"problems": [p.as_dict() for p in report.problems]},
        )
    if scan.verdict == "block":
        raise InvalidInput(
            gettext("The security scan blocked this upload: %(findings)s")
            % {
                "findings": "; ".join(
                    f"{f.file}:{f.line} {f.rule}" for f in scan.findings if f.severity == "block"
                )
            },
            code="scan_blocked",
            details=scan.as_dict(),
        )
    with transaction.atomic():
        outcome.version = _create_version(
            actor=actor,
            bundle=bundle,
            parsed=str(parsed),
            namespace=namespace,
            name=name,
            changelog=changelog,
            visibility=visibility,
            department=department,
            display_name=display_name,
            report=report,
            scan=scan,
            review_note=review_note,
            approval=approval if reviewed else None,
        )
        if outcome.version.status == SkillVersion.Status.PUBLISHED:
            for tag in tags:
                if tag != "latest":
                    dist_tag_set(
                        actor=actor,
                        package=outcome.version.package,
                        tag=tag,
                        version=outcome.version,
                    )
    return outcome


def _create_version(
    *,
    actor,
    bundle,
    parsed,
    namespace,
    name,
    changelog,
    visibility,
    department,
    display_name,
    report,
    scan,
    review_note="",
    approval: Approval | None = None,
) -> SkillVersion:
    space = _namespace_for_publish(actor, namespace)
    package = SkillPackage.objects.select_for_update().filter(namespace=space, name=name).first()
    if package is None:
        package = _package_create(
            actor=actor,
            namespace=space,
            name=name,
            visibility=visibility,
            department=department or space.department,
            display_name=display_name,
        )
    elif approval is None and not can_maintain(actor, package):
        raise NotPermitted(
            gettext("Only the owner of %(package)s or a skill reviewer may publish new versions.")
            % {"package": package.full_name}
        )
    if UsedVersion.objects.filter(package=package, version=parsed).exists():
        raise Conflict(
            gettext("%(package)s@%(parsed)s was already used; version numbers are never reused.")
            % {"package": package.full_name, "parsed": parsed},
            code="version_used",
        )
    UsedVersion.objects.create(package=package, version=parsed)
    semver = parse_version(parsed)
    skill_md = bundle.get("SKILL.md")
    version = SkillVersion.objects.create(
        package=package,
        version=parsed,
        major=semver.major,
        minor=semver.minor,
        patch=semver.patch,
        prerelease=semver.prerelease or "",
        status=SkillVersion.Status.PENDING_REVIEW,
        changelog=changelog[:20000],
        fingerprint=bundle.fingerprint,
        frontmatter=report.frontmatter,
        body=report.document.body if report.document else "",
        validation=[p.as_dict() for p in report.problems],
        scan_verdict=scan.verdict,
        scan_findings=[f.as_dict() for f in scan.findings],
        total_bytes=bundle.total_bytes,
        created_by=actor.member,
    )
    _store_files(version, bundle)
    audit.record(
        actor=actor,
        action="hub.version.create",
        target=("skillversion", version.pk, str(version)),
        organization=package.organization,
        after={
            **_version_snapshot(version),
            "size": bundle.total_bytes,
            "files": len(bundle.files),
            "has_skill_md": skill_md is not None,
        },
    )
    if approval is None:
        approval = version_approval(actor, package, uploading=True)
    if approval.completes_review and scan.verdict in AUTO_PUBLISH_VERDICTS:
        _publish(actor, version, note=review_note or NO_REVIEW_NOTE)
    return version


def _package_create(*, actor, namespace, name, visibility, department, display_name):
    visibility = visibility or SkillPackage.Visibility.ORGANIZATION
    if visibility not in SkillPackage.Visibility.values:
        raise InvalidInput(
            gettext("Unknown visibility '%(visibility)s'.") % {"visibility": visibility},
            details={
                "visibility": [
                    gettext("Choose from: %(values)s")
                    % {"values": ", ".join(SkillPackage.Visibility.values)}
                ]
            },
        )
    if visibility == SkillPackage.Visibility.DEPARTMENT:
        department = department or getattr(actor.member, "department", None)
        if department is None:
            raise InvalidInput(
                gettext("Department visibility needs a department."),
                details={"department": [gettext("Required for department visibility.")]},
            )
    if department is not None and department.organization_id != actor.organization.pk:
        raise NotFound(gettext("No such department."))
    package = SkillPackage.objects.create(
        organization=actor.organization,
        namespace=namespace,
        name=name,
        display_name=display_name or name,
        owner=actor.member,
        visibility=visibility,
        department=department if visibility == SkillPackage.Visibility.DEPARTMENT else None,
    )
    audit.record(
        actor=actor,
        action="hub.package.create",
        target=package,
        after={
            "name": package.full_name,
            "visibility": visibility,
            "department": package.department_id,
        },
    )
    return package


def _sign(version: SkillVersion) -> None:
    files = version.files.values_list("path", "sha256", "size")
    payload = signed_payload(
        package=version.package.full_name,
        version=version.version,
        fingerprint=version.fingerprint,
        files=list(files),
    )
    version.signature = signing.sign(payload)
    version.key_id = signing.key_id()


def _publish(actor: Actor, version: SkillVersion, *, note: str = "") -> None:
    if version.scan_verdict == "block":
        raise InvalidInput(
            gettext("A version blocked by the security scan never publishes."), code="scan_blocked"
        )
    before = _version_snapshot(version)
    _sign(version)
    version.status = SkillVersion.Status.PUBLISHED
    version.published_at = timezone.now()
    version.reviewed_by = actor.member
    version.review_note = note
    version.save(
        update_fields=[
            "signature",
            "key_id",
            "status",
            "published_at",
            "reviewed_by",
            "review_note",
        ]
    )
    audit.record(
        actor=actor,
        action="hub.version.publish",
        target=("skillversion", version.pk, str(version)),
        organization=version.package.organization,
        before=before,
        after={**_version_snapshot(version), "key_id": version.key_id},
        reason=note,
    )
    _refresh_latest(actor, version.package)
    # Agents whose range or tag now selects this version update (or are offered it).
    version_distribute(version=version, actor=actor)


def _refresh_package_text(package: SkillPackage, latest: SkillVersion | None) -> None:
    """Summary and search document (name A, description B, body C) follow `latest`."""
    if latest is None:
        return
    description = latest.frontmatter.get("description", "")
    package.summary = description if isinstance(description, str) else ""
    package.search_text = latest.body[:20000]
    package.updated_at = timezone.now()
    package.save(update_fields=["summary", "search_text", "updated_at"])
    refresh_search_vector(SkillPackage.objects.filter(pk=package.pk))
    if settings.CELERY_TASK_ALWAYS_EAGER or not getattr(settings, "TESTING", False):
        transaction.on_commit(lambda: _queue_embedding(package.pk))


def _queue_embedding(package_id: int) -> None:
    try:
        enqueue("hub.tasks.package_embed", package_id)
    except Exception:
        logger.warning("hub: could not queue embedding of package %s", package_id)


def refresh_search_vector(packages) -> None:
    title = (
        SearchVector("name", weight="A", config="simple")
        + SearchVector("display_name", weight="A", config="simple")
        + SearchVector("summary", weight="B", config="simple")
    )
    packages.update(
        title_vector=title,
        search_vector=title + SearchVector("search_text", weight="C", config="simple"),
    )


def _refresh_latest(actor: Actor, package: SkillPackage) -> None:
    """`latest` → highest published, non-yanked stable version (prerelease if that is all),
    unless pinned by hand to a version that is still installable."""
    tag = DistTag.objects.select_for_update().filter(package=package, tag="latest").first()
    if tag is not None and tag.pinned and tag.version.installable and not tag.version.yanked:
        _refresh_package_text(package, tag.version)
        return
    candidates = ordered(
        SkillVersion.objects.filter(
            package=package, status=SkillVersion.Status.PUBLISHED, yanked=False
        )
    )
    stable = [v for v in candidates if not v.prerelease]
    target = (stable or candidates or [None])[0]
    before = tag.version.version if tag else None
    if target is None:
        if tag is not None:
            tag.delete()
    elif tag is None:
        DistTag.objects.create(package=package, tag="latest", version=target)
    elif tag.version_id != target.pk or tag.pinned:
        tag.version, tag.pinned, tag.updated_at = target, False, timezone.now()
        tag.save(update_fields=["version", "pinned", "updated_at"])
    after = target.version if target else None
    if before != after:
        _audit_tag(actor, package, "latest", before, after, "automatic: highest published version")
    _refresh_package_text(package, target)


# --- review ----------------------------------------------------------------------------------


@transaction.atomic
def version_review(
    *,
    actor: Actor,
    version: SkillVersion,
    approve: bool,
    note: str = "",
    approval: Approval | None = None,
) -> SkillVersion:
    """Approve (publish) or reject a version pending review. The reviewer decides the Hub's
    review stage, unless `approval` (the skill review stages' final approval) decided it."""
    version = SkillVersion.objects.select_for_update().select_related("package").get(pk=version.pk)
    if approval is None or not (approval.allowed and approval.completes_review):
        require_reviewer(actor, version.package)
    if version.status != SkillVersion.Status.PENDING_REVIEW:
        raise Conflict(
            gettext("%(version)s is %(status)s, not pending review.")
            % {"version": version, "status": version.status},
            code="not_pending",
        )
    if approve:
        _publish(actor, version, note=note)
    else:
        before = _version_snapshot(version)
        version.status = SkillVersion.Status.REJECTED
        version.reviewed_by = actor.member
        version.review_note = note
        version.save(update_fields=["status", "reviewed_by", "review_note"])
        audit.record(
            actor=actor,
            action="hub.version.reject",
            target=("skillversion", version.pk, str(version)),
            organization=version.package.organization,
            before=before,
            after=_version_snapshot(version),
            reason=note,
        )
    return version


@transaction.atomic
def version_yank(*, actor: Actor, version: SkillVersion, reason: str) -> SkillVersion:
    require_maintainer(actor, version.package)
    if not reason.strip():
        raise InvalidInput(
            gettext("Say why the version is yanked."), details={"reason": [gettext("Required.")]}
        )
    version = SkillVersion.objects.select_for_update().get(pk=version.pk)
    if version.status != SkillVersion.Status.PUBLISHED:
        raise Conflict(gettext("Only a published version can be yanked."), code="not_published")
    before = _version_snapshot(version)
    version.yanked, version.yanked_reason, version.yanked_at = True, reason.strip(), timezone.now()
    version.save(update_fields=["yanked", "yanked_reason", "yanked_at"])
    audit.record(
        actor=actor,
        action="hub.version.yank",
        target=("skillversion", version.pk, str(version)),
        organization=version.package.organization,
        before=before,
        after=_version_snapshot(version),
        reason=reason,
    )
    _refresh_latest(actor, version.package)
    return version


@transaction.atomic
def version_unyank(*, actor: Actor, version: SkillVersion) -> SkillVersion:
    require_maintainer(actor, version.package)
    version = SkillVersion.objects.select_for_update().get(pk=version.pk)
    if not version.yanked:
        return version
    before = _version_snapshot(version)
    version.yanked, version.yanked_reason, version.yanked_at = False, "", None
    version.save(update_fields=["yanked", "yanked_reason", "yanked_at"])
    audit.record(
        actor=actor,
        action="hub.version.unyank",
        target=("skillversion", version.pk, str(version)),
        organization=version.package.organization,
        before=before,
        after=_version_snapshot(version),
    )
    _refresh_latest(actor, version.package)
    return version


@transaction.atomic
def version_remove(*, actor: Actor, version: SkillVersion, reason: str = "") -> None:
    """Delete a version (reviewers only); its number stays used for ever."""
    if not actor.can("skill.review", version.package):
        raise NotPermitted(gettext("Removing a version needs 'skill.review'."))
    package = version.package
    snapshot = _version_snapshot(version)
    version.delete()
    audit.record(
        actor=actor, action="hub.version.remove", target=package, before=snapshot, reason=reason
    )
    _refresh_latest(actor, package)


@transaction.atomic
def package_deprecate(
    *, actor: Actor, package: SkillPackage, message: str = "", deprecated: bool = True
) -> SkillPackage:
    require_maintainer(actor, package)
    before = {"deprecated": package.deprecated, "message": package.deprecation_message}
    package.deprecated = deprecated
    package.deprecation_message = message.strip() if deprecated else ""
    package.updated_at = timezone.now()
    package.save(update_fields=["deprecated", "deprecation_message", "updated_at"])
    audit.record(
        actor=actor,
        action="hub.package.deprecate" if deprecated else "hub.package.undeprecate",
        target=package,
        before=before,
        after={"deprecated": package.deprecated, "message": package.deprecation_message},
    )
    return package


@transaction.atomic
def package_update(
    *,
    actor: Actor,
    package: SkillPackage,
    visibility: str | None = None,
    department: Department | None = None,
    display_name: str | None = None,
    badges: list[str] | None = None,
) -> SkillPackage:
    require_maintainer(actor, package)
    before = {
        "visibility": package.visibility,
        "department": package.department_id,
        "display_name": package.display_name,
        "badges": package.badges,
    }
    if badges is not None:
        if not actor.has("skill.review"):
            raise NotPermitted(gettext("Badges are given by skill reviewers."))
        package.badges = sorted({str(b)[:32] for b in badges})[:10]
    if display_name is not None:
        package.display_name = display_name.strip()[:200] or package.name
    if visibility is not None:
        if visibility not in SkillPackage.Visibility.values:
            raise InvalidInput(
                gettext("Unknown visibility '%(visibility)s'.") % {"visibility": visibility}
            )
        if visibility == SkillPackage.Visibility.DEPARTMENT:
            department = department or package.department
            if department is None or department.organization_id != package.organization_id:
                raise InvalidInput(gettext("Department visibility needs a department of this org."))
            package.department = department
        else:
            package.department = None
        package.visibility = visibility
    package.updated_at = timezone.now()
    package.save()
    audit.record(
        actor=actor,
        action="hub.package.update",
        target=package,
        before=before,
        after={
            "visibility": package.visibility,
            "department": package.department_id,
            "display_name": package.display_name,
            "badges": package.badges,
        },
    )
    return package


# --- dist-tags -------------------------------------------------------------------------------


def _audit_tag(
    actor, package, tag: str, before: str | None, after: str | None, reason: str = ""
) -> None:
    """One audit event per tag move (`after` None: removed); rollback shows as a move back."""
    audit.record(
        actor=actor,
        action="hub.tag.move" if after is not None else "hub.tag.remove",
        target=package,
        changes={"tag": tag, "before": {"version": before}, "after": {"version": after}},
        reason=reason,
    )


def _check_tag(tag: str) -> str:
    tag = tag.strip()
    if not TAG_PATTERN.match(tag) or is_range(tag):
        raise InvalidInput(
            gettext(
                "'%(tag)s' cannot be a dist-tag: use a word like beta or stable (not a version)."
            )
            % {"tag": tag},
            code="invalid_tag",
        )
    return tag


@transaction.atomic
def dist_tag_set(
    *, actor: Actor, package: SkillPackage, tag: str, version: SkillVersion
) -> DistTag:
    """Point `tag` at `version` (rollback = re-tag an older version); the move is audited."""
    require_maintainer(actor, package)
    tag = _check_tag(tag)
    if version.package_id != package.pk:
        raise NotFound(gettext("No such version of this skill."))
    if version.status != SkillVersion.Status.PUBLISHED or version.yanked:
        raise InvalidInput(
            gettext("%(version)s is not installable (unpublished or yanked).")
            % {"version": version},
            code="not_installable",
        )
    existing = DistTag.objects.select_for_update().filter(package=package, tag=tag).first()
    before = existing.version.version if existing else None
    if existing is None:
        existing = DistTag.objects.create(
            package=package, tag=tag, version=version, pinned=tag == "latest"
        )
    else:
        existing.version, existing.updated_at = version, timezone.now()
        existing.pinned = tag == "latest"
        existing.save(update_fields=["version", "updated_at", "pinned"])
    _audit_tag(actor, package, tag, before, version.version)
    if tag == "latest":
        _refresh_package_text(package, version)
    if before != version.version:
        version_distribute(version=version, actor=actor)
    return existing


@transaction.atomic
def dist_tag_remove(*, actor: Actor, package: SkillPackage, tag: str) -> None:
    require_maintainer(actor, package)
    existing = DistTag.objects.filter(package=package, tag=tag).select_related("version").first()
    if existing is None:
        raise NotFound(
            gettext("%(package)s has no dist-tag '%(tag)s'.")
            % {"package": package.full_name, "tag": tag}
        )
    if tag == "latest":
        existing.pinned = False
        existing.save(update_fields=["pinned"])
        _refresh_latest(actor, package)
        return
    before = existing.version.version
    existing.delete()
    _audit_tag(actor, package, tag, before, None)


# --- counters --------------------------------------------------------------------------------


def version_record_download(version: SkillVersion, *, install: bool = True) -> None:
    """Count a download (and an install when it is one) for today; no audit (a counter)."""
    today = timezone.now().date()
    stat, _ = SkillDailyStat.objects.get_or_create(
        version=version, day=today, defaults={"package_id": version.package_id}
    )
    SkillDailyStat.objects.filter(pk=stat.pk).update(
        downloads=F("downloads") + 1, installs=F("installs") + (1 if install else 0)
    )


def version_record_outcome(version: SkillVersion, *, success: bool) -> None:
    today = timezone.now().date()
    stat, _ = SkillDailyStat.objects.get_or_create(
        version=version, day=today, defaults={"package_id": version.package_id}
    )
    if success:
        SkillDailyStat.objects.filter(pk=stat.pk).update(successes=F("successes") + 1)
    else:
        SkillDailyStat.objects.filter(pk=stat.pk).update(failures=F("failures") + 1)
