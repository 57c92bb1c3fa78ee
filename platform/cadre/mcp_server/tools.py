"""What each MCP tool and resource does, in Django terms: the same serializers, services and
selectors as the REST API, for the actor of the calling API key."""

from __future__ import annotations

import base64
import uuid

from django.http import Http404
from django.utils.translation import gettext

from cadre.agents.models import Agent
from cadre.errors import InvalidInput, NotFound, NotPermitted
from cadre.governance import confirmations
from cadre.governance.masking.engine import mask
from cadre.governance.models import Confirmation
from cadre.governance.risk import LEVELS, RiskAssessment
from cadre.memory import selectors as memory_selectors
from cadre.memory import services as memory_services
from cadre.memory.api.deletion import DeletionReportSerializer
from cadre.memory.api.serializers import (
    FeedbackRequestSerializer,
    MemoryCreatedSerializer,
    MemoryCreateSerializer,
    MemorySerializer,
    SearchRequestSerializer,
)
from hub import selectors as hub_selectors
from hub.integrity import IntegrityError
from hub.recall import verified_files

# Text files of a skill are returned as text; anything else (or larger) as base64.
MAX_TEXT_FILE_BYTES = 256 * 1024


def _valid(serializer_class, data: dict) -> dict:
    serializer = serializer_class(data={k: v for k, v in data.items() if v is not None})
    if not serializer.is_valid():
        raise InvalidInput(gettext("Invalid arguments."), details=serializer.errors)
    return serializer.validated_data


def _masked(actor, text: str) -> str:
    """Text on its way out of Cadre, through the organization's masking policy."""
    return mask(text or "", organization=actor.organization).text if text else text


def _memory_out(actor, data: dict) -> dict:
    return {**data, "content": _masked(actor, data.get("content", ""))}


def _need_memory(actor, *, write: bool) -> None:
    if not memory_selectors.can_read_memory(actor):
        raise NotPermitted(gettext("This API key needs the 'memory:read' scope."))
    if write and not memory_selectors.can_write_memory(actor):
        raise NotPermitted(gettext("This API key needs the 'memory:write' scope."))


# --- memory ---------------------------------------------------------------------------------


def memory_search(actor, **arguments) -> dict:
    _need_memory(actor, write=False)
    data = _valid(SearchRequestSerializer, arguments)
    result = memory_selectors.memory_search(
        actor=actor,
        query=data["query"],
        top_k=data["top_k"],
        scope_keys=data.get("scopes"),
        kinds=data.get("kinds"),
        tags=data.get("tags"),
        conversation_id=data.get("conversation_id"),
        force=data["force"],
    )
    return {
        "hits": [
            {
                "memory": _memory_out(actor, MemorySerializer(hit.memory).data),
                "score": hit.score,
            }
            for hit in result.hits
        ],
        "scope_keys": result.scope_keys,
    }


def memory_add(actor, *, client: str = "", **arguments) -> dict:
    _need_memory(actor, write=True)
    data = _valid(MemoryCreateSerializer, arguments)
    if not data.get("content"):
        raise InvalidInput(
            gettext("Send the memory's content."), details={"content": ["Required."]}
        )
    # Provenance names the outside client and the key it used.
    source_ref = {
        **(data.get("source_ref") or {}),
        "via": "mcp",
        "client": client[:100],
        "api_key": actor.api_key.prefix,
    }
    memory = memory_services.memory_add(
        actor=actor,
        scope=data["scope"],
        kind=data["kind"],
        content=data["content"],
        source_kind=data["source_kind"],
        conversation_id=data.get("conversation_id", ""),
        confidence=data["confidence"],
        tags=data.get("tags"),
        source_ref=source_ref,
        **({"scope_id": data["scope_id"]} if data.get("scope_id") is not None else {}),
    )
    return dict(MemoryCreatedSerializer(memory).data)


def memory_feedback(actor, **arguments) -> dict:
    _need_memory(actor, write=True)
    data = _valid(FeedbackRequestSerializer, arguments)
    result = memory_services.memory_feedback(
        actor=actor,
        text=data["text"],
        scope_keys=data.get("scopes"),
        conversation_id=data.get("conversation_id"),
    )
    return {
        "statement": _masked(actor, result.statement),
        "created": [_memory_out(actor, MemorySerializer(m).data) for m in result.created],
        "superseded": [_memory_out(actor, MemorySerializer(m).data) for m in result.superseded],
        "outcome": result.outcome,
        "message": _masked(actor, result.message),
    }


def memory_delete(actor, *, memory_id: int, reason: str = "") -> dict:
    _need_memory(actor, write=True)
    memory = memory_selectors.memory_get_for_deletion(actor, memory_id)
    memory = memory_services.memory_delete(actor=actor, memory=memory, reason=reason)
    return dict(DeletionReportSerializer(memory_services.deletion_report(memory)).data)


# --- skills ---------------------------------------------------------------------------------


def _need_hub(actor) -> None:
    if not actor.has("skill.view"):
        raise NotPermitted(gettext("This API key needs the 'hub:read' scope."))


def skill_search(actor, *, query: str, limit: int = 10) -> dict:
    _need_hub(actor)
    rows = hub_selectors.search(actor, query, limit=limit)
    latest = hub_selectors.annotate_latest([package for package, _ in rows])
    return {
        "skills": [
            {
                "name": package.full_name,
                "summary": package.summary,
                "latest": latest[package.pk].version if package.pk in latest else None,
                "score": score,
            }
            for package, score in rows
        ]
    }


def skill_get(actor, *, name: str, version: str = "latest") -> dict:
    """A published version's SKILL.md and files, verified against the Hub's signature first."""
    _need_hub(actor)
    handle, package_name = hub_selectors.parse_full_name(name)
    package = hub_selectors.package_get(actor, handle, package_name)
    found = hub_selectors.resolve_version(package, version)
    try:
        files = verified_files(package, found)
    except IntegrityError as refused:
        raise InvalidInput(str(refused), code="integrity_failed") from None
    out = []
    for path, content in sorted(files.items()):
        try:
            if len(content) > MAX_TEXT_FILE_BYTES:
                raise UnicodeDecodeError("utf-8", b"", 0, 1, "too large for text")
            out.append({"path": path, "text": content.decode("utf-8")})
        except UnicodeDecodeError:
            out.append({"path": path, "base64": base64.b64encode(content).decode("ascii")})
    skill_md = next((f["text"] for f in out if f["path"] == "SKILL.md" and "text" in f), "")
    return {
        "name": package.full_name,
        "version": found.version,
        "fingerprint": found.fingerprint,
        "verified": True,
        "skill_md": skill_md,
        "files": out,
    }


# --- confirmations --------------------------------------------------------------------------


def _confirmation_out(actor, confirmation: Confirmation, request_key: str) -> dict:
    return {
        "confirmation_id": confirmation.pk,
        "request_key": request_key,
        "status": confirmation.status,
        "summary": _masked(actor, confirmation.summary),
        "expires_at": confirmation.expires_at.isoformat(),
        "decided_at": confirmation.decided_at.isoformat() if confirmation.decided_at else None,
    }


# A confirmation names its tool in 64 characters (governance's Confirmation.tool).
MAX_ACTION_NAME = 64


def _confirmation_key(actor, request_key: str) -> str:
    return f"mcp:{actor.organization.pk}:{actor.api_key.pk}:{request_key}"[:120]


def confirmation_request(
    actor,
    *,
    action: str,
    arguments: dict | None = None,
    risk: str = "high",
    reason: str = "",
    request_key: str = "",
) -> dict:
    """Raise (or, with the same request_key, find again) a confirmation for a person."""
    if not actor.has("chat.use"):
        raise NotPermitted(gettext("This API key needs the 'agents:run' scope."))
    action = (action or "").strip()
    if not action:
        raise InvalidInput(
            gettext("Name the action to approve."), details={"action": ["Required."]}
        )
    if len(action) > MAX_ACTION_NAME:
        raise InvalidInput(
            gettext("The action's name is at most %(max_action_name)s characters.")
            % {"max_action_name": MAX_ACTION_NAME},
            details={"action": [f"At most {MAX_ACTION_NAME} characters."]},
        )
    if risk not in LEVELS:
        raise InvalidInput(
            gettext("risk must be one of: %(value)s.") % {"value": ", ".join(LEVELS)},
            details={"risk": [risk]},
        )
    request_key = (request_key or uuid.uuid4().hex)[:64]
    confirmation = confirmations.confirmation_create(
        organization=actor.organization,
        tool=action,
        arguments=arguments or {},
        assessment=RiskAssessment(
            level=risk, reasons=[reason[:500] or "an external agent asked over MCP"]
        ),
        idempotency_key=_confirmation_key(actor, request_key),
        requester=actor.member,
        actor=actor,
    )
    return _confirmation_out(actor, confirmation, request_key)


def confirmation_status(actor, *, request_key: str) -> dict:
    confirmation = Confirmation.objects.filter(
        organization=actor.organization, idempotency_key=_confirmation_key(actor, request_key)
    ).first()
    if confirmation is None:
        raise NotFound(gettext("No confirmation with this request_key."))
    return _confirmation_out(actor, confirmation, request_key)


# --- agent templates (resources) ------------------------------------------------------------


def agent_document(actor, *, agent_id: str, document: str) -> str:
    """SOP, AGENT.md or USER.md of an agent the key may see (others: not found)."""
    if not str(agent_id).isdigit():
        raise NotFound(gettext("No such agent."))
    agent = (
        Agent.objects.restrict(actor, "view").select_related("version").filter(pk=agent_id).first()
    )
    if agent is None:
        raise NotFound(gettext("No such agent."))
    text = {
        "sop": agent.version.sop,
        "agent_md": agent.version.agent_md,
        "user_md": agent.user_md or agent.version.user_md_template,
    }[document]
    return _masked(actor, text)


def not_found_from(error: Exception) -> Exception:
    return NotFound(str(error) or gettext("Not found.")) if isinstance(error, Http404) else error
