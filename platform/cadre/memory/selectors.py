"""Read paths for memory: which scopes an actor may read or change, get, list, history, search.

Scopes are computed on the server from the caller's identity; request parameters can only
narrow them (see docs/memory.md, "Who can read what").

- Every member reads and writes their own personal memory (`user:<member id>`), the memory
  of their own agents (`agent:<id>` of every agent that serves them), the memory of their
  positions (`position:<id>`), their department *and its ancestors* (`department:<id>` — a
  rule recorded for "Sales" applies to "Sales / East"; a sub-department's memory is not
  visible to the parent department), and the organization's.
- A member also reads, corrects and deletes every memory whose `subject` they are (what they
  told someone else's agent), in whatever scope it landed.
- Writes to shared scopes go only to the member's own department (not its ancestors), their
  positions and the organization; correcting or deleting shared memory needs `memory.manage`,
  except that the author of an item may correct their own item.
- A memory written into a shared scope (organization, department, position) by someone without
  `memory.manage` waits as unverified: searches (which feed models) never return it, and only
  holders of `memory.manage`, its writer and its subject see it until it is accepted.
- `memory.view` (admins, auditors) adds every department's, position's and agent's memory;
  `memory.manage` corrects and deletes it. Another member's personal memory needs
  `memory.personal` (owners and IT admins): to answer an access or deletion request.
- An agent reads its own `agent:<id>` memory plus the scopes of the member it serves — never
  a sibling agent's.
- An API key acts for its creator's scopes and needs the `memory:read` / `memory:write` scope;
  its `memory.view` / `memory.manage` permissions are its scopes capped by its creator's
  (no key scope carries `memory.personal`).
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from contextvars import ContextVar

from django.db.models import CharField, Q, QuerySet
from django.db.models.functions import Cast
from django.utils.translation import gettext
from opentelemetry import trace

from cadre.errors import InvalidInput, NotFound, NotPermitted
from cadre.governance import audit
from cadre.identifiers import parse_pk
from cadre.llm import estimate_tokens
from cadre.memory import personal_reads
from cadre.memory import search as search_engine
from cadre.memory.agent_scopes import AgentScope, agent_scopes
from cadre.memory.models import (
    ContextRecord,
    ContextRecordItem,
    Memory,
    MemoryEmbedding,
    MemoryTask,
    MemoryVersion,
    Scope,
    Verification,
    scope_key,
    scope_parts,
)
from cadre.observability import current_trace_id
from cadre.tenancy.actors import system_actor
from cadre.tenancy.models import ApiKey, Department, Member, Position

SHARED_PREFIXES = ("department:", "position:")
tracer = trace.get_tracer(__name__)
HIDDEN_STATUSES = (Memory.Status.DELETED,)
PERSONAL_PERMISSION = "memory.personal"


# --- who may read / write which scopes -----------------------------------------------------


def _key_scopes(actor) -> set[str]:
    key = getattr(actor, "api_key", None)
    return set(getattr(key, "scopes", []) or []) if key is not None else set()


def can_read_memory(actor) -> bool:
    """Whether the actor may read memory at all: a member, an agent, an API key with a memory
    scope, or the system (whose reads of rows also need a stated reason, `_system_read`). Any
    other kind of actor (a SCIM token) reads none."""
    if actor is None or actor.organization is None:
        return False
    if actor.kind == "api_key":
        return bool({"memory:read", "memory:write"} & _key_scopes(actor))
    return actor.kind in ("member", "agent", "system")


def system_reader(organization, *, job: str, reason: str, audited: bool = False):
    """The named system actor an internal job reads memory as: `job` names it in the audit
    trail, `reason` says why it reads; `audited` records every read it makes (for jobs whose
    reads reach a person or a model — see docs/memory.md, "One gate")."""
    return system_actor(organization, label=job, reason=reason, audit_reads=audited)


def _system_read(actor, what: str) -> None:
    """A system read: refused without a stated reason; audited with it when asked for."""
    if actor is None or actor.kind != "system":
        return
    if not getattr(actor, "reason", ""):
        raise NotPermitted(gettext("A system read of memory needs a stated reason."))
    if getattr(actor, "audit_reads", False):
        audit.record(
            actor=actor,
            action="memory.system_read",
            target=("organization", actor.organization.pk),
            after={"job": actor.label, "read": what},
            reason=actor.reason,
        )


def can_write_memory(actor) -> bool:
    if actor is None or actor.organization is None:
        return False
    if actor.kind == "api_key":
        return "memory:write" in _key_scopes(actor)
    if actor.kind == "member":
        return actor.member is not None and actor.member.is_active
    return True


def department_chain(organization_id: int, department_id: int | None) -> list[int]:
    """The department and its ancestors, nearest first."""
    if department_id is None:
        return []
    parents = dict(
        Department.objects.filter(organization_id=organization_id).values_list("id", "parent_id")
    )
    chain, current = [], department_id
    while current is not None and current not in chain:
        chain.append(current)
        current = parents.get(current)
    return chain


def membership_scope_keys(actor) -> list[str]:
    """The scopes the actor belongs to: self, agent, department chain, positions, organization."""
    keys: list[str] = []
    agent = getattr(actor, "agent", None)
    if agent is not None:
        keys.append(scope_key(Scope.AGENT, agent.pk))
    member = getattr(actor, "member", None)
    if member is not None and member.organization_id == actor.organization.pk:
        keys.append(scope_key(Scope.USER, member.pk))
        for department_id in department_chain(actor.organization.pk, member.department_id):
            keys.append(scope_key(Scope.DEPARTMENT, department_id))
        for position_id in member.positions.values_list("id", flat=True):
            keys.append(scope_key(Scope.POSITION, position_id))
    keys.append(scope_key(Scope.ORGANIZATION))
    return keys


def _all_shared_scope_keys(organization) -> list[str]:
    departments = Department.objects.filter(organization=organization).values_list("id", flat=True)
    positions = Position.objects.filter(organization=organization).values_list("id", flat=True)
    return [scope_key(Scope.DEPARTMENT, pk) for pk in departments] + [
        scope_key(Scope.POSITION, pk) for pk in positions
    ]


# Inside `scope_keys_memo()`: (actor, keys) per actor object, so a request that narrows
# several queries by the same actor's reach computes it once.
_SCOPE_KEYS_MEMO: ContextVar[dict | None] = ContextVar("readable_scope_keys_memo", default=None)


@contextmanager
def scope_keys_memo():
    """Within the block (one request's worth of queries), `readable_scope_keys` is computed
    once per actor: grants changed meanwhile show on the next request, as they would."""
    token = _SCOPE_KEYS_MEMO.set({})
    try:
        yield
    finally:
        _SCOPE_KEYS_MEMO.reset(token)


def readable_scope_keys(actor) -> list[str]:
    """Every scope key the actor may read, computed from its identity (never from a request)."""
    memo = _SCOPE_KEYS_MEMO.get()
    if memo is None:
        return _readable_scope_keys(actor)
    kept = memo.get(id(actor))
    if kept is None or kept[0] is not actor:
        kept = memo[id(actor)] = (actor, _readable_scope_keys(actor))
    return list(kept[1])


def _readable_scope_keys(actor) -> list[str]:
    if not can_read_memory(actor):
        return []
    if actor.kind == "system":
        return list(
            Memory.objects.filter(organization=actor.organization)
            .values_list("scope_key", flat=True)
            .order_by()  # the model's ordering would join the DISTINCT
            .distinct()
        ) or [scope_key(Scope.ORGANIZATION)]
    keys = membership_scope_keys(actor)
    keys[1:1] = [agent.key for agent in owned_agent_scopes(actor)]  # after "user:<self>"
    if actor.has("memory.view"):
        keys += _all_shared_scope_keys(actor.organization)
    return list(dict.fromkeys(keys))


def acting_member(actor) -> Member | None:
    """The member a person-actor (a member, or an API key for its creator) stands for; None
    for agents and the system — an agent never gains its owner's view of sibling agents."""
    if actor is None or actor.kind not in ("member", "api_key") or actor.organization is None:
        return None
    member = getattr(actor, "member", None)
    if member is None or member.organization_id != actor.organization.pk:
        return None
    return member


def owned_agent_scopes(actor) -> list[AgentScope]:
    """The agents that serve this person: their memory is the person's to see and change."""
    member = acting_member(actor)
    if member is None:
        return []
    return agent_scopes(actor.organization.pk, member_id=member.pk)


def can_read_scope(actor, key: str) -> bool:
    """May the actor read (list, filter by) this scope? Beyond `readable_scope_keys`: admins'
    reach into every agent scope (`memory.view`) and personal scope (`memory.personal`)."""
    if key in readable_scope_keys(actor):
        return True
    if acting_member(actor) is None or not can_read_memory(actor):
        return False
    scope, _ = scope_parts(key)
    return (scope == Scope.AGENT and actor.has("memory.view")) or (
        scope == Scope.USER and actor.has(PERSONAL_PERMISSION)
    )


def _readable_grants(actor, scope_keys: list[str] | None = None) -> tuple[Q | None, list[str]]:
    """(the condition for the rows the actor may read one scope key or subject at a time,
    the kinds of scope it reads whole): an admin's reach into every agent and personal scope
    is a kind of scope, so a rollup summed per kind of scope can serve it."""
    member = acting_member(actor)
    if actor.kind == "system":  # the whole organization (the caller checked the reason)
        return (Q(scope_key__in=list(dict.fromkeys(scope_keys))) if scope_keys else Q()), []
    if scope_keys:
        requested = list(dict.fromkeys(scope_keys))
        condition = Q(scope_key__in=[key for key in requested if can_read_scope(actor, key)])
        if member is not None:
            condition |= Q(scope_key__in=requested, subject_id=member.pk)
        return condition, []
    keys = readable_scope_keys(actor)
    if not keys:
        return None, []
    condition = Q(scope_key__in=keys)
    whole: list[str] = []
    if member is not None:
        condition |= Q(subject_id=member.pk)
        if actor.has("memory.view"):
            whole.append(Scope.AGENT)
        if actor.has(PERSONAL_PERMISSION):
            whole.append(Scope.USER)
    return condition, whole


def _readable_condition(actor, scope_keys: list[str] | None = None) -> Q | None:
    """The rows the actor may read (narrowed to `scope_keys` when given), as one condition."""
    condition, whole = _readable_grants(actor, scope_keys)
    if condition is None:
        return None
    for scope in whole:
        condition |= Q(scope=scope)
    return condition


def writable_scope_keys(actor) -> list[str]:
    """Scopes the actor may add memories to (own department only, not its ancestors)."""
    if not can_write_memory(actor):
        return []
    if actor.kind == "system":
        return readable_scope_keys(actor)
    keys: list[str] = []
    agent = getattr(actor, "agent", None)
    if agent is not None:
        keys.append(scope_key(Scope.AGENT, agent.pk))
    member = getattr(actor, "member", None)
    if member is not None and member.organization_id == actor.organization.pk:
        keys.append(scope_key(Scope.USER, member.pk))
        if member.department_id:
            keys.append(scope_key(Scope.DEPARTMENT, member.department_id))
        positions = member.positions.values_list("id", flat=True)
        keys += [scope_key(Scope.POSITION, pk) for pk in positions]
    keys.append(scope_key(Scope.ORGANIZATION))
    if actor.has("memory.manage"):
        keys += _all_shared_scope_keys(actor.organization)
    return list(dict.fromkeys(keys))


def personal_scope_keys(actor) -> set[str]:
    keys = set()
    if getattr(actor, "agent", None) is not None:
        keys.add(scope_key(Scope.AGENT, actor.agent.pk))
    if getattr(actor, "member", None) is not None:
        keys.add(scope_key(Scope.USER, actor.member.pk))
    return keys


def can_modify(actor, memory: Memory) -> bool:
    """May the actor correct or delete this (readable) memory?"""
    if not can_write_memory(actor) or memory.organization_id != actor.organization.pk:
        return False
    if actor.kind == "system":
        return True
    if memory.scope_key in personal_scope_keys(actor):
        return True
    member = acting_member(actor)
    if member is not None:
        if memory.subject_id == member.pk:
            return True
        if memory.scope == Scope.AGENT and (
            actor.has("memory.manage")
            or memory.scope_key in {agent.key for agent in owned_agent_scopes(actor)}
        ):
            return True
        if memory.scope == Scope.USER and actor.has(PERSONAL_PERMISSION):
            return True
    if memory.scope_key not in readable_scope_keys(actor):
        return False
    if actor.has("memory.manage"):
        return True
    return bool(actor.actor_id) and (memory.author_type, memory.author_id) == (
        actor.kind,
        actor.actor_id,
    )


def can_review(actor) -> bool:
    """May the actor accept or reject shared memory waiting for review? A person (or their API
    key with `memory:write`) holding `memory.manage`; never an agent or the system."""
    return (
        actor is not None
        and actor.kind in ("member", "api_key")
        and can_write_memory(actor)
        and actor.has("memory.manage")
    )


def narrow_scope_keys(actor, requested: list[str] | None) -> list[str]:
    """The actor's readable scopes, narrowed (never widened) by the request's list."""
    if requested and actor.kind == "system":
        # The system reads the whole organization: the request's scopes, without first
        # listing every scope that holds memory.
        return list(dict.fromkeys(requested))
    readable = readable_scope_keys(actor)
    if not requested:
        return readable
    return [key for key in dict.fromkeys(requested) if can_read_scope(actor, key)]


def parse_scope_key(value: str) -> str:
    """Validate 'user:12', 'department:5', 'organization' and return it normalized."""
    value = (value or "").strip()
    if value == Scope.ORGANIZATION:
        return value
    scope, _, raw_id = value.partition(":")
    if scope not in Scope.values or scope == Scope.ORGANIZATION or parse_pk(raw_id) is None:
        raise InvalidInput(
            gettext("Unknown scope %(value)r.") % {"value": value},
            details={"scope": ["Use 'organization' or '<user|agent|position|department>:<id>'."]},
        )
    return scope_key(scope, int(raw_id))


def scope_labels(organization, keys, *, viewer=None) -> dict[str, str]:
    """Readable names for scope keys: "You", "Member: Bob", "Agent: Sales assistant (Alice)",
    "Department: Sales", "Position: Account manager", "Organization" (a few queries)."""
    ids: dict[str, set[int]] = {}
    for key in keys:
        scope, scope_id = scope_parts(key)
        if scope_id is not None:
            ids.setdefault(scope, set()).add(scope_id)
    names: dict[str, dict[int, str]] = {
        Scope.USER: dict(
            Member.objects.filter(
                organization=organization, pk__in=ids.get(Scope.USER, ())
            ).values_list("pk", "display_name")
        ),
        Scope.DEPARTMENT: dict(
            Department.objects.filter(
                organization=organization, pk__in=ids.get(Scope.DEPARTMENT, ())
            ).values_list("pk", "name")
        ),
        Scope.POSITION: dict(
            Position.objects.filter(
                organization=organization, pk__in=ids.get(Scope.POSITION, ())
            ).values_list("pk", "name")
        ),
    }
    agents = (
        {
            agent.agent_id: agent.label
            for agent in agent_scopes(organization.pk, agent_ids=ids[Scope.AGENT])
        }
        if ids.get(Scope.AGENT)
        else {}
    )
    viewer_key = scope_key(Scope.USER, viewer.pk) if viewer is not None else None
    labels = {}
    for key in keys:
        scope, scope_id = scope_parts(key)
        if key == viewer_key:
            labels[key] = gettext("You")
        elif scope == Scope.ORGANIZATION:
            labels[key] = gettext("Organization")
        elif scope == Scope.AGENT:
            labels[key] = agents.get(scope_id) or gettext("Agent %(id)s") % {"id": scope_id}
        else:
            name = names[scope].get(scope_id, scope_id)
            if scope == Scope.USER:
                labels[key] = gettext("Member: %(name)s") % {"name": name}
            elif scope == Scope.DEPARTMENT:
                labels[key] = gettext("Department: %(name)s") % {"name": name}
            else:
                labels[key] = gettext("Position: %(name)s") % {"name": name}
    return labels


def scope_choices(actor) -> list[tuple[str, str]]:
    """Every scope the actor may read, with its readable name — the scope filter's options:
    their own, their agents', their departments' and positions', the organization's; scopes
    holding memories about them; for admins, the agent (and personal) scopes holding memory."""
    keys = readable_scope_keys(actor)
    member = acting_member(actor)
    if member is not None:
        rows = Memory.objects.filter(organization=actor.organization).exclude(
            status__in=HIDDEN_STATUSES
        )
        extra = Q(subject_id=member.pk)
        if actor.has("memory.view"):
            extra |= Q(scope=Scope.AGENT)
        if actor.has(PERSONAL_PERMISSION):
            extra |= Q(scope=Scope.USER)
        # order_by(): without it the model's ordering joins the DISTINCT (one row a memory).
        found = rows.filter(extra).values_list("scope_key", flat=True).order_by().distinct()
        keys += sorted(set(found) - set(keys))
    labels = scope_labels(actor.organization, keys, viewer=member)
    return [(key, labels[key]) for key in keys]


# --- querysets -------------------------------------------------------------------------


def review_condition(actor) -> Q | None:
    """Which shared memories not (yet) verified the actor may see, as a condition on memories;
    None: all of them. Holders of `memory.manage` (who accept or reject them) and the system
    see every one; anyone else only the verified ones, plus those they wrote (themselves or
    through their API keys) or are the subject of — labelled, so a writer sees their memory
    wait. A colleague never sees what waits: it is not the organization's memory yet."""
    if actor.kind == "system" or actor.has("memory.manage"):
        return None
    condition = Q(verification=Verification.VERIFIED)
    if actor.actor_id:
        condition |= Q(author_type=actor.kind, author_id=actor.actor_id)
    member = acting_member(actor)
    if member is not None:
        # The member's keys as a subquery (author_id holds the key's id as text): no extra
        # round trip on every memory read.
        keys = (
            ApiKey.objects.filter(created_by=member)
            .annotate(key_id=Cast("pk", output_field=CharField()))
            .values("key_id")
        )
        condition |= (
            Q(author_type="member", author_id=str(member.pk))
            | Q(subject_id=member.pk)
            | Q(author_type="api_key", author_id__in=keys)
        )
    return condition


def memory_queryset(
    actor, *, scope_keys: list[str] | None = None, with_deleted: bool = False
) -> QuerySet[Memory]:
    """Memories the actor may read (never deleted, unless `with_deleted` for counting events),
    optionally narrowed to some scopes: the readable scopes' items, plus those whose subject
    the actor is, wherever they are — shared memories waiting for review only for those who
    review them or wrote them (`review_condition`).

    The one queryset of memories: every read of memory rows outside the write services starts
    here (tests/memory/test_memory_gate.py walks the code for any that does not)."""
    _system_read(actor, "memories")
    rows = readable_rows(actor, Memory.objects.all(), scope_keys=scope_keys)
    if can_read_memory(actor):
        review = review_condition(actor)
        if review is not None:
            rows = rows.filter(review)
    rows = rows if with_deleted else rows.exclude(status__in=HIDDEN_STATUSES)
    # A reader of other people's personal memory leaves a trace they see (personal_reads).
    return personal_reads.watched(actor, rows)


def readable_rows(actor, rows: QuerySet, *, scope_keys: list[str] | None = None) -> QuerySet:
    """Rows carrying a memory's reader columns (`organization`, `scope`, `scope_key`,
    `subject_id`: memories, or a rollup of them) narrowed to those the actor may read."""
    if not can_read_memory(actor):
        return rows.none()
    condition = _readable_condition(actor, scope_keys)
    if condition is None:
        return rows.none()
    return rows.filter(organization=actor.organization).filter(condition)


def readable_condition(actor, scope_keys: list[str] | None = None) -> Q | None:
    """The condition on a memory's reader columns (`scope`, `scope_key`, `subject_id`) for
    what the actor may read, None for nothing: for rows carrying the columns but not the
    organization (context items: their record carries it, and the caller narrows to it)."""
    if not can_read_memory(actor):
        return None
    return _readable_condition(actor, scope_keys)


def readable_rows_by_scope(
    actor, rows: QuerySet, *, scope_keys: list[str] | None = None
) -> tuple[QuerySet, list[str]]:
    """`readable_rows` split in two: (the rows of the kinds of scope the actor does not read
    whole, narrowed; the kinds of scope it reads whole). The two never overlap: summing the
    first with a per-kind-of-scope rollup of the second gives what `readable_rows` sums."""
    if not can_read_memory(actor):
        return rows.none(), []
    condition, whole = _readable_grants(actor, scope_keys)
    if condition is None:
        return rows.none(), []
    rows = rows.filter(organization=actor.organization).filter(condition)
    if whole:
        rows = rows.filter(scope__in=[scope for scope in Scope.values if scope not in whole])
    return rows, whole


def memory_list(
    actor,
    *,
    scope_keys: list[str] | None = None,
    kinds: list[str] | None = None,
    tags: list[str] | None = None,
    source_kinds: list[str] | None = None,
    statuses: list[str] | None = None,
    since=None,
    until=None,
    conversation_id: str | None = None,
    text: str | None = None,
    verifications: list[str] | None = None,
) -> QuerySet[Memory]:
    """The console's and the API's list: active memories by default, newest first.
    `verifications` narrows to review states (the review queue: `["unverified"]`)."""
    queryset = memory_queryset(actor, scope_keys=scope_keys)
    statuses = [s for s in (statuses or [Memory.Status.ACTIVE]) if s not in HIDDEN_STATUSES]
    queryset = queryset.filter(status__in=statuses)
    if verifications:
        queryset = queryset.filter(verification__in=verifications)
    if kinds:
        queryset = queryset.filter(kind__in=kinds)
    if tags:
        queryset = queryset.filter(tags__contains=tags)
    if source_kinds:
        queryset = queryset.filter(source_kind__in=source_kinds)
    if since is not None:
        queryset = queryset.filter(observed_at__gte=since)
    if until is not None:
        queryset = queryset.filter(observed_at__lt=until)
    if conversation_id:
        queryset = queryset.filter(conversation_id=conversation_id)
    if text:
        queryset = queryset.filter(content__icontains=text)
    return queryset.order_by("-created_at", "-id")


def memory_get(actor, memory_id) -> Memory:
    """One readable memory; 404 when it is unreadable, deleted or in another organization."""
    pk = parse_pk(memory_id)  # '١٢' or '²' names no memory (int() would read the first)
    if pk is None:
        raise NotFound(gettext("Memory not found."))
    memory = memory_queryset(actor).filter(pk=pk).first()
    if memory is None:
        raise NotFound(gettext("Memory not found."))
    return memory


def memory_get_for_deletion(actor, memory_id) -> Memory:
    """A memory in a scope the actor may read, deleted or purged ones included: what deleting
    and the deletion report address. 404 when the scope is unreadable or in another
    organization (who may change it is the services' decision)."""
    pk = parse_pk(memory_id)  # '١٢' or '²' names no memory (int() would read the first)
    if pk is None:
        raise NotFound(gettext("Memory not found."))
    # The same reach as reading (readable scopes, and what the actor is the subject of), with
    # deleted and purged memories kept: a second delete is a 409, not a 404.
    condition = _readable_condition(actor, None) if can_read_memory(actor) else None
    if condition is not None:
        review = review_condition(actor)
        if review is not None:
            condition &= review
    memory = (
        Memory.objects.filter(organization=actor.organization, pk=pk).filter(condition).first()
        if condition is not None
        else None
    )
    if memory is None:
        raise NotFound(gettext("Memory not found."))
    return memory


def memory_history(actor, memory_id) -> QuerySet[MemoryVersion]:
    memory = memory_get(actor, memory_id)
    return MemoryVersion.objects.filter(memory=memory).order_by("version", "id")


def memory_task_queryset(actor) -> QuerySet[MemoryTask]:
    """Task records the actor may see: those of readable memories; org-wide ones for admins."""
    if not can_read_memory(actor):
        return MemoryTask.objects.none()
    queryset = MemoryTask.objects.filter(organization=actor.organization)
    condition = Q(memory__in=memory_queryset(actor).values("pk"))
    if actor.has("memory.view") or actor.kind == "system":
        condition |= Q(memory__isnull=True)
    return queryset.filter(condition).order_by("-created_at", "-id")


def context_record_queryset(actor) -> QuerySet[ContextRecord]:
    """Context records: an admin (`memory.view`) sees all but those quoting a memory they may
    not read (another member's personal memory, without `memory.personal`: not found);
    others those they caused."""
    if not can_read_memory(actor):
        return ContextRecord.objects.none()
    _system_read(actor, "context records")
    queryset = ContextRecord.objects.filter(organization=actor.organization)
    if actor.kind == "system" or (actor.has("memory.view") and actor.has(PERSONAL_PERMISSION)):
        return queryset
    if actor.has("memory.view"):
        readable = readable_rows(actor, Memory.objects.all()).values("pk")
        quoting_unreadable = ContextRecordItem.objects.filter(
            context__organization=actor.organization
        ).exclude(memory_id__in=readable)
        return queryset.exclude(pk__in=quoting_unreadable.values("context_id"))
    return queryset.filter(actor_type=actor.kind, actor_id=actor.actor_id)


def turn_records(actor) -> QuerySet[ContextRecord]:
    """The runtime's model-call records of the turns the actor may take whole (their query
    is what a person said): every one for the system (with a stated reason) and holders of
    `memory.personal`; for a person (or their API key), those of the agents serving them and
    those they made themselves."""
    if actor is None or actor.organization is None:
        return ContextRecord.objects.none()
    _system_read(actor, "model-call records")
    queryset = ContextRecord.objects.filter(
        organization=actor.organization, kind=ContextRecord.Kind.MODEL_CALL
    )
    if actor.kind == "system" or (
        acting_member(actor) is not None and actor.has(PERSONAL_PERMISSION)
    ):
        return queryset
    agents = [str(agent.agent_id) for agent in owned_agent_scopes(actor)]
    own = Q(actor_type=actor.kind, actor_id=actor.actor_id) if actor.actor_id else Q(pk=None)
    return queryset.filter(Q(actor_type="agent", actor_id__in=agents) | own)


def memory_vectors(actor, *, model, memory_ids) -> dict[int, object]:
    """The stored vectors under `model` of those of `memory_ids` the actor may read."""
    readable = memory_queryset(actor).filter(pk__in=list(memory_ids)).values("pk")
    return dict(
        MemoryEmbedding.objects.filter(model=model, memory_id__in=readable).values_list(
            "memory_id", "embedding"
        )
    )


def memory_influence(actor, memory_id) -> QuerySet[ContextRecord]:
    """Every recorded model call that was sent this memory: a bad memory's blast radius.

    Only items recorded as sent count — a memory the policy withheld or the context budget
    dropped did not reach the model, and records from before per-call records (items
    `returned`) do not say whether it did."""
    memory = memory_get(actor, memory_id)
    return (
        context_record_queryset(actor)
        .filter(items__memory=memory, items__status=ContextRecordItem.Status.SENT)
        .distinct()
        .order_by("-created_at", "-id")
    )


# --- search ------------------------------------------------------------------------------


class SearchResult(list):
    """The hits (it is the list of SearchHit), plus the scopes searched, whether recall ran,
    and the ContextRecord written for a model call (or None)."""

    def __init__(
        self,
        hits: list,
        *,
        scope_keys: list[str],
        context_record: ContextRecord | None = None,
        recalled: bool = True,
        passed_over: list | None = None,
    ):
        super().__init__(hits)
        # The candidates diversity (MMR) passed over (SearchHit; asked for with passed_over).
        self.passed_over = passed_over or []
        self.scope_keys = scope_keys
        self.context_record = context_record
        self.recalled = recalled

    @property
    def hits(self) -> list:
        return list(self)


@tracer.start_as_current_span("memory.search")
def memory_search(
    *,
    actor,
    query: str,
    top_k: int = 10,
    scope_keys: list[str] | None = None,
    kinds: list[str] | None = None,
    tags: list[str] | None = None,
    source_kinds: list[str] | None = None,
    attributes: dict | None = None,
    since=None,
    until=None,
    as_of=None,
    conversation_id: str | None = None,
    on_behalf_of: dict | None = None,
    force: bool = False,
    passed_over: bool = False,
    query_vector: list[float] | None = None,
    candidate_ids: list[int] | None = None,
    model=None,
    mode: str = "hybrid",
    settings=None,
) -> SearchResult:
    """Search the memories the actor may read.

    With `on_behalf_of={"run_id", "step_id"[, "trace_id"]}` the search feeds a model call: a
    ContextRecord is written with each hit's memory id, version, score and token estimate.
    Short, contentless queries ("ok", "好的") skip recall unless `force` is set.
    `passed_over`: also collect the candidates diversity (MMR) passed over
    (`result.passed_over`, readable rows only, as for the hits).
    `query_vector`: the query's embedding under the active model, when the caller has it.
    `candidate_ids`: rank only these memories (a pool retrieved ahead, the runtime's prefetch),
    with the same filters, scopes and ranking as the full search.
    `model`: search another embedding model's vectors (an evaluation replay of a re-embed).
    `mode` ("lexical" / "vector": one side alone) and `settings` (search.SearchSettings):
    the benchmarks' knobs; the engine's own search takes no actor and is called only here.
    """
    if not can_read_memory(actor):
        raise NotPermitted(gettext("This API key needs the 'memory:read' scope."))
    _system_read(actor, "memory search")
    if not 1 <= int(top_k) <= 100:
        raise InvalidInput(
            gettext("top_k must be between 1 and 100."), details={"top_k": ["1..100"]}
        )
    keys = narrow_scope_keys(actor, scope_keys)
    recalled = bool(keys) and (force or search_engine.should_recall(query))
    hits: list = []
    dropped: list | None = [] if passed_over else None
    if recalled:
        hits = search_engine._search(
            organization=actor.organization,
            scope_keys=keys,
            query=query,
            top_k=int(top_k),
            kinds=kinds or None,
            tags=tags or None,
            source_kinds=source_kinds or None,
            attributes=attributes or None,
            since=since,
            until=until,
            as_of=as_of,
            conversation_id=conversation_id or None,
            passed_over=dropped,
            query_vector=query_vector,
            candidate_ids=candidate_ids,
            model=model,
            mode=mode,
            settings=settings,
        )
        # Defence in depth: whatever the engine returns, only readable, undeleted rows leave.
        allowed = set(keys)

        def readable(hit) -> bool:
            return (
                hit.memory.scope_key in allowed
                and hit.memory.organization_id == actor.organization.pk
                and hit.memory.status != Memory.Status.DELETED
                and hit.memory.purged_at is None
                and hit.memory.verification == Verification.VERIFIED
            )

        hits = [hit for hit in hits if readable(hit)]
        dropped = [hit for hit in dropped or [] if readable(hit)]
        reader = personal_reads.reader_id(actor)
        if reader is not None:
            personal_reads.note(actor, reader, [hit.memory for hit in hits])
    record = None
    if on_behalf_of is not None:
        record = context_record_write(
            actor=actor, query=query, hits=hits, on_behalf_of=on_behalf_of
        )
    span = trace.get_current_span()
    span.set_attribute("memory.scopes", len(keys))
    span.set_attribute("memory.recalled", recalled)
    span.set_attribute("memory.hits", len(hits))
    return SearchResult(
        hits, scope_keys=keys, context_record=record, recalled=recalled, passed_over=dropped
    )


def context_record_write(*, actor, query: str, hits: list, on_behalf_of: dict) -> ContextRecord:
    """Record which memories (ids, versions, scores, tokens) a search returned for a caller's
    model call (`kind="search"`; the runtime records its own model calls exactly, see
    services.context_record_for_model_call).

    An operational record, not an audit event: it holds ids and numbers (and the query, which
    the run already holds); memory text is never copied into it.
    """
    items, total = [], 0
    for rank, hit in enumerate(hits, start=1):
        tokens = estimate_tokens(hit.memory.content)
        total += tokens
        items.append((rank, hit, tokens))
    record = ContextRecord.objects.create(
        organization=actor.organization,
        kind=ContextRecord.Kind.SEARCH,
        run_id=str(on_behalf_of.get("run_id", ""))[:64],
        step_id=str(on_behalf_of.get("step_id", ""))[:64],
        trace_id=str(on_behalf_of.get("trace_id") or current_trace_id())[:32],
        actor_type=actor.kind,
        actor_id=str(actor.actor_id)[:64],
        query=query,
        total_tokens=total,
    )
    ContextRecordItem.objects.bulk_create(
        ContextRecordItem(
            context=record,
            memory=hit.memory,
            memory_version=hit.memory.version,
            rank=rank,
            score=float(hit.score),
            tokens=tokens,
            status=ContextRecordItem.Status.SENT,
            source=ContextRecordItem.Source.SEARCH,
            components=json.loads(json.dumps(hit.components, default=float)),
        )
        for rank, hit, tokens in items
    )
    return record


# --- figures -----------------------------------------------------------------------------


def memory_dedup_stats(organization) -> dict:
    """Dedup compression: items received vs items kept active after the funnel.

    received = rows written + exact duplicates absorbed at write time (no row created);
    merged = exact absorptions + rows merged into another by the near-duplicate stage.
    """
    rows = Memory.objects.filter(organization=organization)
    written = rows.count()
    merge_versions = MemoryVersion.objects.filter(
        memory__organization=organization, change=MemoryVersion.Change.MERGE
    )
    exact = merge_versions.filter(reason__startswith="exact duplicate").count()
    near = (
        rows.filter(status=Memory.Status.SUPERSEDED, versions__change=MemoryVersion.Change.MERGE)
        .distinct()
        .count()
    )
    received = written + exact
    merged = exact + near
    return {
        "received": received,
        "written": written,
        "merged_exact": exact,
        "merged_near": near,
        "compression_rate": round(merged / received, 4) if received else 0.0,
    }
