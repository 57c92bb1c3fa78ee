"""Write paths for role templates, provider settings, deployments, rollouts and agents.

The runtime's write paths (runs, waits, triggers) live in `cadre.agents.runtime.lifecycle`.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable
from functools import cache
from pathlib import Path

import yaml
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import get_language, gettext_lazy
from django.utils.translation import gettext as _

from cadre.agents.evaluation.gates import check_model_change, check_publish
from cadre.agents.hooks.registry import hook_names
from cadre.agents.mcp_tools import check_permission_names, split_name
from cadre.agents.models import (
    HOOK_POINTS,
    Agent,
    AgentTemplate,
    Deployment,
    Rollout,
    Run,
    TemplateVersion,
)
from cadre.agents.placeholders import render_placeholders
from cadre.agents.providers import PROVIDER_KINDS
from cadre.agents.providers import provider_config_create as provider_config_create
from cadre.agents.runtime.steps.context import ORDERS as CONTEXT_ORDERS
from cadre.agents.tools.registry import tool_names
from cadre.errors import Conflict, InvalidInput, NotPermitted
from cadre.governance import audit
from cadre.memory.models import Kind
from cadre.ports import Listeners
from cadre.tenancy.actors import Actor
from cadre.tenancy.languages import organization_language
from cadre.tenancy.models import Department, Member, Position, department_subtree_ids

PRESETS_DIR = Path(__file__).resolve().parent / "presets"
RISK_LEVELS = ("low", "medium", "high")
CONFIRMATION_POLICIES = ("never", "high_risk", "always")
MEMORY_SCOPES = ("agent", "user", "position", "department", "organization")

# Told `agent_ids=[...]` in the transaction that gives agents their template version (a
# deployment's agents are created or synced, a rollout moves agents to another version), so
# what follows the version comes along: hub registers installing the version's skills.
AGENTS_PROVISIONED: Listeners[Callable[..., object]] = Listeners("agents provisioned")


def _same_org(actor: Actor, *objects) -> None:
    for obj in objects:
        if obj is not None and obj.organization_id != actor.organization.pk:
            raise InvalidInput(_("That object does not exist."), code="not_found")


# --- presets --------------------------------------------------------------------------------


def presets(language: str | None = None) -> dict[str, dict]:
    """The built-in presets, by key, read from agents/presets/*.yaml; in another language
    (`language`, else the active one: "zh-hans"), with the texts of
    agents/presets/<language>/<key>.yaml (name, description, SOP, AGENT.md, USER.md) in place
    of the English ones (tools and settings are shared)."""
    language = (language or get_language() or "en").lower()
    return _presets("zh-hans" if language.startswith("zh") else "en")


@cache
def _presets(language: str) -> dict[str, dict]:
    found = {}
    for path in sorted(PRESETS_DIR.glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        found[data["key"]] = data
    translated = PRESETS_DIR / language.replace("-", "_")
    if language != "en" and translated.is_dir():
        for path in sorted(translated.glob("*.yaml")):
            texts = yaml.safe_load(path.read_text(encoding="utf-8"))
            if texts.get("key") in found:
                found[texts["key"]] = {**found[texts["key"]], **texts}
    return found


# --- template content validation ------------------------------------------------------------


def validate_content(content: dict, organization_id: int | None = None) -> dict:
    """Check the structured fields of a template version; return them normalized. Tool
    permissions may name MCP tools (`mcp__<server>__<tool>`, `mcp__<server>__*`); given the
    organization, their servers must be registered."""
    errors: dict[str, str] = {}
    settings = content.get("model_settings")
    if settings is not None:
        if not isinstance(settings, dict):
            errors["model_settings"] = "must be an object"
        elif settings.get("provider", "offline") not in PROVIDER_KINDS:
            errors["model_settings"] = f"provider must be one of {', '.join(PROVIDER_KINDS)}"
        elif not isinstance(settings.get("budget", {}), dict):
            errors["model_settings"] = "budget must be an object"
        elif settings.get("context_order", "stable") not in CONTEXT_ORDERS:
            errors["model_settings"] = f"context_order must be one of {', '.join(CONTEXT_ORDERS)}"
        elif not isinstance(settings.get("warm_prompt_cache", False), bool):
            errors["model_settings"] = "warm_prompt_cache must be true or false"
    skills = content.get("skills")
    well_formed = isinstance(skills, list) and all(
        isinstance(s, dict)
        and s.get("package")
        and (s.get("range") or s.get("tag"))
        and s.get("policy", "auto") in ("auto", "manual", "pinned")  # hub update policies
        for s in skills
    )
    if skills is not None and not well_formed:
        errors["skills"] = (
            'each skill needs "package" and a "range" or a "tag"; '
            '"policy" is auto, manual or pinned'
        )
    tools = content.get("tool_permissions")
    if tools is not None:
        known = tool_names()
        if not isinstance(tools, dict):
            errors["tool_permissions"] = "must be an object keyed by tool name"
        else:
            for name, rule in tools.items():
                if name not in known and split_name(name) is None:
                    errors["tool_permissions"] = f"unknown tool {name!r}"
                elif name not in known and (
                    problem := check_permission_names(organization_id, [name])
                ):
                    errors["tool_permissions"] = problem
                elif not isinstance(rule, dict) or rule.get("risk", "low") not in RISK_LEVELS:
                    errors["tool_permissions"] = f"{name}: risk must be one of {RISK_LEVELS}"
                elif rule.get("confirmation", "never") not in CONFIRMATION_POLICIES:
                    errors["tool_permissions"] = (
                        f"{name}: confirmation must be one of {CONFIRMATION_POLICIES}"
                    )
    policy = content.get("memory_policy")
    if policy is not None:
        if not isinstance(policy, dict):
            errors["memory_policy"] = "must be an object"
        else:
            for key in ("read_scopes", "write_scopes"):
                bad = [s for s in policy.get(key, []) if s not in MEMORY_SCOPES]
                if bad:
                    errors["memory_policy"] = f"{key}: unknown scope {bad[0]!r}"
            retention = policy.get("retention_days")
            if retention is not None and (
                not isinstance(retention, int) or isinstance(retention, bool) or retention < 1
            ):
                errors["memory_policy"] = (
                    "retention_days: a whole number of days, 1 or more (or null)"
                )
            kinds = policy.get("retrieve_kinds")
            if kinds is not None and (
                not isinstance(kinds, list) or any(kind not in Kind.values for kind in kinds)
            ):
                errors["memory_policy"] = (
                    f"retrieve_kinds: a list of memory kinds ({', '.join(Kind.values)})"
                )
    hooks = content.get("hooks")
    if isinstance(hooks, dict):
        hooks = content["hooks"] = _without_input_gate(hooks)
    if hooks is not None:
        if not isinstance(hooks, dict):
            errors["hooks"] = "must be an object keyed by hook point"
        else:
            for point, entries in hooks.items():
                if point not in HOOK_POINTS:
                    errors["hooks"] = f"unknown hook point {point!r}"
                    break
                names = hook_names(point)
                for entry in entries or []:
                    if not isinstance(entry, dict) or entry.get("name") not in names:
                        errors["hooks"] = f"{point}: unknown hook {entry!r}"
                        break
    positions = content.get("target_positions")
    if positions is not None and not (
        isinstance(positions, list) and all(isinstance(p, str) for p in positions)
    ):
        errors["target_positions"] = "must be a list of position codes"
    if errors:
        raise InvalidInput(next(iter(errors.values())), details=errors)
    return content


def _without_input_gate(hooks: dict) -> dict:
    """`hooks` without `on_init` entries naming `input_policy`: the organization's input policy
    is not a hook the template chooses (the runtime always runs it), so an entry asking for it
    is dropped, and one switching it off is refused — a template can only add policy."""
    entries = hooks.get("on_init")
    if not isinstance(entries, list):
        return hooks
    kept = []
    for entry in entries:
        if isinstance(entry, dict) and entry.get("name") == "input_policy":
            if entry.get("enabled", True) is not True:
                raise InvalidInput(
                    _(
                        "The organization's input policy (masking, injection checks) runs for "
                        "every agent; a template cannot switch it off. Remove the input_policy "
                        "entry (a template adds policy through its policy chain)."
                    ),
                    code="policy_weakening",
                    details={"hooks": "on_init: input_policy cannot be disabled"},
                )
            continue
        kept.append(entry)
    return {**hooks, "on_init": kept}


def _content_from(fields: dict) -> dict:
    unknown = set(fields) - set(TemplateVersion.CONTENT_FIELDS) - {"change_note"}
    if unknown:
        raise InvalidInput(_("Unknown template field %(value)r.") % {"value": sorted(unknown)[0]})
    return validate_content(dict(fields))


# --- templates and versions -----------------------------------------------------------------


@transaction.atomic
def template_create(
    *,
    actor: Actor,
    name: str,
    code: str,
    description: str = "",
    preset: str = "",
    **content,
) -> AgentTemplate:
    """A new template with its first draft version (from a preset, then `content` on top)."""
    actor.require("template.manage")
    base: dict = {}
    if preset:
        # In the organization's language: a Chinese organization's templates start in Chinese.
        data = presets(organization_language(actor.organization)).get(preset)
        if data is None:
            raise InvalidInput(
                _("Unknown preset %(preset)r.") % {"preset": preset}, code="unknown_preset"
            )
        # The preset's content, not its name: the template's versions are named after it.
        base = {key: data[key] for key in TemplateVersion.CONTENT_FIELDS if key in data}
        base.pop("name", None)
    base.update(content)
    base["name"] = base.get("name") or name
    fields = _content_from(base)
    template = AgentTemplate(
        organization=actor.organization,
        name=name,
        code=code,
        description=description,
        preset=preset,
        created_by=actor.member,
    )
    try:
        with transaction.atomic():
            template.save()
    except IntegrityError:
        raise Conflict(
            _("A template with this code already exists."),
            code="duplicate",
            details={"code": "already used"},
        ) from None
    version = TemplateVersion(
        organization=actor.organization,
        template=template,
        number=1,
        created_by=actor.member,
        **fields,
    )
    version.save()
    audit.record(
        actor=actor,
        action="template.create",
        target=template,
        after={"name": name, "code": code, "preset": preset},
    )
    return template


@transaction.atomic
def version_draft(
    *, actor: Actor, template: AgentTemplate, from_version: TemplateVersion | None = None
) -> TemplateVersion:
    """A new draft copying `from_version` (default: the newest version)."""
    actor.require("template.manage", template)
    template = AgentTemplate.objects.select_for_update().get(pk=template.pk)
    if template.versions.exclude(status=TemplateVersion.Status.PUBLISHED).exists():
        raise Conflict(_("This template already has an open draft."), code="draft_exists")
    source = from_version or template.versions.order_by("-number").first()
    if source is not None and source.template_id != template.pk:
        raise InvalidInput(_("That version belongs to another template."))
    number = (
        template.versions.order_by("-number").values_list("number", flat=True).first() or 0
    ) + 1
    version = TemplateVersion(
        organization=template.organization,
        template=template,
        number=number,
        created_by=actor.member,
        policy_chain_id=source.policy_chain_id if source else None,
        **(source.content() if source else {"name": template.name}),
    )
    version.save()
    audit.record(
        actor=actor,
        action="template.version_draft",
        target=version,
        after={"number": number, "from": source.number if source else None},
    )
    return version


@transaction.atomic
def version_update(*, actor: Actor, version: TemplateVersion, **fields) -> TemplateVersion:
    actor.require("template.manage", version)
    version = TemplateVersion.objects.select_for_update().get(pk=version.pk)
    if version.status != TemplateVersion.Status.DRAFT:
        raise Conflict(
            _("Only a draft can be edited (withdraw it from review first)."), code="not_draft"
        )
    fields = _content_from(fields)
    before = {key: getattr(version, key) for key in fields}
    for key, value in fields.items():
        setattr(version, key, value)
    version.updated_at = timezone.now()
    version.save(update_fields=[*fields, "updated_at"])
    audit.record(
        actor=actor,
        action="template.version_update",
        target=version,
        before=before,
        after={key: getattr(version, key) for key in fields},
    )
    return version


# The verb of "A draft version cannot be <verb>." in the reader's language (the English keeps
# the action's name, as before).
_TRANSITION_VERBS = {
    "submit": gettext_lazy("submit"),
    "withdraw": gettext_lazy("withdraw"),
    "publish": gettext_lazy("publish"),
}


def _transition(actor, version, allowed_from, to, action, reason="") -> TemplateVersion:
    actor.require("template.manage", version)
    version = TemplateVersion.objects.select_for_update().get(pk=version.pk)
    if version.status not in allowed_from:
        raise Conflict(
            _("A %(lower)s version cannot be %(action)s.")
            % {
                "lower": version.get_status_display().lower(),
                "action": _TRANSITION_VERBS.get(action, action),
            },
            code="bad_status",
        )
    before = {"status": version.status}
    now = timezone.now()
    version.status = to
    update = ["status", "updated_at"]
    version.updated_at = now
    if to == TemplateVersion.Status.IN_REVIEW:
        version.submitted_at = now
        update.append("submitted_at")
    if to == TemplateVersion.Status.PUBLISHED:
        version.published_at = now
        version.published_by = actor.member
        update += ["published_at", "published_by"]
    version.save(update_fields=update)
    audit.record(
        actor=actor,
        action=f"template.{action}",
        target=version,
        before=before,
        after={"status": version.status},
        reason=reason,
    )
    return version


@transaction.atomic
def version_submit(*, actor: Actor, version: TemplateVersion) -> TemplateVersion:
    return _transition(
        actor, version, {TemplateVersion.Status.DRAFT}, TemplateVersion.Status.IN_REVIEW, "submit"
    )


@transaction.atomic
def version_withdraw(
    *, actor: Actor, version: TemplateVersion, reason: str = ""
) -> TemplateVersion:
    return _transition(
        actor,
        version,
        {TemplateVersion.Status.IN_REVIEW},
        TemplateVersion.Status.DRAFT,
        "withdraw",
        reason,
    )


@transaction.atomic
def version_publish(
    *, actor: Actor, version: TemplateVersion, reason: str = "", override_gate: str = ""
) -> TemplateVersion:
    """Publish a reviewed version: from now on it is immutable and can be deployed. Where the
    organization requires it, its newest replay must pass — and, when it changes the template's
    model, the newest replay of that model change — or `override_gate` says why not (audited
    per gate; see evaluation.gates)."""
    validate_content(version.content(), version.organization_id)
    check_publish(actor=actor, version=version, override_reason=override_gate)
    check_model_change(actor=actor, version=version, override_reason=override_gate)
    version = _transition(
        actor,
        version,
        {TemplateVersion.Status.IN_REVIEW},
        TemplateVersion.Status.PUBLISHED,
        "publish",
        reason,
    )
    AgentTemplate.objects.filter(pk=version.template_id).update(updated_at=timezone.now())
    return version


@transaction.atomic
def version_revise(
    *,
    actor: Actor,
    template: AgentTemplate,
    change_note: str,
    override_gate: str = "",
    **fields,
) -> TemplateVersion:
    """The template's published version with `fields` changed, as its next version: drafted,
    submitted and published the way a person would (the same checks and evaluation gates,
    each step audited). Conflict `draft_exists` while someone edits a draft of the template,
    `not_published` before it has a published version; a gate's refusal undoes it all."""
    current = template.published_version
    if current is None:
        raise Conflict(_("The template has no published version yet."), code="not_published")
    version = version_draft(actor=actor, template=template, from_version=current)
    version = version_update(actor=actor, version=version, **fields)
    version.change_note = change_note[:2000]
    version.save(update_fields=["change_note"])
    version = version_submit(actor=actor, version=version)
    return version_publish(
        actor=actor, version=version, reason=change_note, override_gate=override_gate
    )


def template_rollout(
    *, actor: Actor, from_version: TemplateVersion, to_version: TemplateVersion
) -> tuple[list[Rollout], list[Deployment]]:
    """Roll every running deployment of `from_version` onto `to_version`, all at once:
    (the rollouts, the deployments left where they are — a rollout already in progress)."""
    rollouts, left = [], []
    deployments = Deployment.objects.filter(
        template_id=to_version.template_id, version=from_version
    ).exclude(status=Deployment.Status.STOPPED)
    for deployment in deployments.order_by("pk"):
        if deployment.rollouts.filter(status=Rollout.Status.IN_PROGRESS).exists():
            left.append(deployment)
            continue
        rollouts.append(rollout_start(actor=actor, deployment=deployment, version=to_version))
    return rollouts, left


def field_text(value) -> str:
    """A template version's content field as text (JSON fields pretty-printed, keys sorted), as
    its diff compares it."""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)


def version_diff(a: TemplateVersion, b: TemplateVersion) -> dict[str, str]:
    """Unified diff per changed content field, from `a` to `b` (same template)."""
    if a.template_id != b.template_id:
        raise InvalidInput(_("Both versions must belong to the same template."))
    changes = {}
    for name in TemplateVersion.CONTENT_FIELDS:
        old, new = field_text(getattr(a, name)), field_text(getattr(b, name))
        if old == new:
            continue
        lines = difflib.unified_diff(
            old.splitlines(keepends=True),
            new.splitlines(keepends=True),
            fromfile=f"v{a.number}/{name}",
            tofile=f"v{b.number}/{name}",
        )
        changes[name] = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    return changes


# --- deployments ----------------------------------------------------------------------------


def deployment_members(deployment: Deployment):
    """Active members the deployment targets: its positions, departments (with sub-departments)
    and members."""
    department_ids = {d.pk for d in deployment.departments.all()}
    condition = Q(pk__in=[m.pk for m in deployment.members.all()])
    condition |= Q(positions__in=[p.pk for p in deployment.positions.all()])
    if department_ids:
        subtree = department_subtree_ids(deployment.organization_id, department_ids)
        condition |= Q(department_id__in=subtree)
    return (
        Member.objects.filter(
            organization_id=deployment.organization_id, status=Member.Status.ACTIVE
        )
        .filter(condition)
        .distinct()
    )


def _agents_for(deployment: Deployment, version: TemplateVersion) -> list[Agent]:
    existing = set(deployment.agents.values_list("member_id", flat=True))
    members = (
        deployment_members(deployment)
        .exclude(pk__in=existing)
        .select_related("department", "organization")
        .prefetch_related("positions")
    )
    agents = [
        Agent(
            organization_id=deployment.organization_id,
            deployment=deployment,
            member=member,
            version=version,
            name=f"{version.name} · {member.display_name}",
            user_md=render_placeholders(version.user_md_template, member),
        )
        for member in members
    ]
    Agent.objects.bulk_create(agents, ignore_conflicts=True)
    AGENTS_PROVISIONED.notify(agent_ids=list(deployment.agents.values_list("pk", flat=True)))
    return agents


@transaction.atomic
def deployment_create(
    *,
    actor: Actor,
    name: str,
    template: AgentTemplate,
    version: TemplateVersion | None = None,
    positions: list[Position] = (),
    departments: list[Department] = (),
    members: list[Member] = (),
    channels: list[str] = ("console",),
) -> Deployment:
    """Send a published version to its targets: each targeted member gets an Agent."""
    actor.require("deployment.manage")
    _same_org(actor, template, version, *positions, *departments, *members)
    version = version or template.published_version
    if version is None or version.status != TemplateVersion.Status.PUBLISHED:
        raise Conflict(
            _("Only a published template version can be deployed."), code="not_published"
        )
    if version.template_id != template.pk:
        raise InvalidInput(_("That version belongs to another template."))
    if not (positions or departments or members):
        raise InvalidInput(_("Choose at least one position, department or member."))
    deployment = Deployment.objects.create(
        organization=actor.organization,
        name=name,
        template=template,
        version=version,
        channels=list(channels),
        created_by=actor.member,
    )
    deployment.positions.set(positions)
    deployment.departments.set(departments)
    deployment.members.set(members)
    created = _agents_for(deployment, version)
    audit.record(
        actor=actor,
        action="deployment.create",
        target=deployment,
        after={
            "template": template.pk,
            "version": version.number,
            "channels": list(channels),
            "positions": [p.pk for p in positions],
            "departments": [d.pk for d in departments],
            "members": [m.pk for m in members],
            "agents_created": len(created),
        },
    )
    return deployment


@transaction.atomic
def deployment_sync(*, actor: Actor, deployment: Deployment) -> list[Agent]:
    """Give agents to members who became targets since dispatch (new hires, moves)."""
    actor.require("deployment.manage", deployment)
    if deployment.status == Deployment.Status.STOPPED:
        raise Conflict(_("The deployment is stopped."), code="stopped")
    created = _agents_for(deployment, deployment.version)
    if created:
        audit.record(
            actor=actor,
            action="deployment.sync",
            target=deployment,
            after={"agents_created": len(created)},
        )
    return created


def _cancel_open_runs(agents_filter: Q, reason: str) -> int:
    now = timezone.now()
    return (
        Run.objects.filter(agents_filter)
        .exclude(status__in=Run.TERMINAL)
        .update(status=Run.Status.CANCELLED, error=reason, finished_at=now)
    )


@transaction.atomic
def deployment_stop(*, actor: Actor, deployment: Deployment, reason: str = "") -> Deployment:
    actor.require("deployment.manage", deployment)
    deployment = Deployment.objects.select_for_update().get(pk=deployment.pk)
    if deployment.status == Deployment.Status.STOPPED:
        raise Conflict(_("The deployment is already stopped."), code="stopped")
    before = {"status": deployment.status}
    deployment.status = Deployment.Status.STOPPED
    deployment.updated_at = timezone.now()
    deployment.save(update_fields=["status", "updated_at"])
    deployment.agents.filter(status=Agent.Status.ACTIVE).update(
        status=Agent.Status.STOPPED, stopped_at=timezone.now(), stop_reason="deployment stopped"
    )
    _cancel_open_runs(Q(agent__deployment=deployment), "deployment stopped")
    audit.record(
        actor=actor,
        action="deployment.stop",
        target=deployment,
        before=before,
        after={"status": deployment.status},
        reason=reason,
    )
    return deployment


# --- rollouts -------------------------------------------------------------------------------


def _set_version(agents, version: TemplateVersion) -> int:
    ids = list(agents.values_list("pk", flat=True))
    moved = Agent.objects.filter(pk__in=ids).update(version=version)
    AGENTS_PROVISIONED.notify(agent_ids=ids)
    return moved


@transaction.atomic
def rollout_start(
    *,
    actor: Actor,
    deployment: Deployment,
    version: TemplateVersion,
    strategy: str = "all",
) -> Rollout:
    """Move the deployment's agents to `version`: at once, or department by department
    (the first department now, the next ones with `rollout_advance`)."""
    actor.require("deployment.manage", deployment)
    deployment = Deployment.objects.select_for_update().get(pk=deployment.pk)
    if version.template_id != deployment.template_id:
        raise InvalidInput(_("That version belongs to another template."))
    if version.status != TemplateVersion.Status.PUBLISHED:
        raise Conflict(_("Only a published version can be rolled out."), code="not_published")
    if deployment.status == Deployment.Status.STOPPED:
        raise Conflict(_("The deployment is stopped."), code="stopped")
    if deployment.rollouts.filter(status=Rollout.Status.IN_PROGRESS).exists():
        raise Conflict(_("A rollout is already in progress."), code="rollout_in_progress")
    if version.pk == deployment.version_id:
        raise Conflict(_("The deployment already runs this version."), code="same_version")
    if strategy not in Rollout.Strategy.values:
        raise InvalidInput(
            _("strategy must be one of %(value)s.") % {"value": ", ".join(Rollout.Strategy.values)}
        )
    rollout = Rollout(
        organization=deployment.organization,
        deployment=deployment,
        from_version=deployment.version,
        to_version=version,
        strategy=strategy,
        created_by=actor.member,
    )
    if strategy == Rollout.Strategy.BY_DEPARTMENT:
        ids = set(deployment.agents.values_list("member__department_id", flat=True))
        names = dict(Department.objects.filter(pk__in=ids - {None}).values_list("pk", "name"))
        rollout.department_order = sorted(
            ids, key=lambda pk: (pk is None, names.get(pk, ""), pk or 0)
        )
    rollout.save()
    audit.record(
        actor=actor,
        action="deployment.rollout_start",
        target=deployment,
        after={
            "rollout": rollout.pk,
            "from": rollout.from_version.number,
            "to": version.number,
            "strategy": strategy,
        },
    )
    return _rollout_step(actor, rollout, deployment)


def _rollout_step(actor: Actor, rollout: Rollout, deployment: Deployment) -> Rollout:
    agents = deployment.agents.all()
    if rollout.strategy == Rollout.Strategy.ALL_AT_ONCE:
        moved = _set_version(agents, rollout.to_version)
        done = True
        detail = {"agents": moved}
    else:
        department_id = rollout.department_order[rollout.next_index]
        moved = _set_version(agents.filter(member__department_id=department_id), rollout.to_version)
        rollout.next_index += 1
        done = rollout.next_index >= len(rollout.department_order)
        detail = {"department": department_id, "agents": moved}
    if done:
        rollout.status = Rollout.Status.COMPLETED
        rollout.finished_at = timezone.now()
        deployment.version = rollout.to_version
        deployment.status = Deployment.Status.ACTIVE
    else:
        deployment.status = Deployment.Status.ROLLING_OUT
    rollout.save(update_fields=["next_index", "status", "finished_at"])
    deployment.updated_at = timezone.now()
    deployment.save(update_fields=["version", "status", "updated_at"])
    audit.record(
        actor=actor,
        action="deployment.rollout_step",
        target=deployment,
        changes={"rollout": rollout.pk, **detail, "status": rollout.status},
    )
    return rollout


@transaction.atomic
def rollout_advance(*, actor: Actor, rollout: Rollout) -> Rollout:
    """Roll the next department onto the new version."""
    actor.require("deployment.manage", rollout.deployment)
    rollout = Rollout.objects.select_for_update().get(pk=rollout.pk)
    if rollout.status != Rollout.Status.IN_PROGRESS:
        raise Conflict(_("This rollout is not in progress."), code="bad_status")
    deployment = Deployment.objects.select_for_update().get(pk=rollout.deployment_id)
    return _rollout_step(actor, rollout, deployment)


@transaction.atomic
def rollout_rollback(*, actor: Actor, rollout: Rollout, reason: str = "") -> Rollout:
    """Put every agent the rollout moved back on the previous version."""
    actor.require("deployment.manage", rollout.deployment)
    rollout = Rollout.objects.select_for_update().get(pk=rollout.pk)
    if rollout.status == Rollout.Status.ROLLED_BACK:
        raise Conflict(_("This rollout was already rolled back."), code="bad_status")
    deployment = Deployment.objects.select_for_update().get(pk=rollout.deployment_id)
    if (
        deployment.rollouts.filter(created_at__gt=rollout.created_at)
        .exclude(pk=rollout.pk)
        .exists()
    ):
        raise Conflict(_("Only the latest rollout can be rolled back."), code="not_latest")
    moved = _set_version(deployment.agents.filter(version=rollout.to_version), rollout.from_version)
    rollout.status = Rollout.Status.ROLLED_BACK
    rollout.finished_at = timezone.now()
    rollout.save(update_fields=["status", "finished_at"])
    deployment.version = rollout.from_version
    deployment.status = Deployment.Status.ACTIVE
    deployment.updated_at = timezone.now()
    deployment.save(update_fields=["version", "status", "updated_at"])
    audit.record(
        actor=actor,
        action="deployment.rollback",
        target=deployment,
        changes={"rollout": rollout.pk, "agents": moved, "version": rollout.from_version.number},
        reason=reason,
    )
    return rollout


# --- agents ---------------------------------------------------------------------------------


@transaction.atomic
def agent_update_user_md(*, actor: Actor, agent: Agent, user_md: str) -> Agent:
    """The member edits what their agent knows about them (admins with deployment.manage too)."""
    own = actor.member is not None and actor.member.pk == agent.member_id and actor.has("chat.use")
    if not own:
        actor.require("deployment.manage", agent.deployment)
    if len(user_md) > 20000:
        raise InvalidInput(_("USER.md is limited to 20,000 characters."))
    before = {"user_md": agent.user_md}
    agent.user_md = user_md
    agent.save(update_fields=["user_md"])
    audit.record(
        actor=actor,
        action="agent.update_user_md",
        target=agent,
        before=before,
        after={"user_md": user_md},
    )
    return agent


@transaction.atomic
def agents_stop_for_member(
    *, actor: Actor, member: Member, reason: str = "member deactivated"
) -> int:
    """Stop every active agent of a member and cancel their unfinished runs.

    A listener of `tenancy.services.member_deactivated`, called in the deactivation's transaction.
    """
    if member.organization_id != getattr(actor.organization, "pk", None):
        raise NotPermitted(_("That member belongs to another organization."))
    now = timezone.now()
    agent_ids = list(
        Agent.objects.filter(member=member, status=Agent.Status.ACTIVE).values_list("pk", flat=True)
    )
    Agent.objects.filter(pk__in=agent_ids).update(
        status=Agent.Status.STOPPED, stopped_at=now, stop_reason=reason[:200]
    )
    cancelled = _cancel_open_runs(Q(member=member), reason)
    for agent_id in agent_ids:
        audit.record(
            actor=actor,
            action="agent.stop",
            target=("agent", agent_id),
            organization=member.organization,
            changes={"status": "stopped", "runs_cancelled": cancelled},
            reason=reason,
        )
    return len(agent_ids)
