"""Telling a statement from a question, in English and Chinese: a question states nothing, so it
is never remembered and never replaces what was stated.

A sentence is a question when it ends with a question mark (? or ？), or when, without one, it
is built as a question: an English interrogative followed by an auxiliary ("What format do I
like", "Which reports should I send") or an auxiliary before its subject ("Do I like…",
"Is my manager…"); a Chinese sentence ending in 吗 or 呢, or asking with 什么, 哪, 怎么,
为什么, 是否, 是不是, 有没有, 谁, 多少.

A request to the assistant is not a question, however it is punctuated: "Could you always
send PDFs from now on?", "以后能不能都用英文回复？" ask the assistant to do something, and
what they ask for is a requirement.
"""

# ruff: noqa: RUF001 - Chinese punctuation is the point

from __future__ import annotations

import re
import unicodedata

# A Latin stop ends a sentence only before whitespace: memory reads what was actually said,
# and "zhang.san@example.com", "v1.2" or "3.5%" are not sentence ends.
_SENTENCE_END = re.compile(r"(?<=[。！？；])\s*|(?<=[.!?;])\s+|\n+")
_QUESTION_MARK = re.compile(r"[?？][\s\"'”’)）]*$")

_AUXILIARIES = (
    r"do|does|did|is|are|am|was|were|can|could|should|would|will|shall|may|might|must|"
    r"have|has|had"
)
_WH = r"what|which|who|whom|whose|when|where|why|how"
_PRONOUNS = r"i|we|you|he|she|it|they"
_SUBJECT = (
    rf"(?:{_PRONOUNS}|my|our|your|his|her|their|the|this|that|these|those|there|anyone|"
    r"someone|everyone)"
)
# "What format do I like", "Which reports should we send", "What is my phone": the
# interrogative, at most two words, then an auxiliary before its subject. "What I like is
# bullets" and "When the report is late, tell Li" are statements.
_WH_QUESTION = re.compile(
    rf"^(?:{_WH})(?:(?:'s|'re)|(?:\s+(?!(?:{_PRONOUNS})\b)[^\W\d_]+){{0,2}}?"
    rf"\s+(?:{_AUXILIARIES})(?:n't)?)\s+{_SUBJECT}\b",
    re.I,
)
# "Do I like", "Is my manager", "Are there": an auxiliary before its subject.
_INVERTED = re.compile(rf"^(?:{_AUXILIARIES})(?:n't)?\s+{_SUBJECT}\b", re.I)
# Asking the assistant to do something: a request (what it asks for may be a requirement) —
# unless it asks to be told something ("Can you tell me what …").
_REQUEST_EN = re.compile(
    r"^(?:please\s+)?(?:(?:can|could|would|will)\s+you|please)\b"
    r"(?!\s+(?:(?:tell|remind|show)\s+me|remember|recall|know|say|check)\s+"
    rf"(?:{_WH}|if|whether)\b)",
    re.I,
)
_REQUEST_ZH = re.compile(
    r"^(?:(?:以后|今后|往后|从现在(?:开始|起))[，,\s]*)?"
    r"(?:请(?!问)|麻烦|记住|记得|(?:你|您)?(?:能不能|可不可以|能否|可否)|(?:你|您)(?:能|可以))"
)
# Chinese asking words, and the indefinite uses that ask nothing: "什么都行", "没什么",
# "报告什么的", "不怎么喜欢", "哪怕", "无论谁", "多多少少".
_ASK_ZH = re.compile(r"什么|哪|怎么|为什么|是否|是不是|有没有|谁|多少")
_NOT_ASKING_BEFORE = ("不", "没", "无论", "不管", "不论", "多")
_NOT_ASKING_AFTER = ("都", "也", "的", "怕")
_PARTICLE_ZH = re.compile(r"[吗呢][\s。.!！]*$")


def _clean(sentence: str) -> str:
    return unicodedata.normalize("NFKC", sentence or "").strip()


def _asks_zh(text: str) -> bool:
    """Does a Chinese sentence ask with one of its asking words (not an indefinite use)?"""
    for match in _ASK_ZH.finditer(text):
        before, after = text[: match.start()], text[match.end() : match.end() + 1]
        if before.endswith(_NOT_ASKING_BEFORE) or after.startswith(_NOT_ASKING_AFTER):
            continue
        return True
    return False


def is_request(sentence: str) -> bool:
    """Does this sentence ask the assistant to do something ("Could you always …", "请…")?"""
    text = _clean(sentence)
    if _REQUEST_EN.match(text):
        return True
    return bool(_REQUEST_ZH.match(text)) and not _asks_zh(text)


def sentence_is_question(sentence: str) -> bool:
    """Is this one sentence a question (and not a request to the assistant)?"""
    text = _clean(sentence)
    if not text or is_request(text):
        return False
    if _QUESTION_MARK.search(text):  # NFKC made the full-width ？ a ?
        return True
    if _WH_QUESTION.match(text) or _INVERTED.match(text):
        return True
    return bool(_PARTICLE_ZH.search(text)) or _asks_zh(text)


def split_sentences(text: str) -> list[str]:
    """The sentences of `text`, as memory reads them (extraction, questions)."""
    return [part.strip() for part in _SENTENCE_END.split(text or "") if part and part.strip()]


def is_question(text: str) -> bool:
    """Does `text` only ask (every sentence of it a question)? Such text states nothing."""
    sentences = split_sentences(text)
    return bool(sentences) and all(sentence_is_question(part) for part in sentences)
