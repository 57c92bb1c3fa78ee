"""Session compaction: when a session's history passes its share of the template's context
budget, the older turns become a `SessionSummary` whose items keep their provenance — what the
user required, what the model assumed, what a tool returned, which plans were superseded — and
the turns (run ids) each comes from. The next model call reads the summary and the recent turns
(runtime/steps/assembly.recent_turns).

The summary is written by memory's model (CADRE_MEMORY_PROVIDER_*) when one is configured,
else by the template's own model when it is not the offline one, else by rules — labelled
"rules (offline)" so nobody mistakes it for a model's reading. The text is the model's side
of the conversation (the session's placeholders), which is what the summary is sent back to.
"""

from __future__ import annotations

import json
import logging
import re

from django.db import transaction

from cadre.agents import providers
from cadre.agents.models import Run, SessionSummary, Step
from cadre.agents.runtime.records.grants import DEFAULT_CONTEXT_TOKENS
from cadre.agents.runtime.records.runs import model_side
from cadre.llm import ModelProvider, ProviderError, chat_json, estimate_tokens, provider_for
from cadre.llm.metering import purpose
from cadre.llm.offline import strip_notice
from cadre.memory.extraction import memory_model

logger = logging.getLogger(__name__)

Label = SessionSummary.Label
HISTORY_SHARE = 0.5  # of the template's context_tokens, for the turns (and summary) together
KEEP_RECENT = 4  # turns always sent as they are
ITEM_CHARS = 300  # a user requirement
SHORT_ITEM_CHARS = 160  # what a tool returned or the model said
SUMMARY_SHARE = 0.5  # of the history budget: the most the summary itself may take
# When the summary passes its budget, items go in this order, oldest first; the user's
# requirements go last.
DROP_ORDER = ("model_assumption", "superseded_plan", "tool_fact", "user_requirement")
OFFLINE_METHOD = "rules (offline)"
TURN_OVERHEAD_TOKENS = 8

# "Actually, let's …", "instead", "scratch that", "改成…": the employee replaces an earlier plan.
_CHANGE_OF_PLAN = re.compile(
    r"^\s*(?:no|nope|actually|wait|correction|change of plan)\b|\binstead\b|"
    r"\b(?:scratch|forget|cancel|ignore) (?:that|this|it|the (?:plan|previous|last))\b|"
    r"\bchange(?:d)? (?:the|my) (?:plan|mind)\b|不对|改成|改为|换成|取消|算了|不要了",
    re.IGNORECASE,
)
_QUESTION = re.compile(r"[?？]\s*$")
_SENTENCE = re.compile(r"(?<=[.!?。！？])\s+")
_WORD = re.compile(r"[a-z0-9]{3,}|[\u3400-\u9fff]", re.IGNORECASE)
SUPERSEDE_OVERLAP = 0.2


def history_budget(run: Run, config: dict) -> int:
    if config.get("history_tokens"):
        return int(config["history_tokens"])
    context = int((run.version.model_settings or {}).get("context_tokens", DEFAULT_CONTEXT_TOKENS))
    return int(context * float(config.get("history_share", HISTORY_SHARE)))


def latest_summary(session_id, *, before=None) -> SessionSummary | None:
    """The session's newest summary (made before the run created at `before`, if given)."""
    summaries = SessionSummary.objects.filter(session_id=session_id).select_related("through_run")
    if before is not None:
        summaries = summaries.filter(run__created_at__lt=before)
    return summaries.order_by("-created_at", "-pk").first()


def _turns_after(run: Run, summary: SessionSummary | None) -> list[Run]:
    runs = Run.objects.filter(
        session_id=run.session_id, status=Run.Status.COMPLETED, created_at__lte=run.created_at
    )
    if summary is not None:
        runs = runs.filter(created_at__gt=summary.through_run.created_at)
    return list(runs.order_by("created_at", "pk").only("pk", "input", "output", "created_at"))


def turn_tokens(turn: Run) -> int:
    return (
        estimate_tokens(model_side(turn.input))
        + estimate_tokens(model_side(turn.output))
        + TURN_OVERHEAD_TOKENS
    )


def _clip(text: str, limit: int = ITEM_CHARS) -> str:
    text = " ".join(str(text or "").split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _tool_facts(run_ids: list[int]) -> dict[int, list[str]]:
    facts: dict[int, list[str]] = {}
    steps = Step.objects.filter(
        run_id__in=run_ids,
        kind=Step.Kind.TOOL_CALL,
        status__in=[Step.Status.COMPLETED, Step.Status.FAILED],  # failed: its effect failed
    ).order_by("run_id", "index")
    for step in steps:
        output = step.output
        if isinstance(output, dict) and output.get("error"):
            text = f"{step.name} failed: {output.get('message') or output['error']}"
        else:
            text = f"{step.name} returned " + json.dumps(output, ensure_ascii=False, default=str)
        facts.setdefault(step.run_id, []).append(_clip(text))
    return facts


def _first_sentence(text: str) -> str:
    text = strip_notice(" ".join(str(text or "").split()))
    return _SENTENCE.split(text, maxsplit=1)[0] if text else ""


def _words(text: str) -> set[str]:
    return {word.lower() for word in _WORD.findall(text or "")}


def _overlap(a: str, b: str) -> float:
    left, right = _words(a), _words(b)
    return len(left & right) / len(left | right) if left and right else 0.0


# --- the rules ---------------------------------------------------------------------------


def rule_items(previous: list[dict], turns: list[dict]) -> list[dict]:
    """Items from the previous summary's and each turn's parts, by where each part came from;
    a change of plan marks the earlier requirements and assumptions it replaces superseded."""
    items = [dict(item) for item in previous]
    for turn in turns:
        user = turn["user"].strip()
        if user and _CHANGE_OF_PLAN.search(user):
            earlier = [
                item
                for item in items
                if item["label"] in (Label.USER_REQUIREMENT, Label.MODEL_ASSUMPTION)
            ]
            replaced = [
                item for item in earlier if _overlap(item["text"], user) >= SUPERSEDE_OVERLAP
            ]
            if not replaced and earlier:  # "no, do it the other way": the last plan
                last_turn = earlier[-1]["turn_ids"][-1]
                replaced = [item for item in earlier if last_turn in item["turn_ids"]]
            for item in replaced:
                item["label"] = Label.SUPERSEDED_PLAN
                item["superseded_by"] = turn["id"]
        if user and not _QUESTION.search(user):  # a question's answer is what is kept
            items.append(
                {"label": Label.USER_REQUIREMENT, "text": _clip(user), "turn_ids": [turn["id"]]}
            )
        for fact in turn["tool_facts"]:
            items.append(
                {
                    "label": Label.TOOL_FACT,
                    "text": _clip(fact, SHORT_ITEM_CHARS),
                    "turn_ids": [turn["id"]],
                }
            )
        said = _first_sentence(turn["assistant"])
        if said:
            items.append(
                {
                    "label": Label.MODEL_ASSUMPTION,
                    "text": _clip(said, SHORT_ITEM_CHARS),
                    "turn_ids": [turn["id"]],
                }
            )
    return items


# --- the model ---------------------------------------------------------------------------

SUMMARY_PROMPT = """You compact an assistant's conversation history. Given the PREVIOUS
SUMMARY items and the TURNS (each with its id), answer with one JSON object {"items": [{"label":
..., "text": one short sentence, "turn_ids": [ids of the turns it comes from]}]} covering
everything still needed to continue the conversation. Labels: "user_requirement" (what the user
asked for or stated), "model_assumption" (what the assistant assumed or concluded without a
tool), "tool_fact" (what a tool returned), "superseded_plan" (a requirement or plan that a later
turn replaced). Keep the user's requirements; never invent facts."""


def summary_model(run: Run) -> ModelProvider | None:
    """Memory's model, else the template's own model unless it is the offline provider."""
    provider = memory_model()
    if provider is not None:
        return provider
    try:
        config, settings = providers.resolve(run.version.model_settings, run.organization_id)
        provider = provider_for(settings, config)
    except (providers.ProviderUnavailable, ProviderError):
        return None
    return None if provider.kind == "offline" else provider


def model_items(provider: ModelProvider, previous: list[dict], turns: list[dict]) -> list[dict]:
    listing = ["PREVIOUS SUMMARY:"]
    listing += [f"- [{i['label']}] (turns {i['turn_ids']}) {i['text']}" for i in previous] or [
        "(none)"
    ]
    listing.append("TURNS:")
    for turn in turns:
        listing.append(f"TURN {turn['id']}")
        listing.append(f"USER: {turn['user']}")
        listing += [f"TOOL: {fact}" for fact in turn["tool_facts"]]
        listing.append(f"ASSISTANT: {turn['assistant']}")
    with purpose("compaction"):
        answer = chat_json(provider, SUMMARY_PROMPT, "\n".join(listing))
    known = {turn["id"] for turn in turns} | {i for item in previous for i in item["turn_ids"]}
    items = []
    for entry in answer.get("items") or []:
        if not isinstance(entry, dict):
            continue
        label, text = entry.get("label"), _clip(entry.get("text", ""))
        try:
            turn_ids = [int(i) for i in entry.get("turn_ids") or []]
        except (TypeError, ValueError):
            continue
        turn_ids = [i for i in turn_ids if i in known]
        if label in Label.values and text and turn_ids:
            items.append({"label": label, "text": text, "turn_ids": turn_ids})
    if not items:
        raise ProviderError("the model's summary has no usable item")
    return items


# --- the summary -------------------------------------------------------------------------


def render(items: list[dict], covered: list[int], method: str, omitted: int = 0) -> str:
    how = "by offline rules, not by a model" if method.startswith("rules") else f"by {method}"
    span = (
        f"turns {covered[0]} through {covered[-1]}, {len(covered)} in all"
        if len(covered) > 2
        else "turn " + " and ".join(map(str, covered))
    )
    lines = [
        f"Summary of the earlier conversation ({span}; summarised {how}). "
        "Labels say where each point came from."
        + (f" {omitted} older point(s) left out for length." if omitted else "")
    ]
    for item in items:
        turns = ", ".join(map(str, item["turn_ids"]))
        lines.append(f"- [{Label(item['label']).label.lower()}] {item['text']} (turn {turns})")
    return "\n".join(lines)


def within(
    items: list[dict], covered: list[int], method: str, budget: int
) -> tuple[list[dict], int, str]:
    """(items, how many were left out, rendered text) for a summary of at most `budget`
    tokens, dropping the oldest item of the least needed label first (DROP_ORDER)."""
    kept = list(items)
    text = render(kept, covered, method)
    omitted = 0
    while kept and estimate_tokens(text) > budget:
        victim = next(item for label in DROP_ORDER for item in kept if item["label"] == label)
        kept.remove(victim)
        omitted += 1
        text = render(kept, covered, method, omitted)
    return kept, omitted, text


def session_compact(run: Run, config: dict) -> dict:
    """Summarise the session's older turns into a SessionSummary when the history passes the
    budget; a no-op below it, and for a run that already compacted (idempotent)."""
    done = SessionSummary.objects.filter(run=run).first()
    if done is not None:
        return {"compacted": True, "summary": done.pk, "method": done.method}
    previous = latest_summary(run.session_id)
    turns = _turns_after(run, previous)
    budget = history_budget(run, config)
    tokens = sum(turn_tokens(turn) for turn in turns) + (
        estimate_tokens(previous.text) if previous else 0
    )
    keep = max(1, int(config.get("keep_recent", KEEP_RECENT)))
    if tokens <= budget or len(turns) <= keep:
        return {"compacted": False, "tokens": tokens, "budget": budget}
    covered_runs = turns[:-keep]
    facts = _tool_facts([turn.pk for turn in covered_runs])
    parts = [
        {
            "id": turn.pk,
            "user": model_side(turn.input),
            "assistant": model_side(turn.output),
            "tool_facts": facts.get(turn.pk, []),
        }
        for turn in covered_runs
    ]
    previous_items = list(previous.items) if previous else []
    provider = summary_model(run)
    method = OFFLINE_METHOD
    if provider is not None:
        try:
            items = model_items(provider, previous_items, parts)
            method = f"model:{provider.model}"
        except ProviderError as error:
            logger.warning("session summary by model failed for run %s: %s", run.pk, error)
            items = rule_items(previous_items, parts)
            method = f"rules (model failed: {str(error)[:80]})"
    else:
        items = rule_items(previous_items, parts)
    covered = [*(previous.covered_run_ids if previous else []), *(t.pk for t in covered_runs)]
    summary_budget = int(budget * float(config.get("summary_share", SUMMARY_SHARE)))
    items, omitted, text = within(items, covered, method, summary_budget)
    with transaction.atomic():
        summary, _created = SessionSummary.objects.get_or_create(
            run=run,
            defaults={
                "organization_id": run.organization_id,
                "session_id": run.session_id,
                "through_run": covered_runs[-1],
                "covered_run_ids": covered,
                "items": items,
                "text": text,
                "method": method,
                "tokens_before": tokens,
                "tokens_after": estimate_tokens(text)
                + sum(turn_tokens(turn) for turn in turns[-keep:]),
            },
        )
    return {
        "compacted": True,
        "summary": summary.pk,
        "method": summary.method,
        "covered": covered,
        "tokens_before": summary.tokens_before,
        "tokens_after": summary.tokens_after,
        "omitted": omitted,
        "budget": budget,
    }
