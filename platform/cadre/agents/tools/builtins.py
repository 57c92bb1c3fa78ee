"""Built-in tools: memory search/write, IM send, HTTP to allow-listed hosts, tasks, waits and
delegation (the last two are handled by the runtime: they pause the run)."""

from __future__ import annotations

from datetime import datetime
from urllib.parse import urlsplit

import httpx
from django.db.models import Q
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from cadre import outbound
from cadre.agents.models import AgentMessage, AgentTask
from cadre.agents.runtime.records import delivery
from cadre.agents.runtime.records.grants import retrieval_kinds
from cadre.agents.runtime.records.runs import speaker
from cadre.agents.subscriptions import publish
from cadre.agents.tools.registry import Tool, ToolFailed, register
from cadre.identifiers import parse_pk
from cadre.memory import selectors as memory_selectors
from cadre.memory import services as memory_services
from cadre.memory.dedup import normalize_content
from cadre.memory.models import Scope, scope_key, scope_parts
from cadre.memory.services.writes import PERSONAL_KINDS
from cadre.memory.statements import is_question
from cadre.tenancy.models import Department, Member, department_subtree_ids

MANY_RECIPIENTS = 5  # more recipients than this (or any group) makes a message high risk


# --- memory -----------------------------------------------------------------------------------


def _memory_search(ctx, args: dict) -> dict:
    result = memory_selectors.memory_search(
        actor=ctx.actor,
        query=args["query"],
        top_k=int(args.get("top_k", 5)),
        scope_keys=ctx.read_scope_keys(),
        kinds=retrieval_kinds(ctx.run.grants),
        force=True,
    )
    # The result passes the "retrieved" stage (masking) before the model reads it; the next
    # model call's ContextRecord lists these memories as sent (steps/assembly.record_context).
    return {
        "memories": [
            {
                "id": hit.memory.pk,
                "version": hit.memory.version,
                "content": hit.memory.content,
                "scope": hit.memory.scope_key,
                "score": round(float(hit.score), 4),
            }
            for hit in result.hits
        ]
    }


def _stated_by_user(ctx, content: str) -> bool:
    """Did the person say this in the turn ("remember that …")? Then it is their statement,
    not the model's inference. Like is compared with like: `content` arrives re-identified
    (the executor puts the values back into the model's placeholders), so the input is
    re-identified from the same vault too — a phone number or a colleague's name masked on
    the model's side is the same words on both."""
    said = normalize_content(ctx.runtime.reidentify(ctx.runtime.input_text or ""))
    return bool(said) and normalize_content(content) in said


def _memory_write(ctx, args: dict) -> dict:
    if is_question(args["content"]):
        # A question states nothing: stored, it would read as a fact (and could replace one).
        raise ToolFailed(
            "not_a_statement", "a question is not remembered: write what the person stated"
        )
    kind = args.get("kind", "fact")
    stated = _stated_by_user(ctx, args["content"])
    scope = args.get("scope")
    # Whose words these are: a delegated or published request speaks for its origin's person.
    subject = speaker(ctx.run)
    if scope is None and stated and kind in PERSONAL_KINDS and subject.pk == ctx.agent.member_id:
        # The employee's own words about themselves belong to them: their personal scope,
        # which their other agents read (as the process_memory hook writes them).
        key = scope_key(Scope.USER, subject.pk)
    else:
        scope = scope or "agent"
        key = ctx.write_scope_key(scope)
        if key is None:
            raise ToolFailed("scope_denied", f"this agent may not write to the {scope!r} scope")
    scope_name, scope_id = scope_parts(key)
    memory = memory_services.memory_add(
        actor=ctx.actor,
        scope=scope_name,
        scope_id=scope_id,
        subject=subject,
        kind=kind,
        content=args["content"],
        # What the person said is their statement; what the model chose to remember on its
        # own is an inference, ranked below the person's own words.
        source_kind="user_statement" if stated else "model_inference",
        source_ref={"run_id": ctx.run.pk, "step": ctx.step_index, "tool_call": ctx.key},
        conversation_id=str(ctx.run.session_id),
    )
    return {"memory_id": memory.pk, "scope": key}


register(
    Tool(
        name="memory_search",
        description="Search the memories this agent may read.",
        parameters={
            "type": "object",
            "required": ["query"],
            "additionalProperties": False,
            "properties": {
                "query": {"type": "string", "minLength": 1, "maxLength": 2000},
                "top_k": {"type": "integer", "minimum": 1, "maximum": 20},
            },
        },
        risk="low",
        side_effect="none",
        handler=_memory_search,
    )
)
register(
    Tool(
        name="memory_write",
        description="Remember a fact, preference or requirement (scope: agent, user, position, "
        "department or organization, as the template allows).",
        parameters={
            "type": "object",
            "required": ["content"],
            "additionalProperties": False,
            "properties": {
                "content": {"type": "string", "minLength": 1, "maxLength": 4000},
                "scope": {
                    "type": "string",
                    "enum": ["agent", "user", "position", "department", "organization"],
                },
                "kind": {
                    "type": "string",
                    "enum": ["fact", "preference", "requirement", "experience", "summary"],
                },
            },
        },
        risk="low",
        side_effect="internal",
        handler=_memory_write,
    )
)


# --- IM -----------------------------------------------------------------------------------


def _recipients_risk(args: dict) -> str:
    to = args.get("to") or []
    if len(to) > MANY_RECIPIENTS or any(str(item).startswith("group:") for item in to):
        return "high"
    return "low"


def _resolve_recipients(ctx, names: list) -> list[dict]:
    resolved = []
    for item in names:
        text = str(item).strip()
        if text.startswith("group:"):
            resolved.append({"group": text[6:]})
            continue
        condition = Q(display_name__iexact=text) | Q(email__iexact=text)
        if (key := parse_pk(text)) is not None:
            condition |= Q(pk=key)
        found = list(
            Member.objects.filter(
                organization_id=ctx.run.organization_id, status=Member.Status.ACTIVE
            )
            .filter(condition)
            .values_list("pk", "display_name")[:2]
        )
        if len(found) != 1:
            problem = "no active member" if not found else "more than one member"
            raise ToolFailed("unknown_recipient", f"{problem} matches {text!r}")
        resolved.append({"member": found[0][0], "name": found[0][1]})
    return resolved


# A group named so reaches everyone in the organization ("group:all-staff").
EVERYONE_GROUPS = {"all", "all staff", "allstaff", "everyone", "all hands", "staff"}


def _group_reach(organization_id: int, group: str) -> dict:
    """Who a message to `group` reaches, as far as Cadre knows: everyone (all-staff), the
    department so named (with its sub-departments), else an IM chat whose members only its
    platform knows (`people` None)."""
    spoken = " ".join(group.replace("-", " ").replace("_", " ").split()).lower()
    active = Member.objects.filter(organization_id=organization_id, status=Member.Status.ACTIVE)
    if spoken in EVERYONE_GROUPS:
        return {"group": group, "name": spoken.capitalize(), "people": active.count()}
    department = (
        Department.objects.filter(organization_id=organization_id, is_archived=False)
        .filter(Q(code__iexact=group) | Q(name__iexact=spoken) | Q(name__iexact=group))
        .order_by("pk")
        .first()
    )
    if department is not None:
        subtree = department_subtree_ids(organization_id, {department.pk})
        people = active.filter(department_id__in=subtree).count()
        return {"group": group, "name": department.name, "people": people}
    return {"group": group, "name": group, "people": None}


def _im_message(ctx, args: dict, recipients: list[dict]) -> AgentMessage:
    return AgentMessage(
        organization_id=ctx.run.organization_id,
        run=ctx.run,
        agent=ctx.agent,
        recipients=recipients,
        text=args["text"],
        channel=ctx.run.session.channel,
    )


def _im_send_preflight(ctx, args: dict) -> dict:
    """Can the message be sent (every recipient resolves, a channel can reach one)? Raises
    ToolFailed when not, before anyone is asked to confirm it; else its reach: how many
    people it goes to, group by group."""
    recipients = _resolve_recipients(ctx, args["to"])
    reason = delivery.message_unreachable(_im_message(ctx, args, recipients))
    if reason:
        raise ToolFailed("undeliverable", reason)
    groups = [
        _group_reach(ctx.run.organization_id, item["group"])
        for item in recipients
        if "group" in item
    ]
    members = {item["member"] for item in recipients if "member" in item}
    # A chat whose members Cadre does not know counts as one recipient at least.
    people = len(members) + sum(
        group["people"] if group["people"] is not None else 1 for group in groups
    )
    reach = {"recipients": people}
    if groups:
        reach["groups"] = groups
        reach["members"] = len(members)
    return reach


def _im_send(ctx, args: dict) -> dict:
    recipients = _resolve_recipients(ctx, args["to"])
    message = _im_message(ctx, args, recipients)
    message.idempotency_key = ctx.key
    message.save(force_insert=True)
    # Handed to a delivery channel once the effect is recorded (the executor's transaction);
    # the connectors' scheduled sweep picks up any message whose delivery was lost. A message
    # no channel can deliver (it could when the call was confirmed) is failed now, and the
    # result says why.
    if not delivery.message_deliver(message):
        message.refresh_from_db(fields=["status", "reason"])
    # How many people each group reached, for the sentence a person reads ("12 people in
    # All staff"); the stored message keeps what delivery needs.
    shown = [
        {**item, "people": _group_reach(ctx.run.organization_id, item["group"])["people"]}
        if "group" in item
        else item
        for item in recipients
    ]
    result = {"message_id": message.pk, "recipients": shown, "status": message.status}
    if message.reason:
        result["reason"] = message.reason
    return result


register(
    Tool(
        name="im_send",
        description="Send an IM message to members (names, emails or ids) or groups "
        "('group:<name>').",
        parameters={
            "type": "object",
            "required": ["to", "text"],
            "additionalProperties": False,
            "properties": {
                "to": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": 200,
                    "items": {"type": ["string", "integer"]},
                },
                "text": {"type": "string", "minLength": 1, "maxLength": 4000},
            },
        },
        risk="medium",
        side_effect="internal",
        handler=_im_send,
        risk_for=_recipients_risk,
        preflight=_im_send_preflight,
    )
)


# --- HTTP -----------------------------------------------------------------------------------


def host_allowed(url: str, allowed: list[str]) -> bool:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return False
    host = parts.hostname.lower()
    port = f":{parts.port}" if parts.port else ""
    for entry in allowed:
        entry = entry.lower()
        if entry.startswith("."):
            if host.endswith(entry) or host + port == entry[1:]:
                return True
        elif entry in (host, host + port):
            return True
    return False


def _http_request(ctx, args: dict) -> dict:
    allowed = list(ctx.rule.get("allowed_hosts", []))
    if not host_allowed(args["url"], allowed):
        raise ToolFailed(
            "host_not_allowed", f"{urlsplit(args['url']).hostname!r} is not an allowed host"
        )
    # The rule's host names say where this agent may go; the outbound guard says which
    # addresses any agent may reach: an allowed name resolving to link-local or cloud metadata
    # is always refused, to loopback or a private network unless CADRE_AGENT_HTTP_ALLOWED_HOSTS
    # admits it, and the socket connects to the address that was checked (no DNS rebinding).
    try:
        with outbound.http_client(
            allow_setting=outbound.AGENT_HTTP,
            timeout=float(ctx.rule.get("timeout_seconds", 10)),
        ) as client:
            response = client.request(
                args.get("method", "GET"),
                args["url"],
                json=args.get("body"),
                headers={"Idempotency-Key": ctx.key, "User-Agent": "Cadre-Agent/1"},
            )
    except outbound.OutboundRefused as refused:
        raise ToolFailed("host_not_allowed", refused.message) from None
    except httpx.HTTPError as error:
        raise ToolFailed("http_error", str(error)) from None
    return {"status": response.status_code, "body": response.text[:20000]}


def _http_audit_target(ctx, args: dict, result: dict | None) -> dict:
    """Method, host and path: never the query string or credentials (they may hold secrets)."""
    parts = urlsplit(args["url"])
    try:
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        port = ""
    target = {
        "method": args.get("method", "GET"),
        "host": f"{parts.hostname or ''}{port}",
        "path": parts.path or "/",
    }
    if result is not None:
        target["status"] = result.get("status")
    return target


register(
    Tool(
        name="http_request",
        description="Make an HTTP request to an allow-listed host.",
        parameters={
            "type": "object",
            "required": ["url"],
            "additionalProperties": False,
            "properties": {
                "method": {"type": "string", "enum": ["GET", "POST", "PUT"]},
                "url": {"type": "string", "maxLength": 2000},
                "body": {"type": ["object", "array", "null"]},
            },
        },
        risk="medium",
        side_effect="external",
        handler=_http_request,
        audit_target=_http_audit_target,
    )
)


# --- tasks ----------------------------------------------------------------------------------


def _task_create(ctx, args: dict) -> dict:
    due = None
    if args.get("due_at"):
        due = parse_datetime(args["due_at"].replace(" ", "T"))
        if due is None:
            raise ToolFailed("bad_date", f"cannot read the date {args['due_at']!r}")
        if timezone.is_naive(due):
            due = timezone.make_aware(due, timezone.get_current_timezone())
    task = AgentTask.objects.create(
        organization_id=ctx.run.organization_id,
        agent=ctx.agent,
        member_id=ctx.run.member_id,
        run=ctx.run,
        title=args["title"][:300],
        notes=args.get("notes", ""),
        due_at=due,
        idempotency_key=ctx.key,
    )
    return {
        "task_id": task.pk,
        "title": task.title,
        "due_at": due.isoformat() if isinstance(due, datetime) else None,
    }


def _task_audit_target(ctx, args: dict, result: dict | None) -> dict:
    target = {"title": args["title"][:300], "assignee": ctx.run.member_id}
    if result is not None:
        target["task_id"] = result.get("task_id")
    return target


register(
    Tool(
        name="task_create",
        description="Create a task or reminder for the member.",
        parameters={
            "type": "object",
            "required": ["title"],
            "additionalProperties": False,
            "properties": {
                "title": {"type": "string", "minLength": 1, "maxLength": 300},
                "notes": {"type": "string", "maxLength": 4000},
                "due_at": {"type": "string"},
            },
        },
        risk="low",
        side_effect="internal",
        handler=_task_create,
        audit_target=_task_audit_target,
    )
)


# --- control tools (the runtime pauses the run) -----------------------------------------------

register(
    Tool(
        name="await_event",
        description="Pause until an external event with this key arrives (or the timeout passes).",
        parameters={
            "type": "object",
            "required": ["key"],
            "additionalProperties": False,
            "properties": {
                "key": {"type": "string", "minLength": 1, "maxLength": 180},
                "timeout_seconds": {"type": "integer", "minimum": 1, "maximum": 30 * 86400},
                "on_timeout": {"type": "string", "enum": ["fail", "continue", "cancel"]},
            },
        },
        risk="low",
        side_effect="none",
        control=True,
    )
)
register(
    Tool(
        name="delegate",
        description="Ask another agent (by id) to do something; its answer comes back to you. "
        "Only the message and the memories you list are shared.",
        parameters={
            "type": "object",
            "required": ["agent", "message"],
            "additionalProperties": False,
            "properties": {
                "agent": {"type": "integer"},
                "message": {"type": "string", "minLength": 1, "maxLength": 8000},
                "share_memories": {"type": "array", "maxItems": 20, "items": {"type": "integer"}},
            },
        },
        risk="medium",
        side_effect="internal",
        control=True,
    )
)


# --- subscriptions ----------------------------------------------------------------------------


# Not named "publish": governance's risk rules read that word in a tool's name as a send
# outside the organization; this stays inside it, between the organization's own agents.
register(
    Tool(
        name="notify_subscribers",
        description="Publish a structured message to the agents that subscribe to you: a "
        "topic, a summary and optional data. Only the memories you list are shared (never "
        "your member's personal ones).",
        parameters={
            "type": "object",
            "required": ["topic", "summary"],
            "additionalProperties": False,
            "properties": {
                "topic": {"type": "string", "minLength": 1, "maxLength": 100},
                "summary": {"type": "string", "minLength": 1, "maxLength": 4000},
                "data": {"type": "object"},
                "share_memories": {"type": "array", "maxItems": 20, "items": {"type": "integer"}},
            },
        },
        risk="medium",
        side_effect="internal",
        handler=publish,
    )
)
