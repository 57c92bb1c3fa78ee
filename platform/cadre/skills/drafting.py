"""Skill drafts: spotting an employee's correction, drafting SKILL.md (by the model when one is
configured, else deterministically from the text, clearly marked), and the skills model.

The model is the platform's one model-provider interface (`cadre.llm`): for a
conversation, the provider of the agent's template; otherwise the organization's
`{"skills": {"provider_config": <id>, "model": "..."}}` setting. The offline provider is not a
model for this purpose: drafts and checks then fall back to rules and say so.
"""

from __future__ import annotations

import json
import logging
import re
from collections import Counter
from dataclasses import dataclass, field

from cadre.agents import providers
from cadre.agents.models import ModelProviderConfig
from cadre.llm import ModelProvider, ProviderError, provider_for

logger = logging.getLogger(__name__)

OFFLINE_DRAFT = "offline rules (no model configured)"
OFFLINE_NOTE = (
    "> Drafted by rules from a conversation, without a model: read every step before approving."
)
MAX_NAME = 64

# --- telling a correction from a preference ----------------------------------------------
#
# A correction improves how the agent does a task: it says the last answer lacked something
# ("you forgot the risks section", "缺少结论"), or it asks for something to be added to that
# kind of answer from now on ("next time also include the attendee list", "以后每次都加上行动项").
# A preference is about the person: how they like to be answered (tone, length, format,
# language), what to call them, facts about them ("my manager is Li Wei"). Preferences belong
# to memory; only corrections become skill proposals. The reading is made of three signals,
# not of phrases: an omission in the answer, a standing change ("next time", "always", "以后"),
# and an addition to the answer's content ("include", "add", "附上").

# The answer left something out or got it wrong (said of the agent or of the answer).
_OMISSION_EN = re.compile(
    r"\byou(?:'ve| have)? (?:forgot|forgotten|missed|omitted|skipped|left out|overlooked|"
    r"neglected|failed to|did ?n[o']t (?:include|add|mention|list|attach|cover|check|cite|"
    r"give|put|state|show|note)|should(?:'ve| have) (?:included|added|mentioned|listed|"
    r"attached|covered|checked|cited|noted))\b"
    r"|\b(?:is|was|are|were|'s) (?:missing|absent|left out|not included|incomplete)\b"
    r"|\b(?:lacks?|lacking|is missing|was missing)\b"
    r"|\b(?:should(?:'ve| have) (?:included|added|mentioned|listed|attached|covered|cited))\b"
    r"|\b(?:there (?:is|was) no|it has no|it had no|doesn'?t have|does not have|"
    r"didn'?t have|did not have) (?:a |an |the |any )?\w+",
    re.IGNORECASE,
)
_OMISSION_ZH = re.compile(
    r"(?<!我)(?:忘了|忘记了?|漏了|漏掉了?|遗漏了?)"
    r"|缺少|缺了|少了|不完整|没有(?:写|加|提|列|包括|包含|附|附上|说明|注明)"
    r"|没(?:写|加|提|列|附)"
    r"|应该(?:要)?(?:加上|写上|包括|包含|提到|列出|附上)"
)
# A standing change: what comes next should be done differently.
_STANDING_EN = re.compile(
    r"\b(?:next time|from now on|in (?:the )?future|going forward|always|every time|"
    r"each time|whenever|from here on|in every)\b",
    re.IGNORECASE,
)
_STANDING_ZH = re.compile(r"下次|以后|今后|每次|每一次|往后|总是|一律|始终")
# Something added to the answer's content (not a change of its style).
_ADDITION_EN = re.compile(
    r"\b(?:include|add|attach|append|insert|cite|cover|mention)\b"
    r"|\b(?:also|additionally) (?:\w+ )?(?:list|show|provide|note|state|specify|"
    r"highlight|flag|mark|put|give|check|send|cc|summari[sz]e|link)\b"
    r"|\b(?:list|show|provide|note|state|specify|highlight|flag|mark|put|give|check|send|"
    r"link)\b[^.;!?]*\b(?:too|as well)\b",
    re.IGNORECASE,
)
_ADDITION_ZH = re.compile(
    r"加上|加入|添加|附上|附带|补上|补充|包括|包含|写上|写明|注明|标注|标上|列上|再加|还要加|也要加"
    r"|(?:还要|也要|别忘了|记得)[^，,。；;！!？?]*(?:写|列|附|加|提|放|说明|标)"  # noqa: RUF001
)


def correction_signals(text: str) -> dict[str, bool]:
    """The three signals of a correction in `text` (see above)."""
    text = text or ""
    return {
        "omission": bool(_OMISSION_EN.search(text) or _OMISSION_ZH.search(text)),
        "standing": bool(_STANDING_EN.search(text) or _STANDING_ZH.search(text)),
        "addition": bool(_ADDITION_EN.search(text) or _ADDITION_ZH.search(text)),
    }


# "yes", "confirm", "save it as a skill", "好的": the employee accepts a pending proposal.
_AFFIRMATION = re.compile(
    r"^\s*(?:yes|yep|yeah|ok|okay|sure|confirm(?:ed)?|please do|do it|go ahead|save it|"
    r"好的?|可以|确认|是的?)\b[\s,.!。！]*(?:save (?:it|that)(?: as a skill)?|"  # noqa: RUF001
    r"make it a skill|confirm(?:ed)?|please)?[\s.!。！]*$",  # noqa: RUF001
    re.IGNORECASE,
)
_WORD = re.compile(r"[a-z0-9]+")
STOP_WORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "could",
        "do",
        "for",
        "from",
        "get",
        "give",
        "have",
        "i",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "my",
        "next",
        "now",
        "of",
        "on",
        "or",
        "our",
        "out",
        "please",
        "so",
        "some",
        "that",
        "the",
        "their",
        "them",
        "then",
        "these",
        "this",
        "those",
        "time",
        "to",
        "up",
        "us",
        "we",
        "what",
        "when",
        "which",
        "will",
        "with",
        "would",
        "you",
        "your",
        "also",
        "include",
        "add",
        "always",
        "make",
        "sure",
        "should",
        "must",
        "list",
        "send",
        "put",
        "check",
        "mark",
        "forgot",
        "missed",
        "don't",
        "dont",
        "not",
        "need",
        "needs",
        "want",
    ]
)


def is_correction(text: str) -> bool:
    """Whether `text` corrects how the agent did its task (a skill lesson), as opposed to a
    preference or a fact about the person, a plain request or small talk: an omission in the
    answer, or an addition to the answer's content made a standing rule."""
    signals = correction_signals(text)
    return signals["omission"] or (signals["standing"] and signals["addition"])


def is_affirmation(text: str) -> bool:
    return bool(_AFFIRMATION.match(text or ""))


def words(text: str) -> list[str]:
    return [w for w in _WORD.findall((text or "").lower()) if w not in STOP_WORDS and len(w) > 2]


def skill_name(text: str, *, fallback: str = "team-practice") -> str:
    """A valid Hub name from the most telling words of `text` (`trade-show-prep`)."""
    counts = Counter(words(text))
    chosen = [word for word, _ in counts.most_common(3)]
    name = "-".join(chosen)[:MAX_NAME].strip("-")
    return name or fallback


def clean_line(text: str) -> str:
    return re.sub(r"\s+", " ", text or "").strip()


_VERBS = "include|add|attach|append|list|mention|mark|send|check|put|cite|cover|insert"
_LEAD_IN = re.compile(
    r"^(?:(?:next time|from now on|in (?:the )?future|going forward|every time|each time|"
    r"please|also|and|always|then|so|"
    r"you(?:'ve| have)? (?:forgot(?:ten)?|missed|omitted|skipped|left out|overlooked|"
    r"neglected|failed|did ?n[o']t|should(?:'ve| have))(?: to)?|"
    r"don't forget(?: to)?|do not forget(?: to)?|remember to|make sure(?: to| you)?)"
    r"[\s,:;]*)+",
    re.IGNORECASE,
)
# "The summary was missing the action items", "the report lacks a conclusion": the object.
_MISSING_OBJECT = re.compile(
    r"\b(?:(?:is|was|are|were) missing|lacks?|lacking|(?:there (?:is|was) no|"
    r"it (?:has|had) no|does ?n[o']t have|did ?n[o']t have))\s+(.+)",
    re.IGNORECASE,
)
_TRAILING = re.compile(
    r"(?:\s+(?:too|as well|next time|from now on|in (?:the )?future|going forward|every time|"
    r"each time|always|again))+$",
    re.IGNORECASE,
)
_PRONOUN = re.compile(r"^(?:one|it|them|that|this|those|these|some|the same)$", re.IGNORECASE)


def _clause_items(clause: str) -> list[str]:
    # "Whenever you draft one, include the agenda": the condition is the skill's "when".
    clause = re.sub(
        r"^(?:whenever|when|if|each time|every time)\b[^,]*,\s*", "", clause, flags=re.I
    )
    missing = _MISSING_OBJECT.search(clause)
    body = missing.group(1) if missing else _LEAD_IN.sub("", clause)
    body = re.sub(r"^(?:(?:also|always|please|to)\s+)+", "", body, flags=re.IGNORECASE)
    verb_match = re.match(rf"({_VERBS})(?:ing|ed|d)?\s+(.*)", body, re.IGNORECASE)
    verb, rest = (
        (verb_match.group(1).capitalize(), verb_match.group(2)) if verb_match else ("Include", body)
    )
    parts = [p.strip(" .;,!") for p in re.split(r",\s*(?:and\s+)?|\s+and\s+", rest)]
    items = []
    for part in parts:
        part = _TRAILING.sub("", part).strip(" .;,!")
        # "…; next time also include one": the pronoun repeats what another clause named.
        if not part or _PRONOUN.match(part) or re.match(r"(?:it|them|one)\b", part, re.I):
            continue
        items.append(f"{verb} {part}")
    return items


def correction_items(text: str) -> list[str]:
    """The things the employee asked for, one per step (`Include the booth budget`,
    `Include the follow-up list`), without the lead-ins ("next time, also include", "you
    forgot") and without a clause that only repeats another ("next time also include one")."""
    body = clean_line(text)
    if re.search(r"[\u3400-\u9fff]", body):  # Chinese: drop the lead-ins, keep the sentence
        body = re.sub(r"^(?:下次|以后|还要|别忘了|也要|记得|请)+", "", body).strip(" ，,。.")  # noqa: RUF001
        return [body or clean_line(text)]
    items: list[str] = []
    for clause in re.split(r"(?<=[.;!?])\s+|;\s*|\s+[-–—]+\s+", body):  # noqa: RUF001
        for item in _clause_items(clause):
            if item.lower() not in {known.lower() for known in items}:
                items.append(item)
    return items or [body]


def render_skill_md(*, name: str, description: str, body: str, metadata: dict | None = None) -> str:
    description = clean_line(description)[:1000].replace('"', "'")
    lines = ["---", f"name: {name}", f'description: "{description}"']
    if metadata:
        lines.append("metadata:")
        lines += [
            f'  {key}: "{str(value).replace(chr(34), chr(39))}"' for key, value in metadata.items()
        ]
    lines += ["---", "", body.strip(), ""]
    return "\n".join(lines)


def split_skill_md(text: str) -> tuple[str, str]:
    """(frontmatter block including the fences, body) of a SKILL.md."""
    lines = text.splitlines()
    if lines and lines[0].strip() == "---":
        for index in range(1, len(lines)):
            if lines[index].strip() == "---":
                return "\n".join(lines[: index + 1]), "\n".join(lines[index + 1 :])
    return "", text


@dataclass
class Draft:
    name: str
    files: dict[str, str]
    summary: str
    drafted_by: str
    kind: str = "new_skill"
    extra: dict = field(default_factory=dict)


def offline_correction_draft(
    *, request: str, output: str, correction: str, base_skill_md: str | None, base_name: str = ""
) -> Draft:
    """A deterministic draft from the correction text: a new skill for the task that was asked,
    or the in-context skill with the correction appended as steps."""
    items = correction_items(correction)
    if base_skill_md:
        frontmatter, body = split_skill_md(base_skill_md)
        addition = "\n".join(
            ["", "## Also (from a conversation correction)", "", OFFLINE_NOTE, ""]
            + [f"- {item}." for item in items]
        )
        text = f"{frontmatter}\n{body.rstrip()}\n{addition}\n"
        return Draft(
            name=base_name,
            files={"SKILL.md": text},
            summary=f"Add to {base_name}: " + "; ".join(items),
            drafted_by=OFFLINE_DRAFT,
            kind="new_version",
        )
    name = skill_name(request or correction)
    task = clean_line(request)[:300].rstrip(".。!?") or "this kind of request"
    body = "\n".join(
        [
            f"# {name.replace('-', ' ').capitalize()}",
            "",
            OFFLINE_NOTE,
            "",
            f"Use when asked: “{task}”",
            "",
            "## Steps",
            "",
            "1. Do what the request asks, as before.",
            *[f"{i}. {item}." for i, item in enumerate(items, start=2)],
            "",
            "## Example",
            "",
            f"Request: {task}",
            "",
            f"Correction that taught this: “{clean_line(correction)[:300]}”",
        ]
    )
    lowered = [item[:1].lower() + item[1:] for item in items]
    description = f"When asked to {task[:1].lower()}{task[1:200]}: " + "; ".join(lowered) + "."
    return Draft(
        name=name,
        files={
            "SKILL.md": render_skill_md(
                name=name, description=description, body=body, metadata={"drafted-by": "rules"}
            )
        },
        summary=f"New skill {name}: " + "; ".join(items),
        drafted_by=OFFLINE_DRAFT,
    )


# --- the model -----------------------------------------------------------------------------


def is_model(provider: ModelProvider | None) -> bool:
    return provider is not None and provider.kind != "offline"


def model_for_version(version) -> ModelProvider | None:
    """The template version's model (its own provider, else the organization's default), or
    None when it runs the offline provider."""
    try:
        config, settings = providers.resolve(version.model_settings, version.organization_id)
        provider = provider_for(settings, config)
    except (providers.ProviderUnavailable, ProviderError):
        return None
    return provider if is_model(provider) else None


def model_for_organization(organization) -> ModelProvider | None:
    """The organization's skills model (`settings.skills.provider_config`), if any."""
    skills = (organization.settings or {}).get("skills") or {}
    config_id = skills.get("provider_config")
    if not config_id:
        return None
    config = ModelProviderConfig.objects.filter(
        pk=config_id, organization=organization, is_active=True
    ).first()
    if config is None:
        return None
    try:
        provider = provider_for({"model": skills.get("model", "")}, config)
    except ProviderError:
        return None
    return provider if is_model(provider) else None


def ask_json(provider: ModelProvider, system: str, user: str) -> dict:
    """One chat call whose answer must be a JSON object (a fenced block is accepted)."""
    result = provider.chat(
        [{"role": "system", "content": system}, {"role": "user", "content": user}]
    )
    text = result.text.strip()
    match = re.search(r"\{.*\}", text, re.DOTALL)
    if match is None:
        raise ProviderError("the model did not answer with a JSON object")
    try:
        data = json.loads(match.group(0))
    except ValueError as error:
        raise ProviderError(f"the model's JSON did not parse: {error}") from None
    if not isinstance(data, dict):
        raise ProviderError("the model's answer is not a JSON object")
    return data


DRAFT_PROMPT = """An employee improved an AI agent's answer. Turn the improvement into an
Agent Skill. Answer with one JSON object: {"is_skill": true|false, "name": lowercase-hyphenated
name, "description": when to use the skill (one sentence), "steps": [imperative steps],
"summary": one sentence for the employee saying what the skill change is}. If a CURRENT SKILL
is given, return its complete improved steps. Answer is_skill false for small talk, one-off
facts and personal preferences (how the employee likes to be answered, what to call them,
facts about them): those belong to the employee's memory, not to a team skill."""


def model_correction_draft(
    provider: ModelProvider,
    *,
    request: str,
    output: str,
    correction: str,
    base_skill_md: str | None,
    base_name: str = "",
) -> Draft | None:
    """The model's draft; None when the model says this is not a skill."""
    user = f"REQUEST: {request}\nAGENT ANSWER: {output[:4000]}\nIMPROVEMENT: {correction}"
    if base_skill_md:
        user += f"\nCURRENT SKILL ({base_name}):\n{base_skill_md[:8000]}"
    data = ask_json(provider, DRAFT_PROMPT, user)
    if not data.get("is_skill", True):
        return None
    steps = [clean_line(str(s)) for s in data.get("steps") or [] if clean_line(str(s))]
    if not steps:
        return None
    name = base_name or skill_name(str(data.get("name") or request))
    if not re.fullmatch(r"[a-z0-9]+(?:-[a-z0-9]+)*", name) or len(name) > MAX_NAME:
        name = skill_name(name.replace("_", " "))
    description = clean_line(str(data.get("description") or "")) or f"When asked: {request[:200]}"
    body = "\n".join(
        [f"# {name.replace('-', ' ').capitalize()}", "", "## Steps", ""]
        + [f"{i}. {step}" for i, step in enumerate(steps, start=1)]
        + ["", "## Example", "", f"Request: {clean_line(request)[:300]}"]
    )
    drafted_by = f"model {provider.kind}:{provider.model}"
    return Draft(
        name=name,
        files={"SKILL.md": render_skill_md(name=name, description=description, body=body)},
        summary=clean_line(str(data.get("summary") or "")) or f"Skill {name}: " + "; ".join(steps),
        drafted_by=drafted_by,
        kind="new_version" if base_skill_md else "new_skill",
    )
