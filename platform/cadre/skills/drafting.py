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

from cadre.llm import ModelProvider, ProviderError, provider_for

logger = logging.getLogger(__name__)

OFFLINE_DRAFT = "offline rules (no model configured)"
OFFLINE_NOTE = (
    "> Drafted by rules from a conversation, without a model: read every step before approving."
)
MAX_NAME = 64

# "next time, also include …", "you forgot …", "下次…还要…": the employee improves the output.
_CORRECTION = re.compile(
    r"\b(?:next time|from now on|in (?:the )?future|going forward|"
    r"(?:please |you should |should |must |always |remember to |make sure (?:to |you )?)"
    r"(?:also |always )?(?:include|add|attach|list|mention|mark|send|check|put)|"
    r"also (?:include|add|attach|list|mention|mark|send|check|put)|"
    r"you (?:forgot|missed|left out|didn't include|did not include)|"
    r"don't forget|do not forget|was missing|is missing|are missing)\b"
    r"|下次|以后|还要|别忘了|也要|记得|漏了|缺少",
    re.IGNORECASE,
)
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
    return bool(_CORRECTION.search(text or ""))


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


def correction_items(text: str) -> list[str]:
    """The things the employee asked for, one per step (`the booth budget`, `the follow-up
    list`), without the lead-in ("next time, also include")."""
    body = clean_line(text)
    body = re.sub(
        r"^(?:(?:next time|from now on|in (?:the )?future|going forward|please|also|and|"
        r"you (?:forgot|missed|left out)|don't forget|do not forget|remember to|make sure to)"
        r"[\s,:;]*)+",
        "",
        body,
        flags=re.IGNORECASE,
    )
    if re.search(r"[\u3400-\u9fff]", body):  # Chinese: drop the lead-ins, keep the sentence
        body = re.sub(r"^(?:下次|以后|还要|别忘了|也要|记得|请)+", "", body).strip(" ，,。.")  # noqa: RUF001
        return [body or clean_line(text)]
    body = re.sub(
        r"^(?:(?:also|always|please|to)\s+)*(include|add|attach|list|mention|mark|send|check|put)"
        r"\s+",
        r"\1 ",
        body,
        flags=re.IGNORECASE,
    )
    verb_match = re.match(
        r"(include|add|attach|list|mention|mark|send|check|put)\s+(.*)", body, re.IGNORECASE
    )
    verb, rest = (
        (verb_match.group(1).capitalize(), verb_match.group(2))
        if verb_match
        else (
            "Include",
            body,
        )
    )
    parts = [p.strip(" .;,") for p in re.split(r",\s*(?:and\s+)?|\s+and\s+|;", rest) if p.strip()]
    return [f"{verb} {part}" for part in parts if part] or [clean_line(text)]


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
    """The template version's own model, or None when it runs the offline provider."""
    from cadre.agents.models import ModelProviderConfig

    settings = version.model_settings or {}
    config = None
    if settings.get("provider_config"):
        config = ModelProviderConfig.objects.filter(
            pk=settings["provider_config"], organization_id=version.organization_id, is_active=True
        ).first()
    try:
        provider = provider_for(settings, config)
    except ProviderError:
        return None
    return provider if is_model(provider) else None


def model_for_organization(organization) -> ModelProvider | None:
    """The organization's skills model (`settings.skills.provider_config`), if any."""
    from cadre.agents.models import ModelProviderConfig

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
is given, return its complete improved steps. Answer is_skill false for small talk or one-off
facts."""


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
