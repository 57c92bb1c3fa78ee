"""Console pages for the Skills Hub: browse and search skills; a package with its versions,
dist-tags, installs, the templates that have it (and the one-click install into a template) and
success rates; a version's files, scan findings and signature state;
how each version was reviewed; and distribution — which agents run which version, offered
updates to apply, rollbacks."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import path, reverse
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from cadre.agents.models import AgentTemplate, TemplateVersion
from cadre.console.scoping import restricted, restricted_for
from cadre.console.views.base import (
    denied,
    paginate,
    query_without_page,
    require_permission,
)
from cadre.errors import CadreError, NotFound
from cadre.identifiers import parse_pk
from cadre.skills import selectors as skill_selectors
from hub import distribution, outcomes, selectors
from hub.hooks import verify_installed
from hub.models import DistTag, SkillInstall, SkillPackage

MAX_FILE_SHOWN = 256 * 1024


def _package_or_404(request, namespace: str, name: str) -> SkillPackage:
    try:
        return selectors.package_get(request.actor, namespace, name)
    except NotFound:
        raise Http404("No such skill.") from None


def _version_or_404(request, package: SkillPackage, version: str):
    found = selectors.versions_visible(request.actor, package).filter(version=version).first()
    if found is None:
        raise Http404("No such version.")
    return found


def _rows(packages) -> list[dict]:
    """Table rows with latest version, 60-day installs and success rate (three queries)."""
    packages = list(packages)
    ids = [package.pk for package in packages]
    latest = selectors.annotate_latest(ids)
    installs = selectors.installs_since(ids)
    rates = outcomes.package_success_rates(ids)
    return [
        {
            "package": package,
            "latest": latest.get(package.pk),
            "installs": installs.get(package.pk, 0),
            "outcomes": rates.get(package.pk, outcomes.EMPTY_RATE),
            "score": getattr(package, "score", None),
        }
        for package in packages
    ]


@require_permission("skill.view")
def hub_browse(request):
    query = request.GET.get("q", "").strip()[:200]
    if query:
        results = selectors.search(request.actor, query, limit=50)
        for package, score in results:
            package.score = score
        rows = _rows(package for package, _ in results)
        page = None
    else:
        page = paginate(
            request,
            selectors.packages_visible(request.actor)
            .defer("search_text", "search_vector", "title_vector")
            .order_by("namespace__handle", "name"),
        )
        rows = _rows(page.object_list)
    return render(
        request,
        "console/hub/browse.html",
        {
            "q": query,
            "rows": rows,
            "page": page,
            "query": query_without_page(request),
            "pending_updates": selectors.installs_visible(request.actor)
            .filter(pending_version__isnull=False)
            .count(),
        },
    )


@require_permission("skill.view")
def hub_package(request, namespace: str, name: str):
    package = _package_or_404(request, namespace, name)
    versions = selectors.ordered(selectors.versions_visible(request.actor, package))
    rates = outcomes.version_success_rates([version.pk for version in versions])
    installs = (
        selectors.installs_visible(request.actor)
        .filter(package=package)
        .select_related("agent__deployment__template", "version", "pending_version")
        .order_by("agent__name")
    )
    tags = DistTag.objects.filter(package=package).select_related("version")
    templates = distribution.package_templates(request.actor, package)
    return render(
        request,
        "console/hub/package.html",
        {
            "package": package,
            "versions": [
                {"version": v, "outcomes": rates.get(v.pk, outcomes.EMPTY_RATE)} for v in versions
            ],
            "tags": tags,
            "stats": selectors.package_stats(package),
            "installs": paginate(request, installs),
            "can_maintain": selectors.can_maintain(request.actor, package),
            "can_manage": request.actor.may("deployment.manage"),
            "templates": templates,
            "install_choices": _install_choices(request.actor, templates),
        },
    )


def _install_choices(actor, templates: list[dict]) -> list:
    """Templates the actor may install the skill into from the package page: those offered
    (taught it, or ask for an older range), then the other templates they manage."""
    if not (actor.has("deployment.manage") and actor.may("template.manage", AgentTemplate)):
        return []
    listed = {row["template"].pk for row in templates}
    offered = [row["template"] for row in templates if row["can_install"]]
    others = (
        restricted_for(actor, AgentTemplate, "manage")
        .filter(is_archived=False, versions__status=TemplateVersion.Status.PUBLISHED)
        .exclude(pk__in=listed)
        .distinct()
        .order_by("name")[:100]
    )
    return offered + list(others)


@require_permission("skill.view")
def hub_template_install(request, namespace: str, name: str):
    """Install the skill into a template and roll it out (one click from the package page;
    GET shows what it will do)."""
    package = _package_or_404(request, namespace, name)
    if not (
        request.actor.has("deployment.manage")
        and request.actor.may("template.manage", AgentTemplate)
    ):
        return denied(
            request,
            _(
                "Installing a skill into a template needs “template.manage” and "
                "“deployment.manage”."
            ),
        )
    back = reverse("console:hub_package", args=[package.namespace.handle, package.name])
    template_id = parse_pk(request.POST.get("template") or request.GET.get("template") or "")
    if template_id is None:
        messages.error(request, _("Choose the template to install the skill into."))
        return redirect(back)
    template = restricted(request, AgentTemplate).filter(pk=template_id).first()
    if template is None:
        raise Http404("No such template.")
    error = None
    if request.method == "POST":
        try:
            result = distribution.template_skill_install(
                actor=request.actor, package=package, template=template
            )
        except CadreError as caught:
            error = caught.message
        else:
            messages.success(
                request,
                ngettext(
                    "%(skill)s %(version)s is in “%(template)s” v%(template_version)s; "
                    "%(count)d agent runs it now.",
                    "%(skill)s %(version)s is in “%(template)s” v%(template_version)s; "
                    "%(count)d agents run it now.",
                    result["agents"],
                )
                % {
                    "skill": package.full_name,
                    "version": result["version"],
                    "template": template.name,
                    "template_version": result["template_version"],
                    "count": result["agents"],
                },
            )
            return redirect(back)
    return render(
        request,
        "console/confirm.html",
        {
            "title": _("Install %(skill)s into “%(template)s” and roll out?")
            % {"skill": package.full_name, "template": template.name},
            "body": _(
                "The template's next version references the skill's latest version and is "
                "published through the template's own checks and evaluation gates; every "
                "deployment running the current version moves onto it, and the person who "
                "taught the skill is told once it is live. Both steps are in the audit log."
            ),
            "confirm_label": _("Install and roll out"),
            "error": error,
            "cancel_url": back,
            "crumbs": [(_("Skills Hub"), "console:hub")],
        },
        status=409 if error else 200,
    )


@require_permission("skill.view")
def hub_version(request, namespace: str, name: str, version: str):
    package = _package_or_404(request, namespace, name)
    found = _version_or_404(request, package, version)
    problem = ""
    if found.status == found.Status.PUBLISHED:
        problem, _ = verify_installed(found)
    can_maintain = selectors.can_maintain(request.actor, package)
    review = skill_selectors.version_review_record(found, request.actor)
    candidate = review.get("candidate")
    review["candidate_visible"] = (
        candidate is not None
        and skill_selectors.candidates_visible(request.actor).filter(pk=candidate.pk).exists()
    )
    return render(
        request,
        "console/hub/version.html",
        {
            "review": review,
            "package": package,
            "version": found,
            "files": found.files.all(),
            "findings": found.scan_findings if can_maintain else [],
            "can_maintain": can_maintain,
            "signature_problem": problem,
            "outcomes": outcomes.version_success_rates([found.pk]).get(
                found.pk, outcomes.EMPTY_RATE
            ),
            "installed_on": selectors.installs_visible(request.actor).filter(version=found).count(),
        },
    )


@require_permission("skill.view")
def hub_file(request, namespace: str, name: str, version: str, file_path: str):
    package = _package_or_404(request, namespace, name)
    found = _version_or_404(request, package, version)
    item = found.files.select_related("blob").filter(path=file_path).first()
    if item is None:
        raise Http404("No such file.")
    content = bytes(item.blob.content[:MAX_FILE_SHOWN])
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError:
        text = None  # binary: shown as its size and hash only
    return render(
        request,
        "console/hub/file.html",
        {
            "package": package,
            "version": found,
            "file": item,
            "text": text,
            "truncated": item.size > MAX_FILE_SHOWN,
        },
    )


@require_permission("skill.view")
def hub_distribution(request):
    installs = (
        selectors.installs_visible(request.actor)
        .select_related(
            "agent__deployment__template",
            "package__namespace",
            "version",
            "pending_version",
        )
        .order_by("agent__deployment__template__name", "agent__name", "package__name")
    )
    pending_only = request.GET.get("pending") == "1"
    if pending_only:
        installs = installs.filter(pending_version__isnull=False)
    return render(
        request,
        "console/hub/distribution.html",
        {
            "page": paginate(request, installs),
            "query": query_without_page(request),
            "pending_only": pending_only,
            "can_manage": request.actor.may("deployment.manage"),
        },
    )


def _install_or_404(request, pk: int) -> SkillInstall:
    install = (
        selectors.installs_visible(request.actor)
        .select_related("agent", "package__namespace", "version", "pending_version")
        .filter(pk=pk)
        .first()
    )
    if install is None:
        raise Http404("No such install.")
    return install


@require_permission("skill.view")
def hub_install(request, pk: int):
    install = _install_or_404(request, pk)
    return render(
        request,
        "console/hub/install.html",
        {
            "install": install,
            "events": install.events.select_related("from_version", "to_version")[:100],
            "rollback_to": distribution.previous_version(install),
            "can_manage": request.actor.can("deployment.manage", install.agent.deployment),
        },
    )


def _install_action(request, pk: int, *, apply: bool):
    install = _install_or_404(request, pk)
    if not request.actor.can("deployment.manage", install.agent.deployment):
        return denied(request, _("Changing an agent's skills needs “deployment.manage”."))
    target = install.pending_version if apply else distribution.previous_version(install)
    error = None
    if request.method == "POST":
        try:
            if apply:
                distribution.install_apply_update(actor=request.actor, install=install)
            else:
                distribution.install_rollback(
                    actor=request.actor,
                    install=install,
                    reason=request.POST.get("reason", "")[:300],
                )
        except CadreError as caught:
            error = caught.message
        else:
            done = (
                _("%(skill)s on %(agent)s was updated.")
                if apply
                else _("%(skill)s on %(agent)s was rolled back.")
            )
            messages.success(
                request, done % {"skill": install.package.full_name, "agent": install.agent.name}
            )
            return redirect("console:hub_install", pk=install.pk)
    current = install.version.version if install.version else _("nothing")
    wanted = target.version if target else "—"
    return render(
        request,
        "console/confirm.html",
        {
            "title": (
                _("Apply the update to %(skill)s on %(agent)s?")
                if apply
                else _("Roll back %(skill)s on %(agent)s?")
            )
            % {"skill": install.package.full_name, "agent": install.agent.name},
            "body": _(
                "The agent moves from %(current)s to %(wanted)s; its next runs load that "
                "version. The move is recorded in the install's history and the audit log."
            )
            % {"current": current, "wanted": wanted},
            "confirm_label": _("Apply update") if apply else _("Roll back"),
            "danger": not apply,
            "error": error,
            "cancel_url": reverse("console:hub_install", args=[install.pk]),
            "crumbs": [
                (_("Skills Hub"), "console:hub"),
                (_("Distribution"), "console:hub_distribution"),
            ],
        },
        status=409 if error else 200,
    )


@require_permission("skill.view")
def hub_install_apply(request, pk: int):
    return _install_action(request, pk, apply=True)


@require_permission("skill.view")
def hub_install_rollback(request, pk: int):
    return _install_action(request, pk, apply=False)


_skill = "hub/skills/<str:namespace>/<str:name>/"

urlpatterns: list = [
    path("hub/", hub_browse, name="hub"),
    path("hub/distribution/", hub_distribution, name="hub_distribution"),
    path("hub/installs/<int:pk>/", hub_install, name="hub_install"),
    path("hub/installs/<int:pk>/apply/", hub_install_apply, name="hub_install_apply"),
    path("hub/installs/<int:pk>/rollback/", hub_install_rollback, name="hub_install_rollback"),
    path(_skill, hub_package, name="hub_package"),
    path(_skill + "templates/install/", hub_template_install, name="hub_template_install"),
    path(_skill + "versions/<str:version>/", hub_version, name="hub_version"),
    path(
        _skill + "versions/<str:version>/files/<path:file_path>",
        hub_file,
        name="hub_file",
    ),
]
