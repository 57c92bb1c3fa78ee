"""Context assembly: AGENT.md, SOP, USER.md, skills, memories and recent turns, fitted to a
token budget. Pure functions over already-loaded pieces (the runtime loads and records them).

Two orders, the same pieces kept either way (the budget decides what is sent, the order only
where it goes):
- `stable` (the default): most stable first, so providers' prompt caches serve the prefix —
  AGENT.md, SOP, USER.md, skill descriptions and bodies (by name), then standing memories (by
  id), then the session summary and recent turns, then this request's retrieved and shared
  memories and hook sections, then the input. The boundaries carry `cache_break` (see
  cadre.llm.base), where Anthropic gets its cache_control breakpoints.
- `legacy`: one system message, per-request memories ahead of the skill bodies (the order
  before prompt caching; kept for comparison, `model_settings.context_order`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from cadre.llm import estimate_tokens


@dataclass
class ContextPieces:
    agent_md: str = ""
    sop: str = ""
    user_md: str = ""
    # {"name", "description", "version"?, "body"?}; a hook section carrying "skills" (the Hub's
    # installed, verified skills) replaces these template references (see installed_skills).
    skills: list[dict] = field(default_factory=list)
    # ranked {"id", "content", "scope", "version"?, "rank"?, "score"?, "components"?}
    memories: list[dict] = field(default_factory=list)
    shared: list[dict] = field(default_factory=list)  # memories explicitly shared by a caller
    # long-lived memories sent on every turn whatever the input (the standing_memories hook),
    # {"id", "content", "scope", "version"?}; they change only when the memories do
    standing: list[dict] = field(default_factory=list)
    # memories the "retrieved" policy stage kept out: {"id", "reason", "source", …}
    withheld: list[dict] = field(default_factory=list)
    # candidates retrieval's diversity (MMR) passed over: {"id", "version", "score",
    # "components", "reason"}; None when no hook reported them (not recorded)
    passed_over: list[dict] | None = None
    sections: list[dict] = field(default_factory=list)  # extra {"title", "text"} from hooks
    turns: list[dict] = field(default_factory=list)  # oldest first {"role", "content"}
    input_text: str = ""
    # The person's language, told to the model right after AGENT.md (steps/assembly.py
    # `language_line`); empty when everyone speaks English.
    language: str = ""


def _truncate(text: str, tokens: int) -> str:
    if estimate_tokens(text) <= tokens:
        return text
    low, high = 0, len(text)
    while low < high:  # longest prefix within the budget
        middle = (low + high + 1) // 2
        if estimate_tokens(text[:middle]) <= tokens:
            low = middle
        else:
            high = middle - 1
    return text[:low] + "\n[…truncated to fit the context budget]"


def installed_skills(pieces: ContextPieces) -> tuple[list[dict], list[dict]]:
    """(skills, other sections): the skills a hook section carries (`{"skills": [...]}`, the
    Hub's `skills` hook) replace the template's bare references when there is one."""
    carried = [s for s in pieces.sections if isinstance(s.get("skills"), list)]
    others = [s for s in pieces.sections if not isinstance(s.get("skills"), list)]
    if not carried:
        return pieces.skills, others
    return [skill for section in carried for skill in section["skills"]], others


def _skill_label(skill: dict) -> str:
    return f"{skill['name']}@{skill['version']}" if skill.get("version") else skill["name"]


ORDERS = ("stable", "legacy")
# Where each block goes in the stable order: (segment, position within it).
_STABLE = {0: (0, 0), 2: (0, 1), 1: (0, 2), 3: (0, 3), 7: (0, 4), 8: (1, 0)}
_VOLATILE = 2  # retrieved and shared memories, hook sections: after the turns


def fit(
    pieces: ContextPieces, budget_tokens: int, *, order: str = "stable"
) -> tuple[list[dict], dict]:
    """Messages for the model within `budget_tokens`, and a report of what was kept.

    Priority: AGENT.md and the input (always), USER.md, SOP, skill descriptions, the bodies
    of relevant skills (the Hub hook already capped them to their share of the budget),
    standing memories, shared memories, retrieved memories by rank, then recent turns newest
    first; the SOP is truncated rather than dropped when it alone does not fit. Where each
    goes depends on `order` (see the module docstring).
    """
    if order not in ORDERS:
        raise ValueError(f"unknown context order {order!r}")
    skills, sections = installed_skills(pieces)
    if order == "stable":  # by name, not by relevance: the same skills give the same prefix
        skills = sorted(skills, key=_skill_label)
    used = estimate_tokens(pieces.agent_md) + estimate_tokens(pieces.input_text) + 16
    used += estimate_tokens(pieces.language) if pieces.language else 0
    # "sent"/"dropped_ids": which memories (by id) and skills (by label) made it into the
    # messages and which the budget left out — what the model call's ContextRecord lists.
    report: dict = {
        "budget": budget_tokens,
        "dropped": {},
        "sent": {
            "memories": [],
            "shared": [],
            "standing": [],
            "skills": [],
            "skill_bodies": [],
        },
        "dropped_ids": {
            "memories": [],
            "shared": [],
            "standing": [],
            "skills": [],
            "skill_bodies": [],
        },
        "order": order,
    }
    blocks: list[tuple[int, str]] = [(0, pieces.agent_md)] if pieces.agent_md else []
    if pieces.language:  # always sent, in the stable prefix (it changes with the person only)
        blocks.append((0, pieces.language))

    def take(order: int, title: str, text: str, *, truncate: bool = False) -> bool:
        nonlocal used
        if not text:
            return True
        cost = estimate_tokens(text) + estimate_tokens(title) + 2
        if used + cost > budget_tokens:
            if not truncate or budget_tokens - used < 64:
                return False
            text = _truncate(text, budget_tokens - used - estimate_tokens(title) - 2)
            cost = estimate_tokens(text) + estimate_tokens(title) + 2
        used += cost
        blocks.append((order, f"# {title}\n{text}"))
        return True

    if not take(1, "About the user (USER.md)", pieces.user_md):
        report["dropped"]["user_md"] = 1
    if not take(2, "Standard operating procedure (SOP)", pieces.sop, truncate=True):
        report["dropped"]["sop"] = 1
    descriptions = "\n".join(f"- {_skill_label(s)}: {s.get('description', '')}" for s in skills)
    labels = [_skill_label(s) for s in skills]
    if not take(3, "Skills", descriptions):
        report["dropped"]["skills"] = len(skills)
        report["dropped_ids"]["skills"] = labels
    else:
        report["sent"]["skills"] = labels
    report["skill_bodies"] = []
    for skill in skills:
        if not skill.get("body"):
            continue
        if take(7, f"Skill: {_skill_label(skill)}", skill["body"]):
            report["skill_bodies"].append(_skill_label(skill))
            report["sent"]["skill_bodies"].append(_skill_label(skill))
        else:
            report["dropped"]["skill_bodies"] = report["dropped"].get("skill_bodies", 0) + 1
            report["dropped_ids"]["skill_bodies"].append(_skill_label(skill))
    standing = sorted(pieces.standing, key=lambda item: str(item.get("id", "")).zfill(20))
    standing_ids = {item.get("id") for item in standing}
    for position, (title, items, key) in [
        (8, ("What you know about the user", standing, "standing")),
        (4, ("Shared with you", pieces.shared, "shared")),
        # a retrieved memory already standing is not sent twice
        (5, ("Relevant memories", _not_in(pieces.memories, standing_ids), "memories")),
    ]:
        kept = []
        for item in items:
            line = f"- [{item.get('scope', '')}#{item.get('id', '')}] {item['content']}"
            cost = estimate_tokens(line) + 1
            if used + cost > budget_tokens:
                report["dropped"][key] = report["dropped"].get(key, 0) + 1
                report["dropped_ids"][key].append(item.get("id"))
                continue
            used += cost
            kept.append(line)
            report["sent"][key].append(item.get("id"))
        if kept:
            used += estimate_tokens(title) + 2
            blocks.append((position, f"# {title}\n" + "\n".join(kept)))
        report[f"{key}_kept"] = len(kept)
    for section in sections:
        if not take(6, section.get("title", "Context"), section.get("text", "")):
            report["dropped"]["sections"] = report["dropped"].get("sections", 0) + 1
    turns: list[dict] = []
    for turn in reversed(pieces.turns):
        cost = estimate_tokens(turn["content"]) + 4
        if used + cost > budget_tokens:
            report["dropped"]["turns"] = len(pieces.turns) - len(turns)
            break
        used += cost
        turns.insert(0, turn)
    report["turns_kept"] = len(turns)
    report["tokens"] = used
    if order == "legacy":
        system = "\n\n".join(text for _, text in sorted(blocks, key=lambda block: block[0]))
        messages = [{"role": "system", "content": system}] if system else []
        messages += turns
    else:
        messages = _stable_messages(blocks, turns)
    messages.append({"role": "user", "content": pieces.input_text})
    return messages, report


def _not_in(items: list[dict], ids: set) -> list[dict]:
    return [item for item in items if item.get("id") not in ids] if ids else items


def _stable_messages(blocks: list[tuple[int, str]], turns: list[dict]) -> list[dict]:
    """Stable segments as system messages, each ending a cache break, then the turns (the
    last one a break), then the per-request context as a system message of its own."""
    segments: dict[int, list[tuple[int, str]]] = {}
    for position, text in blocks:
        segment, within = _STABLE.get(position, (_VOLATILE, position))
        segments.setdefault(segment, []).append((within, text))
    messages = []
    for segment in sorted(segments):
        if segment == _VOLATILE:
            continue
        text = "\n\n".join(t for _, t in sorted(segments[segment], key=lambda b: b[0]))
        messages.append({"role": "system", "content": text, "cache_break": True})
    if turns:
        messages += [dict(turn) for turn in turns]
        messages[-1]["cache_break"] = True
    if _VOLATILE in segments:
        text = "\n\n".join(t for _, t in sorted(segments[_VOLATILE], key=lambda b: b[0]))
        messages.append({"role": "system", "content": text})
    return messages


def context_manifest(pieces: ContextPieces, report: dict) -> dict:
    """What the assembled context holds, for the model call's ContextRecord: every memory
    considered, with its rank, score components and whether it was sent, withheld by policy
    or dropped by the budget; and every skill version offered, sent or dropped."""
    memories: list[dict] = []
    for key, source in (("standing", "standing"), ("shared", "shared"), ("memories", "retrieval")):
        sent = set(report["sent"][key])
        for position, item in enumerate(getattr(pieces, key), start=1):
            if key == "memories" and item.get("id") in set(report["sent"]["standing"]):
                continue  # sent once, as a standing memory
            memories.append(
                {
                    "id": item.get("id"),
                    "version": item.get("version"),
                    "rank": item.get("rank", position),
                    "score": item.get("score", 0.0),
                    "components": item.get("components", {}),
                    "tokens": estimate_tokens(item.get("content", "")),
                    "source": source,
                    "status": "sent" if item.get("id") in sent else "dropped",
                    # A sent memory's reason is the policy's masking, when it masked it.
                    "reason": item.get("masked", "")
                    if item.get("id") in sent
                    else "context budget",
                }
            )
    for item in pieces.withheld:
        memories.append(
            {
                "id": item.get("id"),
                "version": item.get("version"),
                "rank": item.get("rank", 0),
                "score": item.get("score", 0.0),
                "components": item.get("components", {}),
                "tokens": 0,
                "source": item.get("source", "retrieval"),
                "status": "withheld",
                "reason": item.get("reason", ""),
            }
        )
    skills_offered, _ = installed_skills(pieces)
    skills = []
    for skill in skills_offered:
        label = _skill_label(skill)
        entry = {"name": skill["name"], "version": skill.get("version", "")}
        skills.append(
            {
                **entry,
                "part": "description",
                "status": "sent" if label in report["sent"]["skills"] else "dropped",
            }
        )
        if skill.get("body"):
            sent = label in report["sent"]["skill_bodies"]
            skills.append({**entry, "part": "body", "status": "sent" if sent else "dropped"})
    return {"memories": memories, "skills": skills, "passed_over": pieces.passed_over}


def tool_found_memories(messages: list[dict]) -> list[dict]:
    """Memories the memory_search tool put in front of the model (its results, as the model
    read them after the "retrieved" stage), in the order they appear in `messages`."""
    found: list[dict] = []
    for message in messages:
        if message.get("role") != "tool" or message.get("name") != "memory_search":
            continue
        try:
            result = json.loads(message.get("content") or "{}")
        except ValueError:
            continue
        for rank, item in enumerate(result.get("memories") or [], start=1):
            if isinstance(item, dict) and isinstance(item.get("id"), int):
                found.append(
                    {
                        "id": item["id"],
                        "version": item.get("version"),
                        "rank": rank,
                        "score": item.get("score", 0.0),
                        "components": {},
                        "tokens": estimate_tokens(str(item.get("content", ""))),
                        "source": "tool",
                        "status": "sent",
                        "reason": "",
                    }
                )
    return found
