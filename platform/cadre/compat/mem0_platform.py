"""The rest of Mem0's platform API on Cadre: entities, batches, exports and profiles, and the
project, webhook and summary calls, each served from memory's selectors and services or
refused with 501 `not_supported` (docs/integrations.md, "Every MemoryClient method")."""

from __future__ import annotations

import json

from django.core import signing
from django.db import transaction
from django.db.models import Count, Max, Min
from django.db.models.fields.json import KT
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from rest_framework.response import Response

from cadre.api.parsers import json_body_problem
from cadre.compat.mem0 import (
    ENTITIES,
    Mem0View,
    Target,
    delete_each,
    entity_text,
    json_body,
    member_for,
    memory_out,
    metadata_object,
    request_entities,
)
from cadre.errors import CadreError, InvalidInput, NotFound, NotPermitted
from cadre.identifiers import parse_pk
from cadre.memory import selectors, services
from cadre.memory.agent_scopes import agent_scopes
from cadre.memory.models import Scope, scope_key
from cadre.memory.services.common import require_modify

# Mem0's own bound on a batch; one request, one transaction.
MAX_BATCH = 1000
# An export is built while the request waits: past this many memories, narrow it.
MAX_EXPORT = 1000
MAX_EXPORT_SCHEMA = 64 * 1024
EXPORT_SALT = "cadre.compat.mem0.export"
EXPORT_MAX_AGE = 7 * 24 * 3600
# users() lists at most this many entities of each kind, newest first.
MAX_ENTITIES = 1000
ENTITY_TYPES = ("user", "agent", "app", "run")
PROFILE_STATUS = "not_enabled"


class NotSupported(CadreError):
    """A Mem0 platform call Cadre does not serve: 501, which `mem0ai` raises as a MemoryError
    carrying this message (its `detail`)."""

    code = "not_supported"
    status = 501


def _refuse(what: str, instead: str = ""):
    message = _("Cadre's Mem0-compatible API does not offer %(what)s.") % {"what": what}
    raise NotSupported(f"{message} {instead}".strip())


# --- entities ------------------------------------------------------------------------------


def entity_scope_keys(actor) -> list[str]:
    """The scopes Mem0's entities reach for this key: its creator's personal memory and that of
    the agents serving them. Shared memory (organization, department, position) belongs to no
    Mem0 entity, so users(), delete_users() and reset() never reach it."""
    member = selectors.acting_member(actor)
    keys = [scope_key(Scope.USER, member.pk)] if member is not None else []
    return keys + [agent.key for agent in selectors.owned_agent_scopes(actor)]


def _stamp(value) -> str | None:
    return value.isoformat() if value else None


class Entities(Mem0View):
    """GET /v1/entities/ (users()): the users, agents, apps and runs this key's memories
    belong to, with their counts; read through the memory gate (memory_list)."""

    def get(self, request):
        actor = self.actor
        keys = entity_scope_keys(actor)
        rows = selectors.memory_list(actor, scope_keys=keys).order_by() if keys else None
        member = selectors.acting_member(actor)
        owner = getattr(member, "email", "") or ""
        organization = str(actor.organization.slug or actor.organization.pk)
        results: list[dict] = []

        def add(kind: str, name: str, total: int, first, last):
            results.append(
                {
                    "id": f"{kind}:{name}",
                    "name": name,
                    "type": kind,
                    "total_memories": total,
                    "created_at": _stamp(first),
                    "updated_at": _stamp(last),
                    "owner": owner,
                    "organization": organization,
                    "metadata": None,
                }
            )

        if rows is None:
            return Response({"count": 0, "next": None, "previous": None, "results": []})
        stats = dict(total=Count("id"), first=Min("created_at"), last=Max("updated_at"))
        for row in rows.values("scope_key").annotate(**stats).order_by("-last")[:MAX_ENTITIES]:
            scope, _, raw_id = row["scope_key"].partition(":")
            if scope == Scope.USER:
                name = owner or raw_id
                add("user", name, row["total"], row["first"], row["last"])
            elif scope == Scope.AGENT:
                add("agent", raw_id, row["total"], row["first"], row["last"])
        apps = (
            rows.annotate(app=KT("source_ref__app_id"))
            .exclude(app=None)
            .exclude(app="")
            .values("app")
            .annotate(**stats)
            .order_by("-last")[:MAX_ENTITIES]
        )
        for row in apps:
            add("app", row["app"], row["total"], row["first"], row["last"])
        runs = (
            rows.exclude(conversation_id="")
            .values("conversation_id")
            .annotate(**stats)
            .order_by("-last")[:MAX_ENTITIES]
        )
        for row in runs:
            add("run", row["conversation_id"], row["total"], row["first"], row["last"])
        return Response({"count": len(results), "next": None, "previous": None, "results": results})


class EntityDetail(Mem0View):
    """DELETE /v2/entities/{type}/{name}/ (delete_users(), reset()): the entity's memories,
    deleted through memory's deletion services (audited); only what the key may change."""

    def delete(self, request, entity_type, entity_id):
        actor = self.actor
        name = entity_text(entity_id, "entity_id")
        if entity_type not in ENTITY_TYPES:
            raise InvalidInput(
                _("The entity type must be one of %(types)s.") % {"types": ", ".join(ENTITY_TYPES)},
                code="invalid_entity_type",
                details={"entity_type": list(ENTITY_TYPES)},
            )
        if name is None:
            raise NotFound(_("Entity not found."))
        if entity_type in ("user", "agent"):
            key = self._entity_scope(entity_type, name)
            result = services.memory_delete_by_filter(
                actor=actor, scope_keys=[key], reason=f"mem0 delete entity {entity_type}"
            )
            deleted, skipped = len(result.deleted), result.skipped
            if not deleted and skipped:
                raise NotPermitted(_("You may not change this entity's memories."))
        elif entity_type == "run":
            keys = entity_scope_keys(actor)
            deleted = 0
            if keys:
                deleted = len(
                    services.memory_delete_by_filter(
                        actor=actor,
                        scope_keys=keys,
                        conversation_id=name,
                        reason="mem0 delete entity run",
                    ).deleted
                )
        else:
            keys = entity_scope_keys(actor)
            deleted = 0
            if keys:
                rows = selectors.memory_list(actor, scope_keys=keys)
                deleted = delete_each(actor, rows.filter(source_ref__app_id=name))
        return Response({"message": _("Entity deleted successfully!"), "deleted": deleted})

    def _entity_scope(self, entity_type: str, name: str) -> str:
        """The scope a user or agent entity names, 404 unless the key may read it: another
        member's personal memory is not this key's to see, nor to learn exists."""
        if entity_type == "user":
            try:
                member = member_for(self.actor, name)
            except InvalidInput:
                raise NotFound(_("Entity not found.")) from None
            key = scope_key(Scope.USER, member.pk)
        else:
            agent_id = parse_pk(name)
            known = agent_id is not None and agent_scopes(
                self.actor.organization.pk, agent_ids=[agent_id]
            )
            if not known:  # no agent of this organization
                raise NotFound(_("Entity not found."))
            key = scope_key(Scope.AGENT, agent_id)
        if not selectors.can_read_scope(self.actor, key):
            raise NotFound(_("Entity not found."))
        return key


# --- batches -------------------------------------------------------------------------------


def _batch(data: dict) -> list[dict]:
    items = data.get("memories")
    if not isinstance(items, list) or not items:
        raise InvalidInput(
            _("memories must be a non-empty list of {memory_id, …}."),
            details={"memories": ["Required."]},
        )
    if len(items) > MAX_BATCH:
        raise InvalidInput(
            _("A batch holds at most %(limit)s memories.") % {"limit": MAX_BATCH},
            code="batch_too_large",
            details={"memories": [f"At most {MAX_BATCH}."]},
        )
    for index, item in enumerate(items):
        if not isinstance(item, dict) or "memory_id" not in item:
            raise InvalidInput(
                _("Item %(index)s of memories is not an object with a memory_id.")
                % {"index": index},
                details={"memories": [index]},
            )
    return items


def _batch_memories(actor, items: list[dict]) -> list:
    """The memories a batch names, in its order, each readable (else 404 naming the item)
    and named once; who may change them is checked by the service, item by item."""
    pks = []
    for index, item in enumerate(items):
        pk = parse_pk(item["memory_id"])
        if pk is None:
            raise NotFound(
                _("Memory not found (item %(index)s).") % {"index": index},
                details={"memories": [index]},
            )
        if pk in pks:
            raise InvalidInput(
                _("Memory %(id)s is named twice in the batch.") % {"id": pk},
                code="duplicate_memory",
                details={"memories": [index]},
            )
        pks.append(pk)
    found = {memory.pk: memory for memory in selectors.memory_queryset(actor).filter(pk__in=pks)}
    for index, pk in enumerate(pks):
        if pk not in found:
            raise NotFound(
                _("Memory not found (item %(index)s).") % {"index": index},
                details={"memories": [index]},
            )
    return [found[pk] for pk in pks]


class Batch(Mem0View):
    """PUT and DELETE /v1/batch/ (batch_update, batch_delete): up to 1,000 memories, all or
    nothing, in one transaction; each item authorized as its single call would be."""

    def put(self, request):
        items = _batch(json_body(request))
        changes = [self._changes(index, item) for index, item in enumerate(items)]
        with transaction.atomic():
            memories = _batch_memories(self.actor, items)
            for memory, change in zip(memories, changes, strict=True):
                require_modify(self.actor, memory)
                if "metadata" in change:
                    change["attributes"] = {
                        **(memory.attributes or {}),
                        "metadata": change.pop("metadata"),
                    }
                services.memory_update(
                    actor=self.actor,
                    memory=memory,
                    expected_version=memory.version,
                    reason="mem0 batch update",
                    **change,
                )
        return Response(
            {"message": _("Successfully updated %(count)s memories") % {"count": len(memories)}}
        )

    @staticmethod
    def _changes(index: int, item: dict) -> dict:
        change: dict = {}
        text = item.get("text")
        if text is not None:
            if not isinstance(text, str) or not text.strip():
                raise InvalidInput(
                    _("text of item %(index)s must be a non-empty string.") % {"index": index},
                    details={"memories": [index]},
                )
            change["content"] = text
        if item.get("metadata") is not None:
            change["metadata"] = metadata_object(item["metadata"])
        if not change:
            raise InvalidInput(
                _("Item %(index)s changes nothing: give text or metadata.") % {"index": index},
                details={"memories": [index]},
            )
        return change

    def delete(self, request):
        items = _batch(json_body(request))
        with transaction.atomic():
            memories = _batch_memories(self.actor, items)
            done: set[int] = set()
            for memory in memories:
                if memory.pk in done:  # deleted with a later item (its predecessor)
                    continue
                require_modify(self.actor, memory)
                memory = services.memory_delete(
                    actor=self.actor, memory=memory, reason="mem0 batch delete"
                )
                done.add(memory.pk)
                done.update(memory.deletion.get("predecessors", []))
        return Response(
            {"message": _("Successfully deleted %(count)s memories") % {"count": len(memories)}}
        )


# --- exports -------------------------------------------------------------------------------


def _export_schema(value) -> dict:
    """The export's JSON schema (a JSON text, as `mem0ai` sends it, or an object): checked as
    any body is (depth, NUL, lone surrogates, finite numbers), never kept."""
    if isinstance(value, str):
        if len(value) > MAX_EXPORT_SCHEMA:
            raise InvalidInput(
                _("The schema is larger than %(limit)s characters.") % {"limit": MAX_EXPORT_SCHEMA},
                code="invalid_schema",
                details={"schema": ["Size."]},
            )
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            raise InvalidInput(
                _("schema must be a JSON schema (a JSON object)."),
                code="invalid_schema",
                details={"schema": ["JSON."]},
            ) from None
    if not isinstance(value, dict):
        raise InvalidInput(
            _("schema must be a JSON schema (a JSON object)."),
            code="invalid_schema",
            details={"schema": ["Object."]},
        )
    problem = json_body_problem(value)
    if problem:
        raise InvalidInput(problem, code="invalid_schema", details={"schema": ["Content."]})
    return value


def _export_rows(actor, entities: dict) -> list:
    target = Target(actor, entities)
    rows = target.narrow(
        selectors.memory_list(
            actor, scope_keys=target.read_scope_keys(), conversation_id=entities["run_id"]
        )
    ).select_related("subject")
    if rows.count() > MAX_EXPORT:
        raise InvalidInput(
            _(
                "More than %(limit)s memories match: narrow the export with user_id, "
                "agent_id, app_id or run_id."
            )
            % {"limit": MAX_EXPORT},
            code="export_too_large",
            details={"filters": [f"At most {MAX_EXPORT} memories."]},
        )
    return list(rows)


class Exports(Mem0View):
    """POST /v1/exports/ (create_memory_export): the export is built when it is read; its id
    is a signed note of the filters and the key that asked, so no copy of the memories is kept
    and a memory deleted meanwhile is not exported."""

    read_only_methods = frozenset({"GET", "HEAD", "OPTIONS", "POST"})

    def post(self, request):
        data = json_body(request)
        _export_schema(data.get("schema"))
        entities = request_entities(data)
        count = len(_export_rows(self.actor, entities))
        key = self.actor.api_key
        export_id = signing.dumps(
            {"key": key.pk if key else None, "entities": entities},
            salt=EXPORT_SALT,
            compress=True,
        )
        return Response(
            {
                "message": _("Memory export request received. The export is ready."),
                "id": export_id,
                "status": "completed",
                "count": count,
            }
        )


class ExportGet(Mem0View):
    """POST /v1/exports/get/ (get_memory_export): by `memory_export_id`, or built now from the
    filters given; the memories in Mem0's shape, read through the memory gate."""

    read_only_methods = frozenset({"GET", "HEAD", "OPTIONS", "POST"})

    def post(self, request):
        data = json_body(request)
        export_id = data.get("memory_export_id")
        named = export_id is not None
        entities = self._entities_of(export_id) if named else request_entities(data)
        rows = _export_rows(self.actor, entities)
        return Response(
            {
                "id": export_id,
                "status": "completed",
                "count": len(rows),
                "memories": [memory_out(memory) for memory in rows],
            }
        )

    def _entities_of(self, export_id) -> dict:
        key = self.actor.api_key
        try:
            note = signing.loads(str(export_id), salt=EXPORT_SALT, max_age=EXPORT_MAX_AGE)
        except signing.BadSignature:
            note = None
        if not isinstance(note, dict) or note.get("key") != (key.pk if key else None):
            raise NotFound(_("Export not found."))
        stored = note.get("entities") or {}
        return {name: stored.get(name) for name in ENTITIES}


# --- summary and profiles ------------------------------------------------------------------


class Summary(Mem0View):
    """POST /v1/summary/ (get_summary): Cadre writes no summary of a person's memories."""

    read_only_methods = frozenset({"GET", "HEAD", "OPTIONS", "POST"})

    def post(self, request):
        Target(self.actor, request_entities(json_body(request)))
        _refuse(
            _("memory summaries"),
            _("Search or list the memories (search, get_all) instead."),
        )


def _profile_member(actor, entity_id: str):
    """The member a profile call names, 404 unless it is the key's to read."""
    name = entity_text(entity_id, "entity_id")
    if name is None:
        raise NotFound(_("Entity not found."))
    try:
        member = member_for(actor, name)
    except InvalidInput:
        raise NotFound(_("Entity not found.")) from None
    if not selectors.can_read_scope(actor, scope_key(Scope.USER, member.pk)):
        raise NotFound(_("Entity not found."))
    return member


PROFILE_SETTINGS = {
    "enabled": False,
    "capabilities": {"generate": False, "sample": False},
    "entities": {"user": {"schema": None, "custom_instructions": None}},
}


class Profile(Mem0View):
    """GET /v2/entities/user/{id}/profile/ (get_profile): Mem0's answer for a project whose
    profiles are not enabled, `status: not_enabled`; Cadre builds no profiles."""

    def get(self, request, entity_id):
        _profile_member(self.actor, entity_id)
        return Response(
            {
                "profile": None,
                "status": PROFILE_STATUS,
                "entity_type": "user",
                "entity_id": entity_id,
                "updated_at": None,
                "generation_count": 0,
            }
        )


class ProfileSettings(Mem0View):
    """GET and POST /v2/profiles/settings/: profiles are off and cannot be turned on; a POST
    that leaves them off (enabled false, fields cleared) answers the settings."""

    def get(self, request):
        return Response(PROFILE_SETTINGS)

    def post(self, request):
        data = json_body(request)
        unknown = sorted(set(data) - {"enabled", "entities"})
        if unknown:  # as Mem0 refuses flat schema/custom_instructions: "Unsupported settings"
            raise InvalidInput(
                _("Unsupported settings: %(keys)s.") % {"keys": ", ".join(unknown)},
                code="unsupported_settings",
                details={"settings": unknown},
            )
        enabled = data.get("enabled")
        if enabled is not None and not isinstance(enabled, bool):
            raise InvalidInput(_("enabled must be true or false."), details={"enabled": ["Bool."]})
        entities = data.get("entities") or {}
        if not isinstance(entities, dict):
            raise InvalidInput(_("entities must be an object."), details={"entities": ["Object."]})
        values = [
            value
            for settings in entities.values()
            for value in (settings.values() if isinstance(settings, dict) else [settings])
        ]
        if enabled or any(value is not None for value in values):
            _refuse(_("memory profiles"), _("Profiles stay disabled."))
        return Response(PROFILE_SETTINGS)


class ProfileJobs(Mem0View):
    """POST /v2/profiles/jobs/ (generate_profile, sample_profiles): refused, no profiles."""

    def post(self, request):
        data = json_body(request)
        if data.get("operation") not in ("trigger", "sample"):
            raise InvalidInput(
                _("operation must be trigger or sample."), details={"operation": ["Required."]}
            )
        if data.get("operation") == "trigger":
            _profile_member(self.actor, data.get("entity_id"))
        _refuse(_("memory profiles"), _("Profiles stay disabled."))


class ProfileJob(Mem0View):
    """GET /v2/profiles/jobs/{id}/ (get_profile_job): no job was ever started."""

    def get(self, request, job_id):
        raise NotFound(_("Profile job not found."))


# --- projects and webhooks -----------------------------------------------------------------


def project_id_of(actor) -> str:
    """The project a key is, as ping names it: one Mem0 project per Cadre API key."""
    key = actor.api_key
    return f"key-{key.prefix}" if key is not None else "console"


def organization_id_of(actor) -> str:
    return str(actor.organization.slug or actor.organization.pk)


class ProjectView(Mem0View):
    """A route under /api/v1/orgs/organizations/{org_id}/: 404 unless it names the key's
    organization (and project): another organization's ids name nothing."""

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        if kwargs.get("org_id") != organization_id_of(self.actor):
            raise NotFound(_("Organization not found."))
        if "project_id" in kwargs and kwargs["project_id"] != project_id_of(self.actor):
            raise NotFound(_("Project not found."))


PROJECT_INSTEAD = gettext_lazy(
    "A Cadre API key is the project: create, change or revoke keys, and set how memory is "
    "kept, in Cadre's console."
)


class Projects(ProjectView):
    """POST …/projects/ (project.create): refused; a new Cadre API key is a new project."""

    def post(self, request, org_id):
        json_body(request)
        _refuse(_("creating projects"), PROJECT_INSTEAD)


PROJECT_FIELDS = (
    "id",
    "name",
    "description",
    "org_id",
    "created_at",
    "custom_instructions",
    "custom_categories",
    "agent_custom_instructions",
    "multilingual",
)


class ProjectDetail(ProjectView):
    """GET, PATCH, DELETE …/projects/{project_id}/ (get_project, update_project,
    project.get/update/delete): read is served; changes are refused."""

    def get(self, request, org_id, project_id):
        key = self.actor.api_key
        project = {
            "id": project_id,
            "name": key.name if key else "console",
            "description": _("Cadre API key %(prefix)s") % {"prefix": key.prefix} if key else "",
            "org_id": org_id,
            "created_at": key.created_at.isoformat() if key else None,
            "custom_instructions": None,
            "custom_categories": [],
            "agent_custom_instructions": None,
            "multilingual": True,
        }
        fields = [field for field in request.query_params.getlist("fields") if field]
        if fields:
            project = {name: value for name, value in project.items() if name in fields}
        return Response(project)

    def patch(self, request, org_id, project_id):
        json_body(request)
        _refuse(_("changing project settings"), PROJECT_INSTEAD)

    def delete(self, request, org_id, project_id):
        _refuse(_("deleting projects"), PROJECT_INSTEAD)


class ProjectMembers(ProjectView):
    """…/projects/{project_id}/members/: the key's creator is its one member (OWNER);
    membership changes are refused."""

    def get(self, request, org_id, project_id):
        member = selectors.acting_member(self.actor)
        email = getattr(member, "email", "") or ""
        return Response({"members": [{"email": email, "role": "OWNER"}] if email else []})

    def post(self, request, org_id, project_id):
        json_body(request)
        _refuse(_("project members"), _("Members and roles are Cadre's, managed in its console."))

    put = post

    def delete(self, request, org_id, project_id):
        _refuse(_("project members"), _("Members and roles are Cadre's, managed in its console."))


WEBHOOK_INSTEAD = gettext_lazy(
    "Follow memory changes through Cadre's audit trail and its export (docs/governance.md)."
)


class Webhooks(Mem0View):
    """GET and POST /api/v1/webhooks/projects/{project_id}/: none exist; creating is refused."""

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        if kwargs.get("project_id") != project_id_of(self.actor):
            raise NotFound(_("Project not found."))

    def get(self, request, project_id):
        return Response([])

    def post(self, request, project_id):
        json_body(request)
        _refuse(_("webhooks"), WEBHOOK_INSTEAD)


class WebhookDetail(Mem0View):
    """PUT and DELETE /api/v1/webhooks/{id}/: no webhook can exist, so none is found."""

    def put(self, request, webhook_id):
        raise NotFound(_("Webhook not found."))

    delete = put
