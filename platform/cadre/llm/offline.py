"""The offline provider: deterministic, no network, every reply saying plainly that no model is set.

It shows what was retrieved for the request (the lines of the assembled context that share the
most words with the question, named by where they came from: SOP, USER.md, skills, memories),
says what a configured model would do with them, and emits tool calls by simple rules, so the
platform — tools, confirmations, waits, delegation — can be demonstrated and tested without a
model. It never quotes the conversation's earlier replies, nor the context's internal ids.

Its lines are written in the active language — the run's member's (`run_execute` activates it):
"Offline model: …" / "离线模型：…", a prefix stable in each language. The context it quotes
(SOP, memories) is quoted as it is.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterator

from django.conf import settings
from django.utils import translation
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from cadre.llm.base import ChatDelta, ChatResult, ModelProvider, ToolCall, Usage
from cadre.llm.tokens import estimate_tokens
from cadre.llm.tool_sentences import tool_sentence

# The English lines (tests match them); what a person reads is `_(…)` of them.
LABEL = "Offline model:"
NOTICE = f"{LABEL} no language model is configured."
CONFIGURE = "Configure a model under Models."


def _label() -> str:
    return _("Offline model:")


def _notice() -> str:
    return _("Offline model: no language model is configured.")


def _configure() -> str:
    return _("Configure a model under Models.")


def _retrieved() -> str:
    return _("Retrieved for this request")


def _in_every_language(line: Callable[[], str]) -> set[str]:
    """The line as each language Cadre speaks writes it (to recognize it in any)."""
    found = set()
    for code, _name in settings.LANGUAGES:
        with translation.override(code):
            found.add(line())
    return found


def _chinese() -> bool:
    return (translation.get_language() or "").lower().startswith("zh")


_WORD = re.compile(r"[A-Za-z0-9_]{2,}|[\u3400-\u9fff]")
_STOP = {
    "the",
    "and",
    "for",
    "you",
    "are",
    "what",
    "who",
    "how",
    "about",
    "with",
    "that",
    "this",
    "does",
    "did",
    "have",
    "has",
    "from",
    "into",
    "can",
    "please",
    "tell",
    # Chinese particles and pronouns, one character each (a question's other words matter)
    "的",
    "了",
    "吗",
    "呢",
    "吧",
    "啊",
    "是",
    "我",
    "你",
    "们",
    "请",
    "在",
    "这",
    "那",
    "么",
    "什",
    "和",
    "与",
    "个",
    "is",
    "me",
    "my",
    "of",
    "to",
    "in",
    "on",
    "do",
    "a",
    "an",
    "it",
    "be",
    "we",
    "our",
}


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text)} - _STOP


def _split_names(raw: str) -> list[str]:
    parts = re.split(r"\s*(?:,|;|\band\b|、|和)\s*", raw.strip().rstrip(".!"))
    return [part for part in (p.strip() for p in parts) if part]


# (tool, pattern, arguments from the match) — checked in order against the user's message.
RULES: list[tuple[str, re.Pattern, callable]] = [
    (
        "im_send",
        re.compile(
            r"^(?:please\s+)?(?:send|tell|message)\s+[\"“]?(?P<text>.+?)[\"”]?"
            r"\s+to\s+(?P<to>.+)$",
            re.I | re.S,
        ),
        lambda m: {"to": _split_names(m["to"]), "text": m["text"].strip()},
    ),
    (
        "task_create",
        re.compile(
            r"^(?:please\s+)?remind me (?:to\s+)?(?P<title>.+?)"
            r"(?:\s+(?:at|on|by)\s+(?P<due>\d{4}-\d{2}-\d{2}[T ]?[\d:]*))?$",
            re.I | re.S,
        ),
        lambda m: {"title": m["title"].strip(), **({"due_at": m["due"]} if m["due"] else {})},
    ),
    (
        # The same in Chinese: "请提醒我……", "提醒我……" (the Chinese demo's request).
        "task_create",
        re.compile(r"^(?:请)?提醒我\s*[:：]?\s*(?P<title>.+?)[。.!！]?$", re.S),
        lambda m: {"title": m["title"].strip()},
    ),
    (
        "memory_write",
        re.compile(r"^(?:please\s+)?remember(?:\s+that)?\s+(?P<content>.+)$", re.I | re.S),
        lambda m: {"content": m["content"].strip()},
    ),
    (
        "memory_search",
        re.compile(
            r"^(?:search memory for|recall|what do you (?:know|remember) "
            r"about)\s+(?P<query>.+?)\??$",
            re.I | re.S,
        ),
        lambda m: {"query": m["query"].strip()},
    ),
    (
        "http_request",
        re.compile(r"^(?:fetch|get)\s+(?P<url>https?://\S+)", re.I),
        lambda m: {"method": "GET", "url": m["url"]},
    ),
    (
        "await_event",
        re.compile(
            r"^wait for (?:event\s+)?(?P<key>\S+)"
            r"(?:\s+for\s+(?P<seconds>\d+)\s*s(?:econds)?)?",
            re.I,
        ),
        lambda m: {
            "key": m["key"],
            **({"timeout_seconds": int(m["seconds"])} if m["seconds"] else {}),
        },
    ),
    (
        "delegate",
        re.compile(
            r"^(?:ask|delegate to)\s+agent\s+(?P<agent>\d+)\s*[:,]?\s*"
            r"(?P<message>.+)$",
            re.I | re.S,
        ),
        lambda m: {"agent": int(m["agent"]), "message": m["message"].strip()},
    ),
    (
        # "publish <topic>: <summary> [sharing memories 3, 4]" — the first line only, so a
        # subscriber's input (summary first, then where it came from) can publish again.
        "notify_subscribers",
        re.compile(
            r"^(?:please\s+)?(?:publish|share)\s+(?:on\s+)?(?P<topic>[\w.\-/]+)\s*:\s*"
            r"(?P<summary>[^\n]+?)(?:\s+\(?sharing\s+memor(?:y|ies)\s+"
            r"(?P<ids>\d+(?:\s*,\s*\d+)*)\)?)?\s*(?:\n|$)",
            re.I,
        ),
        lambda m: {
            "topic": m["topic"],
            "summary": m["summary"].strip(),
            **(
                {"share_memories": [int(i) for i in re.findall(r"\d+", m["ids"])]}
                if m["ids"]
                else {}
            ),
        },
    ),
]


def _call_id(messages: list[dict], name: str) -> str:
    digest = hashlib.sha256(
        json.dumps([len(messages), name, messages[-1].get("content", "")]).encode()
    ).hexdigest()
    return f"call_{digest[:16]}"


def _summarize_tool_result(message: dict) -> str:
    """A tool's result as the person reads it (`tool_sentence`): no JSON, ids or scope keys."""
    try:
        data = json.loads(message["content"])
    except ValueError:
        return f"{message.get('name', 'tool')}: {message['content'][:200]}"
    return tool_sentence(message.get("name", "tool"), data)


# The context's section titles (cadre.agents.runtime.steps.context: the model's prompt, never
# translated) -> how a reply names the source (in the reader's language).
_SOURCES = {
    "About the user (USER.md)": "USER.md",
    "Standard operating procedure (SOP)": "SOP",
    "Skills": gettext_lazy("skills"),
    "Shared with you": gettext_lazy("shared with you"),
    "Relevant memories": gettext_lazy("memory"),
}
# "[user:3#12]" / "[agent:1#7]" before a memory line: ids for a model to cite, noise to a person.
_INTERNAL_ID = re.compile(r"\[[a-z_]+(?::\d+)?#\d*\]\s*")


def _source_of(heading: str) -> str | None:
    title = heading.lstrip("#").strip()
    if title.startswith("Skill: "):
        return _("skill %(name)s") % {"name": title.removeprefix("Skill: ")}
    source = _SOURCES.get(title)
    return str(source) if source is not None else None


def retrieved_lines(context: str) -> list[tuple[str, str]]:
    """(source, text) for every line of the context worth quoting, headings left out (the
    source named in the active language)."""
    source = _("instructions")
    lines = []
    for line in context.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            source = _source_of(stripped) or source
            continue
        text = _INTERNAL_ID.sub("", stripped.lstrip("-*0123456789. ").strip()).strip()
        if len(text) >= 3:
            lines.append((source, text))
    return lines


def _is_earlier_reply(text: str, earlier: list[str], markers: set[str]) -> bool:
    # A conversation summary (a system message) quotes earlier replies too (in any language).
    return any(marker in text for marker in markers) or any(text in reply for reply in earlier)


def answer_from_context(
    question: str, context: str, tools: list[str] = (), earlier: list[str] = ()
) -> str:
    """The reply to `question` from the `context` lines, none of them quoting an `earlier`
    reply of the conversation; in the active language (the quoted lines as they are)."""
    wanted = _words(question)
    best: list[tuple[int, int, str, str]] = []
    seen: set[str] = set()
    markers = _in_every_language(_label) | _in_every_language(_retrieved)
    for order, (source, text) in enumerate(retrieved_lines(context)):
        score = len(wanted & _words(text))
        if score and text not in seen and not _is_earlier_reply(text, earlier, markers):
            seen.add(text)
            best.append((score, -order, source, text))
    best.sort(reverse=True)
    asked = _clip(" ".join(question.split()), QUESTION_CHARS)
    chinese = _chinese()
    tools_shown = ("、" if chinese else ", ").join(sorted(tools))
    if best:
        # Each line cut at ANSWER_LINE_CHARS, so a reply stays a few lines long; otherwise
        # quoted exactly, so that deleting a memory finds (and redacts) its copy in the reply.
        quoted = ("；" if chinese else "; ").join(
            _("%(source)s: “%(text)s”") % {"source": source, "text": _clip(text, ANSWER_LINE_CHARS)}
            for _score, _order, source, text in best[:3]
        )
        retrieved = _("Retrieved for this request: %(quoted)s.") % {"quoted": quoted}
        if tools:
            would = _(
                "With a model, the agent would answer “%(question)s” from these and could use "
                "its tools (%(tools)s)."
            )
        else:
            would = _("With a model, the agent would answer “%(question)s” from these.")
    else:
        retrieved = _(
            "Retrieved for this request: nothing in this agent's SOP, USER.md, skills or "
            "memories matches “%(question)s”."
        ) % {"question": asked}
        if tools:
            would = _(
                "With a model, the agent would answer from what it knows and could use its "
                "tools (%(tools)s)."
            )
        else:
            would = _("With a model, the agent would answer from what it knows.")
    would = would % {"question": asked, "tools": tools_shown}
    return ("" if chinese else " ").join([_notice(), retrieved, would, _configure()])


def strip_notice(text: str) -> str:
    """An offline reply without its fixed opening (what a summary of the turn should keep), in
    whichever language it was written."""
    for notice in sorted(_in_every_language(_notice) | {NOTICE}, key=len, reverse=True):
        text = text.removeprefix(notice)
    for label in _in_every_language(_label) | {LABEL}:
        text = text.removeprefix(label)
    for configure in _in_every_language(_configure) | {CONFIGURE}:
        text = text.replace(configure, "")
    return text.strip()


QUESTION_CHARS = 120
ANSWER_LINE_CHARS = 240


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


class OfflineProvider(ModelProvider):
    kind = "offline"

    def decide(self, messages: list[dict], tools: list[dict]) -> ChatResult:
        offered = {tool["name"] for tool in tools}
        last = messages[-1] if messages else {"role": "user", "content": ""}
        if last["role"] == "tool":
            # Summarize every tool result since the last assistant turn.
            results = []
            for message in reversed(messages):
                if message["role"] != "tool":
                    break
                results.append(_summarize_tool_result(message))
            text = ("" if _chinese() else " ").join(reversed(results))
            return self._reply(messages, _("Offline model: %(summary)s") % {"summary": text})
        question = last.get("content", "") if last["role"] == "user" else ""
        for name, pattern, arguments in RULES:
            match = pattern.match(question.strip())
            if match and name in offered:
                call = ToolCall(id=_call_id(messages, name), name=name, arguments=arguments(match))
                return self._reply(messages, "", [call])
        # The system messages only: the conversation's earlier turns are not knowledge, and
        # quoting earlier replies made every reply repeat the last one.
        context = "\n".join(m["content"] for m in messages if m["role"] == "system")
        earlier = [m.get("content") or "" for m in messages if m["role"] == "assistant"]
        return self._reply(
            messages, answer_from_context(question, context, sorted(offered), earlier)
        )

    def _reply(
        self, messages: list[dict], text: str, calls: list[ToolCall] | None = None
    ) -> ChatResult:
        prompt = sum(estimate_tokens(m.get("content") or "") for m in messages)
        return ChatResult(
            text=text,
            tool_calls=calls or [],
            usage=Usage(prompt, estimate_tokens(text) + 8 * len(calls or [])),
            model=self.model or "offline-1",
            finish_reason="tool_calls" if calls else "stop",
            offline=True,
        )

    def list_models(self) -> list[str]:
        return ["offline-1"]

    def complete(self, messages: list[dict], tools: list[dict], **params) -> ChatResult:
        return self.decide(messages, tools)

    def stream(self, messages: list[dict], tools: list[dict], **params) -> Iterator[ChatDelta]:
        result = self.decide(messages, tools)
        for piece in re.findall(r"\S+\s*", result.text):
            yield ChatDelta(text=piece)
        yield ChatDelta(result=result)
