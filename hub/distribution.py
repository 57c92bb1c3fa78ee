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
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from cadre.agents.models import Agent
from cadre.errors import Conflict, InvalidInput, NotFound
from cadre.governance import audit
from cadre.tenancy.actors import Actor, system_actor
from hub.models import (
    DistTag,
    SkillInstall,
    SkillInstallEvent,
    SkillPackage,
    SkillVersion,
)
from hub.selectors import resolve_version
from hub.versions import is_version, parse_range, parse_version, sort_key

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
            f"{package}: update policy must be one of {', '.join(POLICIES)}.",
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
        raise NotFound("No such skill install.")
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
        raise Conflict("No update is waiting for this install.", code="no_pending_update")
    if pending.status != SkillVersion.Status.PUBLISHED or pending.yanked:
        raise Conflict(f"{pending} is no longer installable.", code="not_installable")
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
        raise Conflict("This install has no previous version.", code="no_previous_version")
    if target.status != SkillVersion.Status.PUBLISHED:
        raise Conflict(f"{target} is no longer published.", code="not_installable")
    return _move(actor, install, SkillInstallEvent.Action.ROLLBACK, target, reason or "rolled back")
