"""Replaying one evaluation case on one side (baseline or candidate), with no effect anywhere.

The turn is rebuilt as the runtime builds it — the input policy stage, the template's AGENT.md,
SOP, USER.md and skills, the case's conversation, the memories that existed at the case's
`as_of` (retrieved under the case's scopes with the side's embedding model, through the
memory gate as the case's author: a replay never reads what its author may not), fitted by
`context.fit` — and sent to the side's model provider. Tools never act: a call the case
recorded gets its recorded result, any other call gets a stub and is flagged, and a call the
template does not allow is refused as the runtime refuses it. Nothing is written: no run, no
step, no context record, no policy decision — only the usage records of its model calls,
which are metered like any other (services.replay_account).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field

from django.utils.translation import gettext

from cadre.agents import providers
from cadre.agents.evaluation.checks import reply_checks
from cadre.agents.hooks.registry import hooks_for
from cadre.agents.models import TemplateVersion
from cadre.agents.placeholders import render_placeholders
from cadre.agents.runtime.records.grants import grants_for_version, retrieval_kinds
from cadre.agents.runtime.steps import context as context_assembly
from cadre.agents.runtime.steps.assembly import language_line
from cadre.agents.tools import registry as tool_registry
from cadre.errors import InvalidInput
from cadre.governance.masking.engine import mask
from cadre.governance.masking.vault import EphemeralVault
from cadre.governance.policy import resolve_chain, stage_handled
from cadre.governance.policy.chain import evaluate
from cadre.identifiers import parse_pk
from cadre.llm import BudgetExceeded, ModelProvider, ProviderError, provider_for
from cadre.memory import selectors as memory_selectors
from cadre.memory.models import EmbeddingModel
from cadre.tenancy.actors import Actor, member_actor

logger = logging.getLogger(__name__)

DEFAULT_CONTEXT_TOKENS = 8_000
DEFAULT_TOP_K = 5
MAX_MODEL_CALLS = 6
RECALL_K = 10  # recall@k of a case's expected memories, whatever the template retrieves
MAX_TOP_K = 100  # the memory gate's own limit
SIDE_KINDS = ("current", "template_version", "model", "embedding")


@dataclass
class Side:
    """What one side of a comparison runs: a template version (or none), model settings, an
    embedding model for retrieval (None: the active one) and the provider built from them."""

    spec: dict
    version: TemplateVersion | None
    model_settings: dict
    provider: ModelProvider
    prices: dict = field(default_factory=dict)
    embedding_model: object | None = None
    # The policy chain, resolved once per replay, and its input verdicts by text: both sides
    # of a comparison usually share a chain, and a verdict depends on the chain and the text.
    chain: object | None = None
    verdicts: dict = field(default_factory=dict)

    @property
    def label(self) -> str:
        kind = self.spec.get("kind", "current")
        if kind == "template_version" and self.version is not None:
            return f"version {self.version.number}"
        if kind == "model":
            return (
                f"model {self.model_settings.get('model') or self.model_settings.get('provider')}"
            )
        if kind == "embedding":
            return f"embedding {self.spec.get('embedding_model')}"
        return "current"


def current_version(suite) -> TemplateVersion | None:
    if suite.template_id is None:
        return None
    return (
        TemplateVersion.objects.filter(
            template_id=suite.template_id, status=TemplateVersion.Status.PUBLISHED
        )
        .order_by("-number")
        .first()
    )


def clean_side(suite, spec: dict | None) -> dict:
    """A side's spec checked against the suite's organization (InvalidInput names what is
    wrong); returns the spec as stored."""
    spec = dict(spec or {"kind": "current"})
    try:  # what PostgreSQL's jsonb cannot hold: NUL, a lone surrogate, an infinite number
        text = json.dumps(spec, ensure_ascii=False, allow_nan=False, default=str)
        text.encode("utf-8")
    except (ValueError, UnicodeEncodeError, RecursionError):
        text = "\x00"
    if "\x00" in text or "\\u0000" in text:
        raise InvalidInput(
            gettext("The side holds text or a number that cannot be stored."), code="invalid_side"
        )
    kind = spec.get("kind", "current")
    if kind not in SIDE_KINDS:
        raise InvalidInput(
            gettext("kind must be one of %(kinds)s.") % {"kinds": ", ".join(SIDE_KINDS)},
            code="invalid_side",
            details={"kind": [gettext("Unknown kind %(kind)r.") % {"kind": kind}]},
        )
    if kind == "template_version":
        version = TemplateVersion.objects.filter(
            pk=parse_pk(spec.get("version")) if isinstance(spec.get("version"), int) else None,
            organization_id=suite.organization_id,
        ).first()
        if version is None or (suite.template_id and version.template_id != suite.template_id):
            raise InvalidInput(
                gettext("version must be a version of the suite's template."), code="invalid_side",
                details={"version": ["Not a version of this suite's template."]},
            )  # fmt: skip
        return {"kind": kind, "version": version.pk}
    if kind == "model":
        settings = spec.get("model_settings")
        if not isinstance(settings, dict) or not (
            settings.get("model") or settings.get("provider")
        ):
            raise InvalidInput(
                gettext("model_settings must name a model or a provider."), code="invalid_side",
                details={"model_settings": ["Name a model or a provider."]},
            )  # fmt: skip
        return {"kind": kind, "model_settings": settings}
    if kind == "embedding":
        name = spec.get("embedding_model")
        if not isinstance(name, str) or not EmbeddingModel.objects.filter(pk=name).exists():
            raise InvalidInput(
                gettext("embedding_model must name a known embedding model."), code="invalid_side",
                details={"embedding_model": ["Unknown embedding model."]},
            )  # fmt: skip
        return {"kind": kind, "embedding_model": name}
    return {"kind": "current"}


def resolve_side(suite, spec: dict) -> Side:
    kind = spec.get("kind", "current")
    version = current_version(suite)
    embedding_model = None
    if kind == "template_version":
        version = TemplateVersion.objects.get(pk=spec["version"], organization=suite.organization)
    settings = dict(version.model_settings or {}) if version is not None else {}
    if kind == "model":
        settings = {**settings, **spec["model_settings"]}
    if kind == "embedding":
        embedding_model = EmbeddingModel.objects.get(pk=spec["embedding_model"])
    settings.setdefault("provider", "offline")
    config, settings = providers.resolve(settings, suite.organization_id)
    provider = provider_for(settings, config)

    return Side(
        chain=resolve_chain(suite.organization, getattr(version, "policy_chain_id", None)),
        spec=spec,
        version=version,
        model_settings=settings,
        provider=provider,
        prices=(config.prices if config else {}) or {},
        embedding_model=embedding_model,
    )


# --- one case --------------------------------------------------------------------------------


class RecordedTools:
    """The case's recorded tool results, answered in place of the tools: the same call (name and
    arguments) first, else the next unused result of that tool; anything else is stubbed."""

    def __init__(self, recorded: list[dict]):
        self.unused = [dict(entry) for entry in recorded or [] if isinstance(entry, dict)]

    def answer(self, name: str, arguments: dict) -> tuple[dict, bool]:
        same = [e for e in self.unused if e.get("name") == name and e.get("arguments") == arguments]
        named = same or [e for e in self.unused if e.get("name") == name]
        if named:
            self.unused.remove(named[0])
            result = named[0].get("result")
            return (result if isinstance(result, dict) else {"result": result}), False
        return {
            "error": {
                "code": "not_recorded",
                "message": "replay: this call has no recorded result; the tool was not run",
            }
        }, True


def _input_policy(side: Side, case) -> dict:
    chain = side.chain
    if not case.input_text or not stage_handled(chain, "input"):
        return {"action": "allow", "reason": "", "text": case.input_text}
    key = (tuple(chain.chain_ids), chain.version, case.member_id, case.input_text)
    if key in side.verdicts:
        return side.verdicts[key]
    result = evaluate(
        organization=case.organization,
        stage="input",
        payload=case.input_text,
        member_id=case.member_id,
        chain=chain,
        record=False,  # a replay decides nothing: no policy decision row, no audit event
    )
    text = result.payload if isinstance(result.payload, str) else case.input_text
    side.verdicts[key] = {"action": result.action, "reason": result.reason, "text": text}
    return side.verdicts[key]


def _retrieval_top_k(version) -> int | None:
    """The template's retrieval size, or None when its retrieval hook is off."""
    if version is None:
        return DEFAULT_TOP_K
    for hook, config in hooks_for(version.hooks, "assemble_context"):
        if hook.name == "memory_retrieval":
            return int(config.get("top_k", DEFAULT_TOP_K))
    return None


def case_author(case) -> Actor | None:
    """Whom a replay of `case` reads memory as: its author, as they are now (a role taken away
    since narrows the replay too). A case the system built from a person's rated turn (no
    author) reads as that person, whose turn it was; a case with neither, or whose person is
    no longer active, reads no memory."""
    member = case.created_by
    if member is None and case.source == "turn":
        member = case.member
    if member is None or not member.is_active or member.organization_id != case.organization_id:
        return None
    return member_actor(member)


def retrieve(
    case, side: Side, query: str, vault, *, top_k: int | None, author: Actor | None
) -> list[dict]:
    """The memories the turn would be given: as they were at the case's `as_of`, under its
    scopes, ranked with the side's embedding model, read through the memory gate as `author`
    (only what they may read); masked with the case's vault."""
    if not top_k or not case.scopes or not query.strip() or author is None:
        return []
    hits = memory_selectors.memory_search(
        actor=author,
        query=query,
        top_k=min(int(top_k), MAX_TOP_K),
        scope_keys=list(case.scopes),
        # The kinds the side's template retrieves (what people stated, unless it names more).
        kinds=retrieval_kinds(grants_for_version(side.version)) if side.version else None,
        as_of=case.as_of,
        force=True,  # a case's query is replayed as it is, however short
        model=side.embedding_model,  # None: the active model
    )
    return [
        {
            "id": hit.memory.pk,
            "version": hit.memory.version,
            "scope": hit.memory.scope_key,
            "rank": rank,
            "score": round(float(hit.score), 4),
            "content": mask(
                hit.memory.content, conversation=vault, organization=case.organization
            ).text,
        }
        for rank, hit in enumerate(hits, start=1)
    ]


def _recall_at_k(case, side: Side, query: str, vault, author: Actor | None) -> dict:
    """The share of the case's expected memories among the side's top RECALL_K hits (ranked
    with its embedding model, as of the case): what an embedding change is judged by."""
    expected = [m for m in case.expectations.get("expected_memories") or [] if isinstance(m, int)]
    try:
        hits = retrieve(case, side, query, vault, top_k=RECALL_K, author=author)
    except Exception as error:  # reported as a miss of every memory, with the reason
        logger.warning("evaluation replay: recall search failed for case %s: %s", case.pk, error)
        hits = []
    found = [hit["id"] for hit in hits]
    return {
        "k": RECALL_K,
        "retrieved": found,
        "recall": round(len(set(expected) & set(found)) / len(expected), 4) if expected else 1.0,
    }


def _pieces(case, version, text: str, memories: list[dict]) -> context_assembly.ContextPieces:
    skills = [
        {"name": s["package"], "description": f"version {s.get('range') or s.get('tag')}"}
        for s in (version.skills if version is not None else []) or []
        if isinstance(s, dict) and s.get("package")
    ]
    turns = [
        {"role": t["role"], "content": str(t.get("content", ""))}
        for t in case.conversation or []
        if isinstance(t, dict) and t.get("role") in ("user", "assistant", "system")
    ]
    # Filled as a run fills them (`placeholders.render_placeholders`): for the person whose turn
    # the case is, else with neutral words, so a replay sends what a run would.
    member = getattr(case, "member", None)
    return context_assembly.ContextPieces(
        agent_md=render_placeholders(version.agent_md, member) if version is not None else "",
        sop=render_placeholders(version.sop, member) if version is not None else "",
        user_md=(
            render_placeholders(version.user_md_template, member) if version is not None else ""
        ),
        skills=skills,
        memories=memories,
        turns=turns,
        input_text=text,
        language=language_line(member),
    )


def _tool_specs(version, recorded: list[dict]) -> tuple[list[dict], dict]:
    allowed = dict((version.tool_permissions if version is not None else {}) or {})
    if version is None:  # no template: the recorded tools are the ones on offer
        allowed = {e.get("name"): {} for e in recorded or [] if isinstance(e, dict)}
    specs = []
    for name in sorted(n for n in allowed if isinstance(n, str)):
        tool = tool_registry.get(name)
        specs.append(
            tool.spec()
            if tool is not None
            else {"name": name, "description": name, "parameters": {"type": "object"}}
        )
    return specs, allowed


def replay_case(case, side: Side) -> dict:
    """What `side` does with `case`: reply, memories sent, tool calls (recorded, stubbed or
    refused), the input policy's decision, usage, cost, latency and the reply checks."""
    started = time.perf_counter()
    model_seconds = 0.0
    vault = EphemeralVault()
    version = side.version
    outcome: dict = {
        "side": side.label,
        "reply": "",
        "memories": [],
        "tool_calls": [],
        "stubbed": 0,
        "policy": {"input": "allow", "tools": []},
        "usage": {"input_tokens": 0, "output_tokens": 0, "cached_input_tokens": 0},
        "cost": "0",
        "model_calls": 0,
        "error": "",
    }
    policy = _input_policy(side, case)
    outcome["policy"]["input"] = policy["action"]
    if policy["action"] in ("deny", "require_confirmation"):
        outcome["reply"] = f"[refused by policy: {policy['reason'] or 'denied'}]"
        return _finished(outcome, case, started, model_seconds)
    text = policy["text"]
    author = case_author(case)
    try:
        outcome["memories"] = retrieve(
            case, side, text, vault, top_k=_retrieval_top_k(version), author=author
        )
    except Exception as error:  # as the runtime: retrieval failing does not stop the turn
        logger.warning("evaluation replay: retrieval failed for case %s: %s", case.pk, error)
        outcome["error"] = f"retrieval: {error}"[:500]
    if (case.expectations or {}).get("expected_memories"):
        outcome["recall_at_k"] = _recall_at_k(case, side, text, vault, author)
    budget = int((side.model_settings or {}).get("context_tokens", DEFAULT_CONTEXT_TOKENS))
    order = (side.model_settings or {}).get("context_order", "stable")
    pieces = _pieces(case, version, text, outcome["memories"])
    messages, report = context_assembly.fit(pieces, budget, order=order)
    sent = set(report["sent"]["memories"])
    outcome["memories"] = [
        {k: m[k] for k in ("id", "rank", "score", "version")}
        for m in outcome["memories"]
        if m["id"] in sent
    ]
    specs, allowed = _tool_specs(version, case.tool_results)
    tools = RecordedTools(case.tool_results)
    tokens_in = tokens_out = cached = 0
    cost = 0
    for _ in range(MAX_MODEL_CALLS):
        call_started = time.perf_counter()
        try:
            result = side.provider.chat(messages, specs)
        except BudgetExceeded:
            raise  # the replay stops: its calls are refused, not recorded as model errors
        except ProviderError as error:
            outcome["error"] = f"model: {error}"[:500]
            break
        finally:
            model_seconds += time.perf_counter() - call_started
        outcome["model_calls"] += 1
        tokens_in += result.usage.input_tokens
        tokens_out += result.usage.output_tokens
        cached += result.usage.cached_input_tokens
        cost += result.usage.cost(side.prices, getattr(side.provider, "model", ""))
        if not result.tool_calls:
            outcome["reply"] = result.text
            break
        messages.append(
            {
                "role": "assistant",
                "content": result.text,
                "tool_calls": [call.as_dict() for call in result.tool_calls],
            }
        )
        for call in result.tool_calls:
            entry = {"name": call.name, "arguments": call.arguments, "source": "recorded"}
            if call.name not in allowed:
                answer = {
                    "error": {
                        "code": "tool_denied",
                        "message": f"this agent is not allowed to use {call.name!r}",
                    }
                }
                entry["source"] = "refused"
                outcome["policy"]["tools"].append({"name": call.name, "action": "deny"})
            else:
                answer, stubbed = tools.answer(call.name, call.arguments)
                if stubbed:
                    entry["source"] = "stubbed"
                    outcome["stubbed"] += 1
                outcome["policy"]["tools"].append({"name": call.name, "action": "allow"})
            outcome["tool_calls"].append(entry)
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call.id,
                    "name": call.name,
                    "content": json.dumps(answer, ensure_ascii=False, default=str),
                }
            )
    outcome["usage"] = {
        "input_tokens": tokens_in,
        "output_tokens": tokens_out,
        "cached_input_tokens": cached,
    }
    outcome["cost"] = str(cost)
    return _finished(outcome, case, started, model_seconds)


def _finished(outcome: dict, case, started: float, model_seconds: float) -> dict:
    total = time.perf_counter() - started
    outcome["latency_ms"] = round(total * 1000, 2)
    outcome["model_ms"] = round(model_seconds * 1000, 2)
    outcome["overhead_ms"] = round((total - model_seconds) * 1000, 2)
    outcome["checks"] = reply_checks(outcome, case.expectations or {})
    outcome["passed"] = outcome["checks"]["passed"]
    return outcome
