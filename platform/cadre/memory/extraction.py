"""Turning conversation messages into memory candidates: rules by default, a model if configured.

`extractor()` returns the model-based extractor when memory has a model — a provider
configuration read from CADRE_MEMORY_PROVIDER_KIND, _BASE_URL, _MODEL, _API_KEY and _TIMEOUT
(see docs/configuration.md) — and the rule-based one otherwise. `memory_model()` is the one
place memory gets its model; extraction, the dedup judge and feedback call it through
`cadre.llm.chat_json`.
"""

from __future__ import annotations

import functools
import logging
import os
import re
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Protocol

from cadre.env import env_int, env_secret, env_str, env_url
from cadre.governance.budgets import account_for_member
from cadre.llm import (
    ModelProvider,
    ProviderConfig,
    ProviderError,
    chat_json,
    metering,
    provider_config_from_env,
    provider_for,
)
from cadre.memory import text as memory_text
from cadre.memory.models import Kind
from cadre.memory.statements import split_sentences

logger = logging.getLogger(__name__)

MAX_CANDIDATE_CHARS = 2000


@dataclass
class Candidate:
    """A memory proposed by an extractor (not yet written)."""

    kind: str
    content: str
    confidence: float = 1.0
    attributes: dict = field(default_factory=dict)
    message_index: int | None = None


class Extractor(Protocol):
    name: str

    def extract(self, messages: list[dict]) -> list[Candidate]: ...


# --- memory's model ------------------------------------------------------------------------

PROVIDER_PREFIX = "CADRE_MEMORY_PROVIDER"
# Deprecated: an OpenAI-compatible endpoint only. Still read for one release, with a warning;
# the CADRE_MEMORY_PROVIDER_* configuration wins when both are set.
LEGACY_VARIABLES = (
    "CADRE_MEMORY_LLM_BASE_URL",
    "CADRE_MEMORY_LLM_MODEL",
    "CADRE_MEMORY_LLM_API_KEY",
    "CADRE_MEMORY_LLM_TIMEOUT",
)


@functools.cache
def _warn_legacy(names: tuple[str, ...], ignored: bool) -> None:
    """Logged once per process for each set of old variables."""
    logger.warning(
        "%s %s deprecated and will stop being read in the next release; %s"
        "set CADRE_MEMORY_PROVIDER_KIND=openai_compatible with CADRE_MEMORY_PROVIDER_BASE_URL, "
        "_MODEL, _API_KEY and _TIMEOUT instead",
        ", ".join(names),
        "is" if len(names) == 1 else "are",
        "they are ignored because CADRE_MEMORY_PROVIDER_KIND is set; " if ignored else "",
    )


def _legacy_config() -> ProviderConfig | None:
    base_url = env_url("CADRE_MEMORY_LLM_BASE_URL", schemes=("http", "https"))
    if not base_url:
        return None
    return ProviderConfig(
        kind="openai_compatible",
        base_url=base_url.rstrip("/"),
        default_model=env_str("CADRE_MEMORY_LLM_MODEL", "gpt-4o-mini"),
        api_key=env_secret("CADRE_MEMORY_LLM_API_KEY") or "",
        timeout_seconds=env_int("CADRE_MEMORY_LLM_TIMEOUT", 30, minimum=1),
    )


def memory_provider_config() -> ProviderConfig | None:
    """Read at call time so a deployment (or a test) can switch the model path on and off."""
    config = provider_config_from_env(PROVIDER_PREFIX, default_timeout=30)
    legacy = tuple(
        name for name in LEGACY_VARIABLES if os.environ.get(name) or os.environ.get(f"{name}_FILE")
    )
    if legacy:
        _warn_legacy(legacy, config is not None)
    return config if config is not None else _legacy_config()


def memory_model() -> ModelProvider | None:
    """The provider memory's extraction, dedup judge and feedback use; None: rules only."""
    config = memory_provider_config()
    return None if config is None else provider_for({}, config)


@contextmanager
def charged(purpose: str, *, actor=None, organization_id: int | None = None):
    """Memory's model calls inside the block are charged (see governance.budgets): to the
    run that caused them when there is one (its member, department and template), else to
    the acting member, else to the organization — under `purpose`."""
    account = metering.current_account()
    if account is None:
        member = getattr(actor, "member", None)
        if member is not None:
            account = account_for_member(member, purpose=purpose)
        else:
            organization = getattr(actor, "organization", None)
            organization_id = organization_id or getattr(organization, "pk", None)
            if organization_id is not None:
                account = metering.Account(organization_id=organization_id)
    with metering.charged_to(replace(account, purpose=purpose) if account else None):
        yield


# --- rule-based extraction -----------------------------------------------------------------

# (rule name, kind, pattern, strip) — `strip` removes a prefix that only asks to remember.
_RULES: list[tuple[str, str, re.Pattern, bool]] = [
    (
        "remember",
        Kind.FACT,
        re.compile(r"^\s*(?:please\s+)?(?:remember|note|keep in mind)\s+(?:that\s+)?(?=\S)", re.I),
        True,
    ),
    (
        "remember_zh",
        Kind.FACT,
        re.compile(r"^\s*(?:请|麻烦)?(?:记住|记一下|记得)[，,：:\s]*(?=\S)"),
        True,
    ),
    (
        "from_now_on",
        Kind.REQUIREMENT,
        re.compile(
            r"\b(?:from now on|going forward|in (?:the )?future|starting (?:today|now))\b", re.I
        ),
        False,
    ),
    (
        "always_never",
        Kind.REQUIREMENT,
        re.compile(r"\b(?:always|never|every time|each time|make sure to|don't ever)\b", re.I),
        False,
    ),
    (
        "prefer",
        Kind.PREFERENCE,
        re.compile(
            r"\b(?:I|we)\s+(?:(?:would|'d)\s+)?(?:prefer|rather|like\b.*\bbetter|"
            r"don't like|do not like|dislike|hate|love|favou?r)",
            re.I,
        ),
        False,
    ),
    ("from_now_on_zh", Kind.REQUIREMENT, re.compile(r"以后|今后|从现在(?:开始|起)|往后"), False),
    (
        "always_zh",
        Kind.REQUIREMENT,
        re.compile(r"总是|每次都|每次|一律|务必|永远不要|千万别"),
        False,
    ),
    (
        "prefer_zh",
        Kind.PREFERENCE,
        re.compile(r"我(?:们)?(?:更|比较|最|很|不)?(?:喜欢|偏好|倾向于|讨厌|习惯)"),
        False,
    ),
]


# A plain first-person statement ("I work from the Hangzhou office on Fridays.", "My manager is
# Li Wei.", "我周五在杭州办公室上班。") is a fact about the person, kept when no rule above
# matches. What only sounds like one is not kept: a question, a request to the assistant ("I
# need you to…", "帮我…"), an opinion or an acknowledgement ("I think…", "I see", "我知道了"),
# and what holds only for the moment ("I'm in a meeting today", "我刚到").
_FIRST_PERSON = re.compile(
    r"^\s*(?:(?:also|and|btw|by the way|fyi|oh|so)\b[,:]?\s*)?(?:i|i'm|i've|my|we|we're|our)\b"
    r"|^\s*(?:另外|还有|对了|顺便说一下)?[，,：:\s]*我",
    re.I,
)
_NOT_A_FACT = re.compile(
    # questions and requests, in either language
    r"[?？]|\b(?:you|your|please)\b|[吗呢你您请帮]|什么|哪|怎么|为什么|是否|谁|多少|几点"
    # intentions, opinions, acknowledgements and passing states after the subject
    r"|^\W*(?:(?:also|and|btw|by the way|fyi|oh|so)\b\W*)?(?:i|we)\s*(?:'m|'re|am|are|was|were)?"
    r"\s*(?:just\s+|not\s+|really\s+|also\s+|do\s+not\s+|don't\s+)*"
    r"(?:need|want|would|'d|will|'ll|shall|should|can|could|may|might|must|have to|hope|wish"
    r"|wonder|wondering|think|guess|believe|feel|see|agree|disagree|know|understand|mean|meant"
    r"|got|get|thank|thanks|appreciate|sure|looking|trying|going to|gonna|done|back|here"
    r"|ready|fine|good|ok|okay|sorry|afraid|curious|glad|happy)\b"
    r"|^\W*(?:另外|还有|对了)?\W*我们?(?:想|要|需要|希望|觉得|认为|猜|知道|明白|懂|同意|不确定"
    r"|不知道|不清楚|刚|正在)"
    r"|\b(?:today|tonight|tomorrow|yesterday|right now|at the moment)\b"
    r"|\bthis (?:morning|afternoon|evening|week)\b|今天|明天|昨天|今晚|刚才|刚刚|马上|待会|一会儿"
    r"|了\W*$",
    re.I,
)


def first_person_fact(sentence: str) -> bool:
    """Is `sentence` a plain statement of a fact about the speaker (see _FIRST_PERSON)?"""
    text = sentence.replace("\u2019", "'")
    if not _FIRST_PERSON.search(text) or _NOT_A_FACT.search(text):
        return False
    return bool(memory_text.content_terms(text))


class RuleExtractor:
    """Explicit requirements and preferences, and plain first-person facts, in the user's own
    words, English and Chinese.

    Only `user` messages are read (an assistant's text is not a user statement). Each sentence
    that matches a rule becomes one candidate; "remember that …" prefixes are stripped.
    """

    name = "rules"

    def extract(self, messages: list[dict]) -> list[Candidate]:
        found: list[Candidate] = []
        for index, message in enumerate(messages):
            if str(message.get("role", "user")) != "user":
                continue
            for sentence in split_sentences(str(message.get("content", ""))):
                candidate = self._match(sentence)
                if candidate is not None:
                    candidate.message_index = index
                    found.append(candidate)
        return found

    @staticmethod
    def _match(sentence: str) -> Candidate | None:
        for rule, kind, pattern, strip in _RULES:
            match = pattern.search(sentence)
            if match is None:
                continue
            content = sentence[match.end() :].strip() if strip else sentence
            content = content[:MAX_CANDIDATE_CHARS]
            if len(content) < 2:
                return None
            if strip:
                # "Remember that I always want PDFs" is still a requirement, not just a fact.
                inner = RuleExtractor._match(content)
                if inner is not None:
                    inner.attributes["rule"] = f"{rule}+{inner.attributes['rule']}"
                    return inner
            return Candidate(kind=kind, content=content, confidence=0.9, attributes={"rule": rule})
        if first_person_fact(sentence):
            content = sentence.strip()[:MAX_CANDIDATE_CHARS]
            return Candidate(
                kind=Kind.FACT, content=content, confidence=0.8, attributes={"rule": "first_person"}
            )
        return None


# --- model-based extraction ----------------------------------------------------------------

EXTRACTION_PROMPT = """You extract long-term memories from a conversation between a user and an
assistant. Keep only what will still matter in future conversations: the user's explicit
requirements ("from now on…", "always…", "以后…"), preferences, and stable facts about their
work. Ignore greetings, one-off requests and anything the assistant said on its own. A question
the user asks states nothing: never turn it into a memory.
Answer with a JSON object: {"memories": [{"kind": one of "fact", "preference", "requirement",
"experience", "content": a self-contained sentence in the user's language, "confidence":
0..1}]}. Answer {"memories": []} when there is nothing worth keeping."""


class ModelExtractor:
    name = "model"

    def __init__(self, model: ModelProvider):
        self.model = model

    def extract(self, messages: list[dict]) -> list[Candidate]:
        transcript = "\n".join(
            f"[{index}] {message.get('role', 'user')}: {message.get('content', '')}"
            for index, message in enumerate(messages)
        )
        with charged("memory.extraction"):
            answer = chat_json(self.model, EXTRACTION_PROMPT, transcript)
        items = answer.get("memories")
        if not isinstance(items, list):
            raise ProviderError("model answer has no 'memories' list")
        found = []
        for item in items:
            if not isinstance(item, dict):
                continue
            content = str(item.get("content", "")).strip()[:MAX_CANDIDATE_CHARS]
            kind = str(item.get("kind", Kind.FACT))
            if not content:
                continue
            if kind not in (Kind.FACT, Kind.PREFERENCE, Kind.REQUIREMENT, Kind.EXPERIENCE):
                kind = Kind.FACT
            try:
                confidence = min(1.0, max(0.0, float(item.get("confidence", 0.8))))
            except (TypeError, ValueError):
                confidence = 0.8
            found.append(
                Candidate(
                    kind=kind,
                    content=content,
                    confidence=confidence,
                    attributes={"model": self.model.model},
                )
            )
        return found


class FallbackExtractor:
    """The model extractor, falling back to rules (and saying so) when the model fails."""

    def __init__(self, primary: ModelExtractor):
        self.primary = primary
        self.name = primary.name

    def extract(self, messages: list[dict]) -> list[Candidate]:
        try:
            return self.primary.extract(messages)
        except ProviderError as error:
            logger.warning("memory extraction model failed, using rules: %s", error)
            self.name = "rules (model failed)"
            return RuleExtractor().extract(messages)


def extractor() -> Extractor:
    model = memory_model()
    if model is None:
        return RuleExtractor()
    return FallbackExtractor(ModelExtractor(model))
