"""Skill distribution: each agent's installs follow its template version's skill references,
and a newly published (or re-tagged) version reaches the agents whose policy accepts it.

A template version lists `{"package": "@ns/name", "range": "^1.2" | "tag": "stable",
"policy": "auto" | "manual" | "pinned"}`. When an agent is created or rolled onto another
template version, `installs_sync` (an AGENTS_PROVISIONED listener of cadre.agents.services)
resolves each reference to a version (`SkillInstall`). When a version is published or a
dist-tag moves, `version_distribute` applies the policy to every install whose range or tag now
selects it:

    auto     a patch of the installed minor is applied; a minor or major update is offered
    manual   every update is offered (`pending_version`), applied by `install_apply_update`
    pinned   never moves, nothing is offered

Every move is an `SkillInstallEvent` (the agent's install history) and an audit event;
`install_rollback` puts the install back on the version it had before its last move.

A skill taught by a template's agents (a confirmed proposal, `SKILL_ORIGINS`) reaches that
template once approved: `template_skill_install` publishes the template's next version with
the skill referenced (through the template's own checks and evaluation gates) and rolls it out
to the deployments running the version it replaced — automatically when the organization's
`approved_skills` setting is "automatic" (`approved_skill_reach`, after the publication
commits), otherwise in one click from the skill's page or review. Each person who taught it
gets a notice (console and IM) once agents run it.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable

from django.db import transaction
from django.db.models import Count, Q
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext, gettext_lazy, ngettext_lazy

from cadre.agents import services as agent_services
from cadre.agents.models import Agent, AgentTemplate
from cadre.errors import CadreError, Conflict, InvalidInput, NotFound
from cadre.governance import audit
from cadre.ports import Listeners
from cadre.queues import enqueue
from cadre.tenancy.actors import Actor, system_actor
from cadre.tenancy.models import Member, Organization
from cadre.tenancy.services.notices import notice_send
from hub.models import (
    DistTag,
    SkillInstall,
    SkillInstallEvent,
    SkillPackage,
    SkillVersion,
)
from hub.selectors import resolve_version
from hub.versions import is_version, parse_range, parse_version, sort_key

logger = logging.getLogger(__name__)
POLICIES = tuple(SkillInstall.Policy.values)
MOVES = (
    SkillInstallEvent.Action.INSTALL,
    SkillInstallEvent.Action.UPDATE,
    SkillInstallEvent.Action.APPLY,
    SkillInstallEvent.Action.CHANGE,
    SkillInstallEvent.Action.ROLLBACK,
)


# --- references --------------------------------------------------------------------------


def normalize_reference(entry: dict) -> dict:
    """`{"package", "requested", "policy"}` of one template skill entry; InvalidInput if bad."""
    package = str(entry.get("package") or "").strip()
    if not package.startswith("@"):
        package = "@" + package
    requested = str(entry.get("tag") or entry.get("range") or "").strip()
    policy = str(entry.get("policy") or SkillInstall.Policy.AUTO)
    if policy not in POLICIES:
        raise InvalidInput(
            gettext("%(package)s: update policy must be one of %(policies)s.")
            % {"package": package, "policies": ", ".join(POLICIES)},
            code="invalid_policy",
        )
    return {"package": package, "requested": requested, "policy": policy}


def references_of(template_version) -> list[dict]:
    """The normalized skill references of a template version (bad policies → auto)."""
    found = []
    for entry in template_version.skills or []:
        if not isinstance(entry, dict) or not entry.get("package"):
            continue
        if entry.get("policy") not in (None, "", *POLICIES):
            entry = {**entry, "policy": SkillInstall.Policy.AUTO}  # saved before validation
        found.append(normalize_reference(entry))
    return found


def _packages_by_name(organization_id: int, names: Iterable[str]) -> dict[str, SkillPackage]:
    """`@ns/name` → package usable by the organization: its own, or instance-wide ones."""
    condition = Q(pk__in=[])
    for full_name in set(names):
        handle, _, name = full_name.lstrip("@").partition("/")
        condition |= Q(namespace__handle=handle, name=name)
    usable = Q(organization_id=organization_id) | Q(visibility=SkillPackage.Visibility.INSTANCE)
    packages = SkillPackage.objects.filter(condition).filter(usable).select_related("namespace")
    return {package.full_name: package for package in packages}


def _resolve(package: SkillPackage, requested: str) -> tuple[SkillVersion | None, str]:

    try:
        return resolve_version(package, requested or "latest"), ""
    except (NotFound, InvalidInput) as error:
        return None, str(error)[:300]


def _audit_installs(actor, organization, action: str, package: SkillPackage, changes: dict):
    audit.record(
        actor=actor or system_actor(organization, label="skill distribution"),
        action=action,
        target=("skillpackage", package.pk, package.full_name),
        organization=organization,
        changes=changes,
    )


# --- sync (agent created, rolled out, rolled back) ---------------------------------------


@transaction.atomic
def installs_sync(*, agent_ids: Iterable[int], actor: Actor | None = None) -> int:
    """Make each agent's installs match its template version's references; returns changes.

    New references are resolved (the highest version of the range, or the tag's version);
    a changed range or policy re-resolves; references that disappeared are removed. Unchanged
    installs are left exactly as they are (an offered update stays offered).
    """

    agents = list(
        Agent.objects.filter(pk__in=list(agent_ids)).select_related("version", "organization")
    )
    if not agents:
        return 0
    wanted = {agent.pk: references_of(agent.version) for agent in agents}
    existing: dict[tuple[int, int], SkillInstall] = {
        (install.agent_id, install.package_id): install
        for install in SkillInstall.objects.filter(agent_id__in=wanted).select_related("version")
    }
    by_org: dict[int, set[str]] = defaultdict(set)
    for agent in agents:
        by_org[agent.organization_id] |= {ref["package"] for ref in wanted[agent.pk]}
    packages = {org: _packages_by_name(org, names) for org, names in by_org.items() if names}
    resolved: dict[tuple[int, str], tuple[SkillVersion | None, str]] = {}
    created, events = [], []
    summary: dict[tuple[int, int], dict] = defaultdict(lambda: {"agents": [], "versions": set()})
    keep: set[int] = set()
    now = timezone.now()
    for agent in agents:
        for ref in wanted[agent.pk]:
            package = packages.get(agent.organization_id, {}).get(ref["package"])
            if package is None:
                continue  # not (or no longer) visible: nothing to install
            key = (package.pk, ref["requested"])
            if key not in resolved:
                resolved[key] = _resolve(package, ref["requested"])
            version, error = resolved[key]
            install = existing.get((agent.pk, package.pk))
            if install is None:
                install = SkillInstall(
                    organization_id=agent.organization_id,
                    agent=agent,
                    package=package,
                    requested=ref["requested"],
                    policy=ref["policy"],
                    version=version,
                    error=error,
                    created_at=now,
                    updated_at=now,
                )
                created.append(install)
                action = SkillInstallEvent.Action.INSTALL
                events.append((install, action, None, version, "template references the skill"))
            elif install.requested != ref["requested"] or install.policy != ref["policy"]:
                before = install.version
                install.requested, install.policy = ref["requested"], ref["policy"]
                install.version, install.error, install.updated_at = version, error, now
                install.pending_version = None
                install.save(
                    update_fields=[
                        "requested",
                        "policy",
                        "version",
                        "error",
                        "pending_version",
                        "updated_at",
                    ]
                )
                keep.add(install.pk)
                events.append(
                    (install, SkillInstallEvent.Action.CHANGE, before, version, "template changed")
                )
            else:
                keep.add(install.pk)
                continue
            entry = summary[(agent.organization_id, package.pk)]
            entry["package"] = package
            entry["agents"].append(agent.pk)
            entry["versions"].add(version.version if version else None)
            entry["requested"] = ref["requested"]
    SkillInstall.objects.bulk_create(created)
    removed = [install for install in existing.values() if install.pk not in keep]
    for install in removed:
        entry = summary[(install.organization_id, install.package_id)]
        entry["package"] = install.package
        entry["removed"] = entry.get("removed", 0) + 1
    SkillInstall.objects.filter(pk__in=[install.pk for install in removed]).delete()
    SkillInstallEvent.objects.bulk_create(
        [
            SkillInstallEvent(
                install=install,
                action=action,
                from_version=before,
                to_version=after,
                actor_label=getattr(actor, "label", "skill distribution")[:200],
                reason=reason,
                created_at=now,
            )
            for install, action, before, after, reason in events
        ]
    )
    organizations = {agent.organization_id: agent.organization for agent in agents}
    for (organization_id, _), entry in summary.items():
        _audit_installs(
            actor,
            organizations[organization_id],
            "hub.install.sync",
            entry["package"],
            {
                "agents": sorted(entry["agents"])[:100],
                "agent_count": len(entry["agents"]),
                "requested": entry.get("requested"),
                "versions": sorted(v for v in entry["versions"] if v),
                "removed": entry.get("removed", 0),
            },
        )
    return len(events) + len(removed)


# --- a new version or a moved tag --------------------------------------------------------


def _install_where_missing(package: SkillPackage) -> None:
    """Agents that referenced the package before it had a version get their install now."""

    name = package.full_name
    referencing = Agent.objects.filter(
        Q(version__skills__contains=[{"package": name}])
        | Q(version__skills__contains=[{"package": name.lstrip("@")}])
    ).exclude(pk__in=SkillInstall.objects.filter(package=package).values("agent_id"))
    agent_ids = list(referencing.values_list("pk", flat=True))
    if agent_ids:
        installs_sync(agent_ids=agent_ids)


def _selects(install: SkillInstall, version: SkillVersion, tags: dict[str, int]) -> bool:
    """Does the install's range or dist-tag select `version`?"""
    requested = install.requested or "latest"
    if requested in tags:
        return tags[requested] == version.pk
    if is_version(requested):
        return False  # an exact pin only ever means itself
    try:
        return not version.yanked and version.version in parse_range(requested)
    except InvalidInput:
        return False


def _newer(a: SkillVersion, b: SkillVersion | None) -> bool:
    return b is None or sort_key(parse_version(a.version)) > sort_key(parse_version(b.version))


@transaction.atomic
def version_distribute(*, version: SkillVersion, actor: Actor | None = None) -> dict:
    """Apply each install's policy to a version that was just published or tagged.

    Returns {"updated": [install ids], "offered": [install ids]}.
    """
    if version.status != SkillVersion.Status.PUBLISHED or version.yanked:
        return {"updated": [], "offered": []}
    package = version.package
    _install_where_missing(package)
    tags = dict(DistTag.objects.filter(package=package).values_list("tag", "version_id"))
    installs = (
        SkillInstall.objects.select_for_update(of=("self",))
        .filter(package=package)
        .exclude(policy=SkillInstall.Policy.PINNED)
        .select_related("version", "pending_version", "organization")
    )
    updated: list[SkillInstall] = []
    offered: list[SkillInstall] = []
    for install in installs:
        current = install.version
        if current is not None and current.pk == version.pk:
            continue
        if not _newer(version, current) or not _selects(install, version, tags):
            continue
        patch = (
            current is not None
            and current.major == version.major
            and current.minor == version.minor
            and not version.prerelease
        )
        if install.policy == SkillInstall.Policy.AUTO and patch:
            updated.append(install)
        elif install.pending_version_id != version.pk and _newer(version, install.pending_version):
            offered.append(install)
    now = timezone.now()
    label = getattr(actor, "label", "skill distribution")[:200]
    events = [
        SkillInstallEvent(
            install=install,
            action=SkillInstallEvent.Action.UPDATE,
            from_version=install.version,
            to_version=version,
            actor_label=label,
            reason=f"auto: patch {version.version} published",
            created_at=now,
        )
        for install in updated
    ] + [
        SkillInstallEvent(
            install=install,
            action=SkillInstallEvent.Action.OFFER,
            from_version=install.version,
            to_version=version,
            actor_label=label,
            reason=f"{install.policy}: {version.version} waits to be applied",
            created_at=now,
        )
        for install in offered
    ]
    # An offer the applied patch supersedes is withdrawn; a newer one stays offered.
    SkillInstall.objects.filter(pk__in=[i.pk for i in updated]).update(
        version=version, error="", updated_at=now
    )
    SkillInstall.objects.filter(pk__in=[i.pk for i in offered]).update(
        pending_version=version, updated_at=now
    )
    superseded = [
        i.pk for i in updated if i.pending_version and not _newer(i.pending_version, version)
    ]
    SkillInstall.objects.filter(pk__in=superseded).update(pending_version=None)
    SkillInstallEvent.objects.bulk_create(events)
    by_org: dict[int, dict] = defaultdict(lambda: {"updated": [], "offered": []})
    organizations = {}
    for install in updated:
        by_org[install.organization_id]["updated"].append(install.agent_id)
        organizations[install.organization_id] = install.organization
    for install in offered:
        by_org[install.organization_id]["offered"].append(install.agent_id)
        organizations[install.organization_id] = install.organization
    for organization_id, agents in by_org.items():
        _audit_installs(
            actor
            if getattr(actor, "organization", None) == organizations[organization_id]
            else None,
            organizations[organization_id],
            "hub.install.distribute",
            package,
            {
                "version": version.version,
                "updated_agents": sorted(agents["updated"])[:100],
                "offered_agents": sorted(agents["offered"])[:100],
                "updated": len(agents["updated"]),
                "offered": len(agents["offered"]),
            },
        )
    # Once it commits: a version taught by a template's agents reaches that template.
    version_id = version.pk
    transaction.on_commit(lambda: _queue_reach(version_id))
    return {"updated": [i.pk for i in updated], "offered": [i.pk for i in offered]}


# --- manual actions ----------------------------------------------------------------------


def _manageable(actor: Actor, install: SkillInstall) -> SkillInstall:
    install = (
        SkillInstall.objects.select_for_update(of=("self",))
        .select_related("agent__deployment", "package__namespace", "version", "pending_version")
        .filter(pk=install.pk, organization=actor.organization)
        .first()
    )
    if install is None:
        raise NotFound(gettext("No such skill install."))
    actor.require("deployment.manage", install.agent.deployment)
    return install


def _move(actor, install, action, to_version, reason: str) -> SkillInstall:
    before = install.version
    install.version = to_version
    install.error = ""
    install.updated_at = timezone.now()
    if install.pending_version_id is not None and not _newer(install.pending_version, to_version):
        install.pending_version = None
    install.save(update_fields=["version", "error", "pending_version", "updated_at"])
    SkillInstallEvent.objects.create(
        install=install,
        action=action,
        from_version=before,
        to_version=to_version,
        actor_label=actor.label[:200],
        reason=reason[:300],
    )
    audit.record(
        actor=actor,
        action=f"hub.install.{action}",
        target=("skillinstall", install.pk, f"{install.package.full_name} on {install.agent}"),
        before={"version": before.version if before else None},
        after={"version": to_version.version},
        reason=reason,
    )
    return install


@transaction.atomic
def install_apply_update(*, actor: Actor, install: SkillInstall) -> SkillInstall:
    """Apply the update offered to an install (manual policy, or a minor/major under auto)."""
    install = _manageable(actor, install)
    pending = install.pending_version
    if pending is None:
        raise Conflict(gettext("No update is waiting for this install."), code="no_pending_update")
    if pending.status != SkillVersion.Status.PUBLISHED or pending.yanked:
        raise Conflict(
            gettext("%(pending)s is no longer installable.") % {"pending": pending},
            code="not_installable",
        )
    install.pending_version = None
    return _move(actor, install, SkillInstallEvent.Action.APPLY, pending, "update applied")


def previous_version(install: SkillInstall) -> SkillVersion | None:
    """The version the install had before its last move (what a rollback returns to)."""
    last = (
        install.events.filter(action__in=MOVES, to_version=install.version_id)
        .exclude(from_version=None)
        .select_related("from_version")
        .first()
    )
    return last.from_version if last is not None else None


@transaction.atomic
def install_rollback(*, actor: Actor, install: SkillInstall, reason: str = "") -> SkillInstall:
    """Put the install back on the version it had before its last move; audited."""
    install = _manageable(actor, install)
    target = previous_version(install)
    if target is None:
        raise Conflict(gettext("This install has no previous version."), code="no_previous_version")
    if target.status != SkillVersion.Status.PUBLISHED:
        raise Conflict(
            gettext("%(target)s is no longer published.") % {"target": target},
            code="not_installable",
        )
    return _move(actor, install, SkillInstallEvent.Action.ROLLBACK, target, reason or "rolled back")


# --- approved skills reach the templates that taught them ----------------------------------

# `package` → [{"proposal", "version", "template", "member"}]: which template's agents taught
# each of its published versions, and who (skills fills it: cadre.skills.origins).
SKILL_ORIGINS: Listeners[Callable[[SkillPackage], list[dict]]] = Listeners("skill origins")
LIVE_NOTICE = "hub.skill_live"


def _queue_reach(version_id: int) -> None:
    try:
        enqueue("hub.tasks.approved_skill_reach", version_id)
    except Exception:  # the publication stands; the skill's page still offers the install
        logger.warning("hub: could not queue approved_skill_reach for version %s", version_id)


def origins_of(package: SkillPackage) -> list[dict]:
    return [origin for found in SKILL_ORIGINS.notify(package) for origin in (found or [])]


def _reference_index(skills: list, package: SkillPackage) -> int | None:
    for index, entry in enumerate(skills or []):
        name = str(entry.get("package") or "") if isinstance(entry, dict) else ""
        if name and "@" + name.lstrip("@") == package.full_name:
            return index
    return None


def _reference_selects(entry: dict, version: SkillVersion) -> bool:
    """Does the template's reference (its range or dist-tag) select `version`?"""
    ref = normalize_reference(entry)
    requested = ref["requested"] or "latest"
    tag = DistTag.objects.filter(package=version.package, tag=requested).first()
    if tag is not None:
        return tag.version_id == version.pk
    if is_version(requested):
        return requested == version.version
    try:
        return version.version in parse_range(requested)
    except InvalidInput:
        return False


def _with_skills_hook(hooks: dict) -> dict:
    """A template that lists its context hooks loads Hub skills only when it lists `skills`."""
    entries = (hooks or {}).get("assemble_context")
    if not isinstance(entries, list):
        return hooks or {}
    if any(isinstance(e, dict) and e.get("name") == "skills" for e in entries):
        return hooks
    return {**hooks, "assemble_context": [*entries, {"name": "skills"}]}


def _usable(organization_id: int, package: SkillPackage) -> bool:
    return (
        package.organization_id == organization_id
        or package.visibility == SkillPackage.Visibility.INSTANCE
    )


def template_skill_install(
    *,
    actor: Actor,
    package: SkillPackage,
    template: AgentTemplate,
    version: SkillVersion | None = None,
    override_gate: str = "",
    respect_pins: bool = False,
) -> dict:
    """Install a published skill into a template and roll it out: the template's next version
    references it (`^<version>`, policy auto) and every running deployment of the version it
    replaces moves onto it; where the template already asks for a range that selects the
    version, its agents' installs move to it instead. Needs `template.manage` on the template
    and `deployment.manage`. Conflict `already_installed` when every agent of the template
    already has it; the template's publish gates apply (`override_gate` as for a publish)."""
    if template.organization_id != actor.organization.pk or not _usable(
        actor.organization.pk, package
    ):
        raise NotFound(gettext("No such template."), code="template_not_found")
    actor.require("template.manage", template)
    actor.require("deployment.manage")
    if template.is_archived:
        raise Conflict(
            gettext("“%(template)s” is archived.") % {"template": template.name},
            code="template_archived",
        )
    target = version or resolve_version(package, "latest")
    if target.package_id != package.pk or target.status != SkillVersion.Status.PUBLISHED:
        raise Conflict(
            gettext("%(target)s is not a published version.") % {"target": target},
            code="not_installable",
        )
    if target.yanked:
        raise Conflict(
            gettext("%(target)s was yanked.") % {"target": target}, code="not_installable"
        )
    with transaction.atomic():
        # one install into a template at a time (a second click waits, then finds it done)
        template = AgentTemplate.objects.select_for_update().get(pk=template.pk)
        current = template.published_version
        if current is None:
            raise Conflict(
                gettext("The template has no published version yet."), code="not_published"
            )
        skills = list(current.skills or [])
        index = _reference_index(skills, package)
        entry = skills[index] if index is not None else None
        if entry is not None and respect_pins and entry.get("policy") == "pinned":
            raise Conflict(
                gettext("“%(template)s” pins %(package)s; a person decides to move it.")
                % {"template": template.name, "package": package.full_name},
                code="pinned",
            )
        published, rollouts, left, moved = None, [], [], []
        if entry is None or not _reference_selects(entry, target):
            reference = {"package": package.full_name, "range": f"^{target.version}"}
            reference["policy"] = (entry or {}).get("policy", SkillInstall.Policy.AUTO)
            if reference["policy"] == SkillInstall.Policy.PINNED:
                reference["range"] = target.version
            if index is None:
                skills.append(reference)
            else:
                skills[index] = reference
            published = agent_services.version_revise(
                actor=actor,
                template=template,
                change_note=f"Installs the approved skill {package.full_name} {target.version}.",
                override_gate=override_gate,
                skills=skills,
                hooks=_with_skills_hook(current.hooks),
            )
            rollouts, left = agent_services.template_rollout(
                actor=actor, from_version=current, to_version=published
            )
        else:
            installs = (
                SkillInstall.objects.select_for_update(of=("self",))
                .filter(package=package, agent__deployment__template=template)
                .exclude(version=target)
                .select_related("version", "pending_version", "package__namespace", "agent")
            )
            for install in installs:
                if _newer(target, install.version):
                    moved.append(
                        _move(
                            actor,
                            install,
                            SkillInstallEvent.Action.APPLY,
                            target,
                            "installed into the template",
                        )
                    )
            if not moved:
                raise Conflict(
                    gettext("“%(template)s” already runs %(package)s %(version)s or newer.")
                    % {
                        "template": template.name,
                        "package": package.full_name,
                        "version": target.version,
                    },
                    code="already_installed",
                )
        live = (
            SkillInstall.objects.filter(
                package=package, agent__deployment__template=template, version=target
            )
            .values("agent")
            .count()
        )
        result = {
            "template": template.pk,
            "template_name": template.name,
            "package": package.full_name,
            "version": target.version,
            "template_version": published.number if published else current.number,
            "new_template_version": published is not None,
            "rollouts": [rollout.pk for rollout in rollouts],
            "deployments_left": [deployment.pk for deployment in left],
            "agents": live,
        }
        audit.record(
            actor=actor,
            action="hub.template_install",
            target=("skillpackage", package.pk, package.full_name),
            changes={**result, "installs_moved": len(moved)},
        )
        package_id, template_id, version_id = package.pk, template.pk, target.pk
        transaction.on_commit(lambda: skill_live_notify(package_id, template_id, version_id))
    return result


def approved_skill_reach(*, version_id: int) -> list[dict]:
    """After a version's publication commits: when the organization installs approved skills
    automatically, install it into each template whose agents taught it; a template its gates
    (or an open draft) hold keeps the offer, and the hold is audited."""
    version = (
        SkillVersion.objects.select_related("package__namespace", "package__organization")
        .filter(pk=version_id, status=SkillVersion.Status.PUBLISHED, yanked=False)
        .first()
    )
    if version is None or version.package.organization_id is None:
        return []
    package = version.package
    organization = Organization.objects.get(pk=package.organization_id)
    taught = sorted({o["template"] for o in origins_of(package) if o["version"] == version.pk})
    if not taught or organization.approved_skills != Organization.ApprovedSkills.AUTOMATIC:
        return []
    actor = system_actor(organization, label="approved skills")
    done = []
    templates = AgentTemplate.objects.filter(
        pk__in=taught, organization=organization, is_archived=False
    )
    for template in templates.order_by("pk"):
        try:
            done.append(
                template_skill_install(
                    actor=actor,
                    package=package,
                    template=template,
                    version=version,
                    respect_pins=True,
                )
            )
        except CadreError as error:
            if error.code == "already_installed":
                continue
            audit.record(
                actor=actor,
                action="hub.template_install.held",
                target=("skillpackage", package.pk, package.full_name),
                changes={"template": template.pk, "version": version.version, "code": error.code},
                reason=error.message,
            )
            done.append({"template": template.pk, "held": error.code, "reason": error.message})
    return done


def skill_live_notify(package_id: int, template_id: int, version_id: int) -> int:
    """Tell each person who taught the skill to this template that agents run it now (once per
    lesson and template); returns the notices sent."""
    package = SkillPackage.objects.select_related("namespace").filter(pk=package_id).first()
    version = SkillVersion.objects.filter(pk=version_id).first()
    template = AgentTemplate.objects.filter(pk=template_id).first()
    if package is None or version is None or template is None:
        return 0
    taught = SkillVersion.objects.in_bulk(
        [o["version"] for o in origins_of(package) if o["template"] == template_id]
    )
    lessons = [
        origin
        for origin in origins_of(package)
        if origin["template"] == template_id
        and origin["version"] in taught
        and not _newer(taught[origin["version"]], version)  # the lesson is in this version
    ]
    if not lessons:
        return 0
    agents_live = SkillInstall.objects.filter(
        package=package, agent__deployment__template=template, version=version
    ).count()
    members = Member.objects.in_bulk({origin["member"] for origin in lessons})
    url = reverse("console:hub_package", args=[package.namespace.handle, package.name])
    sent = 0
    for origin in lessons:
        member = members.get(origin["member"])
        if member is None:
            continue
        notice = notice_send(
            member=member,
            kind=LIVE_NOTICE,
            key=f"{LIVE_NOTICE}:{origin['proposal']}:{template_id}",
            title=gettext_lazy("Your skill %(skill)s is live"),
            body=ngettext_lazy(
                "A reviewer approved what you taught, and %(count)d “%(template)s” agent now "
                "runs %(package)s %(version)s.",
                "A reviewer approved what you taught, and %(count)d “%(template)s” agents now "
                "run %(package)s %(version)s.",
                "count",
            ),
            url=url,
            params={
                "skill": package.name,
                "count": agents_live,
                "template": template.name,
                "package": package.full_name,
                "version": version.version,
            },
        )
        sent += notice is not None
    return sent


def package_templates(actor: Actor, package: SkillPackage) -> list[dict]:
    """The templates the actor may see that reference the package (with how many of their
    agents run it) or taught it, each with whether the actor may install it there in one
    click: `{"template", "version", "reference", "agents", "taught", "offer", "can_install"}`."""
    if not actor.may("template.view"):
        return []
    visible = AgentTemplate.objects.restrict(actor, "view").filter(is_archived=False)
    taught = {o["template"] for o in origins_of(package)}
    names = [package.full_name, package.full_name.lstrip("@")]
    referencing = visible.filter(
        Q(versions__status="published", versions__skills__contains=[{"package": names[0]}])
        | Q(versions__status="published", versions__skills__contains=[{"package": names[1]}])
        | Q(pk__in=taught)
    ).distinct()
    may_roll_out = actor.has("deployment.manage")
    counts = dict(
        SkillInstall.objects.filter(package=package, agent__deployment__template__in=referencing)
        .values_list("agent__deployment__template")
        .annotate(n=Count("pk"))
        .values_list("agent__deployment__template", "n")
    )
    try:
        latest = resolve_version(package, "latest")
    except (NotFound, InvalidInput):
        latest = None
    rows = []
    for template in referencing.order_by("name"):
        current = template.published_version
        skills = list(current.skills or []) if current else []
        index = _reference_index(skills, package)
        reference = skills[index] if index is not None else None
        offer = (
            latest is not None
            and current is not None
            and (reference is None or not _reference_selects(reference, latest))
        )
        rows.append(
            {
                "template": template,
                "version": current,
                "reference": normalize_reference(reference) if reference else None,
                "agents": counts.get(template.pk, 0),
                "taught": template.pk in taught,
                "offer": offer,
                "can_install": offer and may_roll_out and actor.can("template.manage", template),
            }
        )
    return rows
