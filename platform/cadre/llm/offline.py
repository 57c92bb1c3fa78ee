"""The offline provider: deterministic, no network, every reply saying plainly that no model is set.

It shows what was retrieved for the request (the lines of the assembled context that share the
most words with the question, named by where they came from: SOP, USER.md, skills, memories),
says what a configured model would do with them, and emits tool calls by simple rules, so the
platform — tools, confirmations, waits, delegation — can be demonstrated and tested without a
model. It never quotes the conversation's earlier replies, nor the context's internal ids.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator

from cadre.llm.base import ChatDelta, ChatResult, ModelProvider, ToolCall, Usage
from cadre.llm.tokens import estimate_tokens
from cadre.llm.tool_sentences import tool_sentence

LABEL = "Offline model:"
NOTICE = f"{LABEL} no language model is configured."
CONFIGURE = "Configure a model under Models."
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


# The context's section titles (cadre.agents.runtime.steps.context) -> how a reply names the source.
_SOURCES = {
    "About the user (USER.md)": "USER.md",
    "Standard operating procedure (SOP)": "SOP",
    "Skills": "skills",
    "Shared with you": "shared with you",
    "Relevant memories": "memory",
}
# "[user:3#12]" / "[agent:1#7]" before a memory line: ids for a model to cite, noise to a person.
_INTERNAL_ID = re.compile(r"\[[a-z_]+(?::\d+)?#\d*\]\s*")


def _source_of(heading: str) -> str | None:
    title = heading.lstrip("#").strip()
    if title.startswith("Skill: "):
        return f"skill {title.removeprefix('Skill: ')}"
    return _SOURCES.get(title)


def retrieved_lines(context: str) -> list[tuple[str, str]]:
    """(source, text) for every line of the context worth quoting, headings left out."""
    source = "instructions"
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


def _is_earlier_reply(text: str, earlier: list[str]) -> bool:
    # A conversation summary (a system message) quotes earlier replies too.
    return (
        LABEL in text
        or "Retrieved for this request" in text
        or any(text in reply for reply in earlier)
    )


def answer_from_context(
    question: str, context: str, tools: list[str] = (), earlier: list[str] = ()
) -> str:
    """The reply to `question` from the `context` lines, none of them quoting an `earlier`
    reply of the conversation."""
    wanted = _words(question)
    best: list[tuple[int, int, str, str]] = []
    seen: set[str] = set()
    for order, (source, text) in enumerate(retrieved_lines(context)):
        score = len(wanted & _words(text))
        if score and text not in seen and not _is_earlier_reply(text, earlier):
            seen.add(text)
            best.append((score, -order, source, text))
    best.sort(reverse=True)
    asked = _clip(" ".join(question.split()), QUESTION_CHARS)
    if best:
        # Each line cut at ANSWER_LINE_CHARS, so a reply stays a few lines long; otherwise
        # quoted exactly, so that deleting a memory finds (and redacts) its copy in the reply.
        quoted = "; ".join(
            f"{source}: “{_clip(text, ANSWER_LINE_CHARS)}”" for _, _, source, text in best[:3]
        )
        retrieved = f"Retrieved for this request: {quoted}."
        would = f"With a model, the agent would answer “{asked}” from these"
    else:
        retrieved = (
            "Retrieved for this request: nothing in this agent's SOP, USER.md, skills or "
            f"memories matches “{asked}”."
        )
        would = "With a model, the agent would answer from what it knows"
    if tools:
        would += f" and could use its tools ({', '.join(sorted(tools))})"
    return f"{NOTICE} {retrieved} {would}. {CONFIGURE}"


def strip_notice(text: str) -> str:
    """An offline reply without its fixed opening (what a summary of the turn should keep)."""
    text = text.removeprefix(NOTICE).removeprefix(LABEL)
    return text.replace(CONFIGURE, "").strip()


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
            text = " ".join(reversed(results))
            return self._reply(messages, f"{LABEL} {text}")
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
