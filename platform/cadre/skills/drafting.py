"""Skill drafts: spotting an employee's correction, drafting SKILL.md (by the model when one is
configured, else deterministically from the text, clearly marked), and the skills model.

An offline draft reads as instructions: the correction's lesson in imperative form, without the
way the employee said the answer was wrong, named after what it is about, quoting the task only
masked. `skill_md_edited` rewrites a SKILL.md's name, description or body for a reviewer's edit.

The model is the platform's one model-provider interface (`cadre.llm`): for a
conversation, the provider of the agent's template; otherwise the organization's
`{"skills": {"provider_config": <id>, "model": "..."}}` setting. The offline provider is not a
model for this purpose: drafts and checks then fall back to rules and say so.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections import Counter
from dataclasses import dataclass, field

import strictyaml
from django.utils.translation import gettext

from cadre.agents import providers
from cadre.agents.models import ModelProviderConfig
from cadre.errors import InvalidInput
from cadre.governance.masking.engine import mask
from cadre.governance.masking.vault import EphemeralVault
from cadre.llm import ModelProvider, ProviderError, provider_for
from hub.validation import parse_skill_md

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
    r"|(?:还要|也要|别忘了|记得)[^，,。；;！!？?]*(?:写|列|附|加|提|放|说明|标)"
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
# "yes, save it", and the Chinese the proposal's question asks for ("好的, 保存", "可以保存吧",
# "确认保存", full-width commas too); Chinese has no word boundary, so no \b after it.
_AFFIRMATION = re.compile(
    r"^\s*(?:(?:yes|yep|yeah|ok|okay|sure|confirm(?:ed)?|please do|do it|go ahead|save it)\b"
    r"[\s,.!]*(?:save (?:it|that)(?: as a skill)?|make it a skill|confirm(?:ed)?|please)?"
    r"|(?:好的?|好吧|行|可以|确认|是的?)[\s,.!，。！、]*"
    r"(?:(?:请|就|帮我)?(?:保存|存)(?:下来|起来|吧|它|一下)?(?:为|成)?(?:技能)?(?:吧)?|确认(?:保存)?)?"
    r"|(?:请|帮我)?(?:保存|存)(?:下来|起来|吧|它|一下)?(?:为|成)?(?:技能)?(?:吧)?)"
    r"[\s.!。！]*$",
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


# --- the lesson, in imperative form -----------------------------------------------------------
#
# An offline draft says what to do, as a skill is read: "Use numbered lists in weekly reports.",
# "State the discount limit as 12% (not 10%).", "加上结论部分。". It never quotes how the employee
# said the answer was wrong ("no, that's wrong", "actually", "其实", "不对"), and it quotes the
# task it was learned from only masked.

# Saying the answer was wrong is not the lesson: dropped wherever a clause starts with it. The
# short words ("no", "ok") only when punctuation follows, so "No agenda was sent" keeps its "No".
_WRONG_LEAD_IN_EN = re.compile(
    r"^(?:(?:(?:no|nope|nah|wrong|incorrect|ok(?:ay)?|well|hmm+|wait|oh|oops|sorry|hey|"
    r"not quite|correction|fyi)\s*(?:[,:;.!\-–—]+\s*|$)"  # noqa: RUF001
    r"|(?:actually|in fact|but|to be clear|just so you know|for the record|please note|"
    r"note that|as i (?:said|told you)|like i said|i told you|"
    r"(?:that|this|it)(?:'s|’s| is| was)(?: not| n[o']t)? (?:wrong|incorrect|right|correct|"  # noqa: RUF001
    r"true|it|accurate|a mistake|outdated|out of date|old information)|"
    r"(?:that|this|it) (?:isn'?t|wasn'?t) (?:right|correct|true|it|accurate)|"
    r"you(?:'re|’re| are| were) (?:wrong|mistaken|incorrect)|"  # noqa: RUF001
    r"you (?:got|have) (?:that|it|this) wrong|you made a mistake|not what i (?:said|meant|asked))"
    r"\b[\s,:;.!\-–—]*))+",  # noqa: RUF001
    re.IGNORECASE,
)
_WRONG_LEAD_IN_ZH = re.compile(
    r"^(?:(?:不对|不是的|不是这样的?|错了|你错了|你说错了|说错了|搞错了|弄错了|有误|其实|实际上|"
    r"事实上|更正一下|纠正一下|更正|纠正|补充一下|对了|注意|嗯|哦|呃|唉|好吧|好的)"
    r"[，,：:。！!、\s]*|不[，,：:。！!]\s*)+"
)
# How the employee framed the request around the lesson: "next time", "please", "you should".
_FRAMING_EN = re.compile(
    r"^(?:(?:next time|from now on|in (?:the )?future|going forward|from here on|every time|"
    r"each time|please|kindly|also|and|then|so|"
    r"you(?:'ll| will)? (?:should|must|need to|have to|ought to|'d better|had better)|"
    r"i (?:want|need|would like|'d like) you to|(?:can|could|would|will) you(?: please)?)"
    r"[\s,:;]*)+",
    re.IGNORECASE,
)
_NEGATIVE_EN = re.compile(
    r"^(?:don'?t|do not|you (?:should|must|need) ?n[o']t|you (?:should|must|need) not|"
    r"you shouldn'?t|you mustn'?t|we (?:don'?t|do not))\s+",
    re.IGNORECASE,
)
_WE_DO = re.compile(
    r"^we (?:(always|never|only|usually|normally|generally) )?(?=\w)", re.IGNORECASE
)
_IMPERATIVE = frozenset(
    re.findall(
        r"\S+",
        """use write include add attach append list mention mark send check put cite cover insert
        state say give show quote keep start end begin open close ask confirm verify double-check
        reply respond answer format sort group order number round convert translate spell call
        refer address sign cc bcc copy forward link highlight flag note summarize summarise explain
        describe compare calculate compute apply follow avoid stop skip leave remove drop delete
        omit exclude limit set schedule book email notify tell inform remind escalate route assign
        file save store name label tag title date prefix capitalize bold split merge combine
        separate make be do never always only try prefer lead place present report track log
        update return provide offer price charge bill invoice contact reference put
        """,
    )
)
# "<subject> is <value>, not <wrong value>": a fact the answer got wrong.
_FACT_EN = re.compile(
    r"^(?P<subject>.+?)(?:\s+(?P<verb>is|are|was|were|equals|should be|must be|has to be|"
    r"needs to be|has changed to|changed to|is now|are now|is actually|are actually)"
    r"|(?P<contracted>'s|’s))\s+"  # noqa: RUF001
    r"(?P<value>.+?)(?:\s*(?:,\s*|\(\s*|\s)(?:and )?(?:not|rather than|instead of)\s+"
    r"(?P<wrong>[^,;)]+?)\)?)?$",
    re.IGNORECASE,
)
_PRONOUN_SUBJECT = re.compile(r"^(?:it|that|this|the answer|the number|the figure)$", re.I)
_PERSONAL_SUBJECT = re.compile(r"^(?:i|you|he|she|they|we)$", re.I)
_POSSESSIVE_EN = re.compile(r"^(?:our|my|your|their|its|the company'?s)\s+", re.IGNORECASE)
_FILLER_EN = re.compile(
    r"^(?:thanks?|thank you|please|ok(?:ay)?|got it|that'?s it|right|sure|yes|no|fine|again)$",
    re.IGNORECASE,
)


def _sentence_case(text: str) -> str:
    return text[:1].upper() + text[1:]


def _fact_lesson(clause: str) -> str | None:
    match = _FACT_EN.match(clause)
    if match is None:
        return None
    subject = _POSSESSIVE_EN.sub("the ", match.group("subject").strip())
    if subject[1:2].islower():  # "The payment terms" inside a sentence: "the payment terms"
        subject = subject[:1].lower() + subject[1:]
    value = match.group("value").strip(" ,.")
    wrong = (match.group("wrong") or "").strip(" ,.")
    if _PERSONAL_SUBJECT.match(subject) or not value:
        return None  # about a person, not the work ("I am the team lead")
    plain = match.group("contracted") or match.group("verb").lower() in {"is", "are", "was", "were"}
    if not wrong and plain:
        return None  # a plain description, not a correction of a value
    unlike = f" (not {wrong})" if wrong else ""
    if _PRONOUN_SUBJECT.match(subject):
        return f"Use {value}{unlike}"
    if re.match(r"^(?:in|on|at|from|by|for|to|under|over|with|within)\b", value, re.I):
        return f"State that {subject} is {value}{unlike}"
    return f"State {subject} as {value}{unlike}"


def _english_lesson(clause: str) -> list[str]:
    clause = _WRONG_LEAD_IN_EN.sub("", clause.strip()).strip(" ,:;.!")
    if not clause or _FILLER_EN.match(clause):
        return []
    if _OMISSION_EN.search(clause):
        return _clause_items(clause)
    framed = _FRAMING_EN.sub("", clause).strip(" ,:;.!")
    if re.match(rf"(?:(?:always|also)\s+)*(?:{_VERBS})\b", framed, re.IGNORECASE):
        return _clause_items(framed)  # "always add them": an addition (a repeat is dropped)
    framed = _TRAILING.sub("", framed).strip(" ,:;.!")
    if not framed or _FILLER_EN.match(framed) or _PRONOUN.match(framed):
        return []
    negative = _NEGATIVE_EN.match(framed) or re.match(r"not\s+", framed, re.IGNORECASE)
    if negative:  # "don't round", "you should not use" (its "you should" already dropped)
        return [f"Do not {framed[negative.end() :]}"]
    we_do = _WE_DO.match(framed)
    if we_do and framed[we_do.end() :].split(" ", 1)[0].lower() in _IMPERATIVE:
        adverb = f"{we_do.group(1)} " if we_do.group(1) else ""
        return [_sentence_case(adverb + framed[we_do.end() :])]
    first = re.split(r"[\s,]", framed, maxsplit=1)[0].lower()
    if first in _IMPERATIVE or re.match(r"(?:make|be) sure\b|remember to\b", framed, re.I):
        return [_sentence_case(framed)]
    fact = _fact_lesson(framed)
    if fact:
        return [fact]
    return [_sentence_case(_POSSESSIVE_EN.sub("the ", framed))]


_ZH_FRAMING = re.compile(
    r"^(?:下次|以后|今后|往后|从现在起|从今以后|记得|别忘了|不要忘了|请你?|麻烦你?|你应该|你要|"
    r"你得|你需要|应该|需要|还要|也要|都要|一定要|务必|要|都|也|还|再)+"
)
_ZH_VERB = r"(?P<verb>写上?|加上?|提到?|列出?|附上?|说明|注明|包括|包含)"
# "你漏了风险部分", "忘了写预算": the verb is optional; "没写预算": "没" only before a verb.
_ZH_OMISSION = re.compile(rf"(?:忘了|忘记了?|漏了|漏掉了?|遗漏了?){_ZH_VERB}?(?P<object>.+)$")
_ZH_NOT_DONE = re.compile(rf"(?:没有|没){_ZH_VERB}(?P<object>.+)$")
_ZH_LACKS = re.compile(r"^(?P<subject>.*?)(?:缺少了?|缺了|少了)(?P<object>.+)$")
_ZH_FACT = re.compile(
    r"^(?P<subject>.+?)(?:应该是|应为|改成了?|改为|现在是|是|为)(?P<value>[^，,]+)[，,]\s*"
    r"(?:而)?不是(?P<wrong>.+)$"
)
_ZH_FACT_REVERSED = re.compile(
    r"^(?P<subject>.+?)不是(?P<wrong>[^，,]+)[，,]?\s*(?:而)?是(?P<value>.+)$"
)
_ZH_POSSESSIVE = re.compile(r"^(?:我们的?|咱们的?|我的|你的|公司的)")
_ZH_VERBS = {
    "写": "写上",
    "加": "加上",
    "提": "提到",
    "列": "列出",
    "附": "附上",
    "包括": "加上",
    "包含": "加上",
}
_ZH_RESTATE = re.compile(
    r"^(?:加上|补上|补充|包括|包含|写上|附上|列出|提到|加进去)?(?:它|这个|这部分|一下)?$"
)


def _chinese_lesson(sentence: str) -> list[str]:
    sentence = _WRONG_LEAD_IN_ZH.sub("", sentence.strip()).strip(" ，,。.")
    if not sentence:
        return []
    fact = _ZH_FACT.match(sentence) or _ZH_FACT_REVERSED.match(sentence)
    if fact:
        subject = _ZH_POSSESSIVE.sub("", fact.group("subject").strip())
        value, wrong = fact.group("value").strip(), fact.group("wrong").strip(" ，,")
        return [f"{subject}是{value}，不是{wrong}：回答时以此为准"]
    items: list[str] = []
    named = ""
    for part in re.split(r"[，,]", sentence):
        part = _ZH_FRAMING.sub("", _WRONG_LEAD_IN_ZH.sub("", part.strip())).strip()
        if not part:
            continue
        omission = _ZH_OMISSION.search(part) or _ZH_NOT_DONE.search(part)
        lacks = _ZH_LACKS.match(part) if omission is None else None
        if omission:
            verb = omission.group("verb") or "加上"
            verb = _ZH_VERBS.get(verb, verb)
            named = omission.group("object").strip()
            items.append(f"{verb}{named}")
        elif lacks and lacks.group("subject"):
            named = lacks.group("object").strip()
            items.append(f"{_ZH_POSSESSIVE.sub('', lacks.group('subject'))}要有{named}")
        elif named and (_ZH_RESTATE.match(part) or named in part):
            continue  # "下次也要加上": repeats what the omission named
        else:
            items.append(part)
    if not named:  # one instruction said in several parts ("周报要用编号列表, 不要用项目符号")
        return ["，".join(items)] if items else []
    return items


def correction_items(text: str) -> list[str]:
    """The lesson of a correction as instructions, one per step (`Include the booth budget`,
    `Use numbered lists in weekly reports`, `State the discount limit as 12% (not 10%)`,
    `附上参会人员名单`): without the lead-ins ("no, that's wrong", "actually", "next time, also
    include", "you forgot", "其实", "不对") and without a clause that only repeats another
    ("next time also include one")."""
    body = clean_line(text)
    chinese = bool(re.search(r"[\u3400-\u9fff]", body))
    items: list[str] = []
    if chinese:
        for sentence in re.split(r"[。；;！!？?]+", body):
            items += _chinese_lesson(sentence)
    else:
        for clause in re.split(r"(?<=[.;!?])\s+|;\s*|:\s+|\s+[-–—]+\s+", body):  # noqa: RUF001
            items += _english_lesson(clause)
    unique: list[str] = []
    for item in items:
        item = item.strip(" ,.;:，。；：")
        if item and item.lower() not in {known.lower() for known in unique}:
            unique.append(item)
    return unique


def _end(item: str) -> str:
    """The step as a sentence: a full stop in the item's own script."""
    return item + ("。" if re.search(r"[\u3400-\u9fff]$", item) else ".")


# Words that say what to do, not what it is about: left out of a skill's name.
_NAME_STOP = STOP_WORDS | {
    "use",
    "state",
    "write",
    "keep",
    "give",
    "show",
    "say",
    "avoid",
    "mention",
    "cite",
    "quote",
    "never",
    "only",
    "instead",
    "rather",
    "than",
    "every",
    "each",
}


def lesson_name(items: list[str], *, fallback_text: str = "") -> str:
    """A Hub name from what the lesson is about (`discount-limit`, `numbered-lists-weekly-reports`):
    what it says not to use is left out; `fallback_text` (the masked task) when the lesson has no
    Latin words (a Chinese lesson), else `team-practice-<hash>` for a reviewer to rename."""
    text = " ".join(items)
    text = re.sub(r"\(not [^)]*\)|,\s*not [^,.;]*", " ", text, flags=re.IGNORECASE)
    text = re.sub(
        r"\b(?:instead of|rather than)\s+.+?(?=\s+(?:in|for|on|when|at|to)\b|[,.;(]|$)",
        " ",
        text,
        flags=re.IGNORECASE,
    )
    for source in (text, fallback_text):
        chosen: list[str] = []
        for word in _WORD.findall(source.lower()):
            if word in _NAME_STOP or len(word) < 3 or word.isdigit() or word in chosen:
                continue
            chosen.append(word)
            if len(chosen) == 4:
                break
        name = "-".join(chosen)[:MAX_NAME].strip("-")
        if name:
            return name
    digest = hashlib.sha256(" ".join(items).encode("utf-8")).hexdigest()[:6]
    return f"team-practice-{digest}"


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


def skill_md_edited(
    text: str, *, name: str | None = None, description: str | None = None, body: str | None = None
) -> str:
    """The SKILL.md `text` with its name, description and/or body replaced (None: kept). Other
    frontmatter keys are kept; the frontmatter is rewritten only when the name or description
    changes, so a body edit changes nothing else."""
    document, problems = parse_skill_md(text)
    if document is None:
        raise InvalidInput(
            gettext("The skill's SKILL.md cannot be edited field by field: %(message)s")
            % {"message": problems[0].message},
            code="invalid_skill",
        )
    frontmatter_block, old_body = split_skill_md(text)
    meta = dict(document.frontmatter)
    changes = {
        key: value.strip()
        for key, value in (("name", name), ("description", description))
        if value is not None and value.strip() != str(meta.get(key, "")).strip()
    }
    if changes:
        meta.update(changes)
        frontmatter_block = "---\n" + strictyaml.as_document(meta).as_yaml().rstrip("\n") + "\n---"
    if body is not None and body.strip() != old_body.strip():
        return f"{frontmatter_block}\n\n{body.strip()}\n"
    return f"{frontmatter_block}\n{old_body}" + ("" if old_body.endswith("\n") else "\n")


@dataclass
class Draft:
    name: str
    files: dict[str, str]
    summary: str
    drafted_by: str
    kind: str = "new_skill"
    extra: dict = field(default_factory=dict)


def _masked(text: str, organization) -> str:
    """`text` as the governance masking engine leaves it (names, numbers, addresses replaced)."""
    return mask(clean_line(text), conversation=EphemeralVault(), organization=organization).text


def offline_correction_draft(
    *,
    request: str,
    output: str,
    correction: str,
    base_skill_md: str | None,
    base_name: str = "",
    organization=None,
) -> Draft:
    """A deterministic draft from the correction text: a new skill whose steps are the lesson in
    imperative form, or the in-context skill with the lesson appended as steps. The task it was
    learned from is quoted masked (the draft goes to an organization-wide review queue)."""
    items = correction_items(correction) or correction_items(_masked(correction, organization))
    if not items:
        items = [clean_line(_masked(correction, organization)).strip(" .。")]
    steps = [_end(item) for item in items]
    if base_skill_md:
        frontmatter, body = split_skill_md(base_skill_md)
        addition = "\n".join(
            ["", "## Also (from a conversation correction)", "", OFFLINE_NOTE, ""]
            + [f"- {step}" for step in steps]
        )
        text = f"{frontmatter}\n{body.rstrip()}\n{addition}\n"
        return Draft(
            name=base_name,
            files={"SKILL.md": text},
            summary=gettext("Add to %(name)s: %(steps)s")
            % {"name": base_name, "steps": " ".join(steps)},
            drafted_by=OFFLINE_DRAFT,
            kind="new_version",
        )
    task = _masked(request, organization)[:300].rstrip(".。!?！？")
    name = lesson_name(items, fallback_text=task)
    when = f"When a request is like: “{task}”." if task else ""
    body = "\n".join(
        [
            f"# {_sentence_case(name.replace('-', ' '))}",
            "",
            OFFLINE_NOTE,
            "",
            "## Steps",
            "",
            *[f"{i}. {step}" for i, step in enumerate(steps, start=1)],
            *(["", "## When to use", "", when] if when else []),
        ]
    )
    description = " ".join(steps)[:700] + (f" {when}" if when else "")
    return Draft(
        name=name,
        files={
            "SKILL.md": render_skill_md(
                name=name, description=description, body=body, metadata={"drafted-by": "rules"}
            )
        },
        summary=gettext("New skill %(name)s: %(steps)s") % {"name": name, "steps": " ".join(steps)},
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
    organization=None,
) -> Draft | None:
    """The model's draft; None when the model says this is not a skill. The draft quotes the
    task masked."""
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
    task = _masked(request, organization)[:300]
    description = clean_line(str(data.get("description") or "")) or f"When asked: {task[:200]}"
    body = "\n".join(
        [f"# {name.replace('-', ' ').capitalize()}", "", "## Steps", ""]
        + [f"{i}. {step}" for i, step in enumerate(steps, start=1)]
        + ["", "## Example", "", f"Request: {task}"]
    )
    drafted_by = f"model {provider.kind}:{provider.model}"
    return Draft(
        name=name,
        files={"SKILL.md": render_skill_md(name=name, description=description, body=body)},
        summary=clean_line(str(data.get("summary") or ""))
        or gettext("Skill %(name)s: %(steps)s") % {"name": name, "steps": "; ".join(steps)},
        drafted_by=drafted_by,
        kind="new_version" if base_skill_md else "new_skill",
    )
