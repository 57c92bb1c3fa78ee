"""The dedup funnel's parts: content normalization and hashing, near-duplicate candidates,
and the judges that decide duplicate / update / new (rules by default, a model if configured).

Funnel, within one scope (services.memory_dedup runs it):
1. exact — SHA-256 of the normalized content equals an active memory's (done at write time);
2. near — cosine similarity ≥ NEAR_THRESHOLD among the top NEAR_CANDIDATES active memories of
   the same scope under the active embedding model;
3. judge — memory's model (`extraction.memory_model`) or the rule judge decides.

Cosine thresholds are stated once, on the usual scale (unrelated texts ≈ 0, same meaning ≈ 1),
and moved onto the compared vectors' model with `embeddings.similarity_threshold`: 0.7 is
cosine 0.7 under all-MiniLM-L6-v2 and 0.94 under multilingual-e5-small, whose unrelated
texts already score ≈ 0.8. Vectors decide only which memories the judge looks at and, very
close, what may be a paraphrase; no cosine alone merges two memories whose meaningful words
(Chinese segmented with jieba, as the lexical side does) name another thing or another value.

A statement and a derived record (experience, tool trajectory, summary) are never candidates
of each other: what a run did is not what a person said (`comparable_kinds`).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass
from typing import Protocol

from cadre.llm import ModelProvider, ProviderError, chat_json
from cadre.memory.embeddings import similarity_threshold
from cadre.memory.extraction import charged, memory_model
from cadre.memory.models import (
    DERIVED_KINDS,
    STATEMENT_KINDS,
    Memory,
    MemoryEmbedding,
    SourceKind,
)
from cadre.memory.text import STOP_WORDS, known_word, tokenize

# On the usual cosine scale (see the module docstring; embeddings.similarity_threshold).
NEAR_THRESHOLD = 0.7  # candidates for the judge (MemOS's local plugin uses 0.75 on MiniLM)
NEAR_CANDIDATES = 5
DUPLICATE_COSINE = 0.92  # a paraphrase, if no value and no subject changed (MemOS server: 0.92)
UPDATE_OVERLAP = 0.5  # share of the smaller side's words: "same subject, other value"

DUPLICATE = "duplicate"
UPDATE = "update"
NEW = "new"

# A user statement outranks a tool result, which outranks a model inference. Imports count as
# what a person stated; system-written items as tool results.
AUTHORITY = {
    SourceKind.USER_STATEMENT: 3,
    SourceKind.IMPORT: 3,
    SourceKind.TOOL_RESULT: 2,
    SourceKind.SYSTEM: 2,
    SourceKind.MODEL_INFERENCE: 1,
}

_SPACE = re.compile(r"\s+")
_TRAILING = re.compile(r"[\s.。!！?？;；,，、]+$")


def normalize_content(text: str) -> str:
    """NFKC, case-folded, whitespace collapsed, trailing punctuation dropped."""
    text = unicodedata.normalize("NFKC", text or "").casefold()
    text = _SPACE.sub(" ", text).strip()
    return _TRAILING.sub("", text)


def content_hash(text: str) -> str:
    return hashlib.sha256(normalize_content(text).encode("utf-8")).hexdigest()


def _tokens(text: str) -> set[str]:
    """Words for overlap measures, Chinese cut into words as the lexical side does (工位 and
    工号 share no word; as single characters they would share 工)."""
    return set(_words(text))


def jaccard(a: str, b: str) -> float:
    left, right = _tokens(a), _tokens(b)
    if not left or not right:
        return 0.0
    return len(left & right) / len(left | right)


def overlap(a: str, b: str) -> float:
    left, right = _tokens(a), _tokens(b)
    if not left or not right:
        return 0.0
    return len(left & right) / min(len(left), len(right))


def authority(source_kind: str) -> int:
    return AUTHORITY.get(source_kind, 1)


def outranks(new: Memory, old: Memory) -> bool:
    """Does `new` replace `old`? Higher authority wins; within one authority, the newer."""
    if authority(new.source_kind) != authority(old.source_kind):
        return authority(new.source_kind) > authority(old.source_kind)
    return new.observed_at >= old.observed_at


def comparable_kinds(kind: str) -> list[str]:
    """The kinds a memory of `kind` may be a duplicate or an update of: a statement only of
    statements, a derived record (an experience, a tool call, a summary) only of its own kind.
    A run's record never absorbs, replaces or archives what a person stated, nor the reverse."""
    if kind in DERIVED_KINDS:
        return [str(kind)]
    return [str(other) for other in STATEMENT_KINDS]


def comparable(memory: Memory, other: Memory) -> bool:
    """May one of these two merge into, update or supersede the other?"""
    return str(other.kind) in comparable_kinds(memory.kind)


@dataclass
class Candidate:
    """A near memory; `similarity` is the cosine under the compared model, `duplicate_at` that
    model's cosine for DUPLICATE_COSINE (the threshold as stated when the model is unknown)."""

    memory: Memory
    similarity: float
    duplicate_at: float = DUPLICATE_COSINE


@dataclass
class Decision:
    decision: str  # duplicate | update | new
    target: Memory | None
    reason: str
    judge: str
    similarity: float | None = None

    def as_dict(self) -> dict:
        return {
            "decision": self.decision,
            "target_id": self.target.pk if self.target is not None else None,
            "judge": self.judge,
            "similarity": round(self.similarity, 4) if self.similarity is not None else None,
            "reason": self.reason,
        }


def near_candidates(
    memory: Memory,
    vector: list[float],
    model,
    *,
    threshold: float = NEAR_THRESHOLD,
    limit: int = NEAR_CANDIDATES,
) -> list[Candidate]:
    """Active memories of the same scope whose vector is within `threshold` cosine of `vector`,
    of a kind it may merge with (`comparable_kinds`: statements with statements only).
    `threshold` is on the usual scale: the SQL's cosine (1 - pgvector's cosine distance) is
    compared with its value on `model`'s scale (`embeddings.similarity_threshold`).

    Exact distances over the scope's rows: a scope holds few enough memories that an index
    scan (whose post-filtering loses rows, see REFERENCE) would only cost recall here.
    """
    from pgvector.django import CosineDistance

    near_at = similarity_threshold(model, threshold)
    duplicate_at = similarity_threshold(model, DUPLICATE_COSINE)
    rows = (
        MemoryEmbedding.objects.filter(
            model=model,
            memory__organization_id=memory.organization_id,
            memory__scope_key=memory.scope_key,
            memory__status=Memory.Status.ACTIVE,
            memory__kind__in=comparable_kinds(memory.kind),
        )
        .exclude(memory_id=memory.pk)
        .annotate(distance=CosineDistance("embedding", vector))
        .order_by("distance")
        .select_related("memory")[:limit]
    )
    found = []
    for row in rows:
        similarity = 1.0 - float(row.distance)
        if similarity >= near_at:
            found.append(
                Candidate(memory=row.memory, similarity=similarity, duplicate_at=duplicate_at)
            )
    return found


class Judge(Protocol):
    name: str

    def judge(self, memory: Memory, candidates: list[Candidate]) -> Decision: ...


_LATIN_WORD = re.compile(r"[^\W_\u3400-\u9fff]+")
_CJK_CHAR = re.compile(r"[\u3400-\u9fff]")


def _stem(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


NEGATIONS = frozenset(
    {
        "not",
        "no",
        "never",
        "none",
        "nor",
        "cannot",
        "without",
        "don",
        "doesn",
        "didn",
        "isn",
        "aren",
        "wasn",
        "weren",
        "won",
        "shouldn",
        "mustn",
        "stop",
        "stopped",
    }
)
# Chinese negations as jieba cuts them (不 / 没有 / 从不 …); any other word led by 不 or 没 is
# one too (不吃, 没去), except these, which negate nothing.
CHINESE_NEGATIONS = frozenset(
    [
        "不",
        "没",
        "没有",
        "未",
        "别",
        "无",
        "非",
        "勿",
        "莫",
        "从不",
        "从没",
        "从未",
        "并不",
        "并没有",
        "不再",
        "无法",
        "没法",
        "戒",
        "戒掉",
        "停止",
    ]
)
_NOT_NEGATIONS = frozenset(
    [
        "不过",
        "不同",
        "不断",
        "不少",
        "不仅",
        "不错",
        "不久",
        "不管",
        "不但",
        "不论",
        "不然",
        "不如",
        "没收",
        "没想到",
    ]
)
# Numbers written in Chinese (三, 十五, 两个) and days of the week (周二, 星期天, 礼拜一).
_CHINESE_NUMBER = re.compile(
    r"[零〇一二三四五六七八九十百千万亿两]+[个号楼层点时月日天岁年次位名]?"
    r"|(?:周|星期|礼拜)[一二三四五六日天]"
)
# The commonest family names: a word that starts with one and that jieba's dictionary does not
# know (李伟, 周敏; not 周报 or 过敏) is taken for a person's name.
_SURNAMES = frozenset(
    "王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘于蒋蔡余杜叶"
    "程苏魏吕丁任沈姚卢姜崔钟谭陆汪范金石廖贾夏韦付方白邹孟熊秦邱江尹薛闫段雷侯龙史陶黎贺顾"
    "毛郝龚邵万钱严覃武戴莫孔向汤欧"
)


def _words(text: str) -> list[str]:
    """The statement's words, in order: Chinese cut by jieba (precise mode, as
    `text.tokenize` does for the lexical side: 工位 and 工号 are two words), other text split
    into letter/digit runs, NFKC and lower-cased."""
    return tokenize(normalize_content(text), search_mode=False, stemmed=False)


def _negation(word: str) -> bool:
    if word in NEGATIONS or word in CHINESE_NEGATIONS:
        return True
    return word[:1] in ("不", "没") and word not in _NOT_NEGATIONS


def _chinese_name(word: str) -> bool:
    if not 2 <= len(word) <= 3 or word[0] not in _SURNAMES or not _CJK_CHAR.match(word):
        return False
    return not known_word(word)


def _numeric(word: str) -> bool:
    return any(ch.isdigit() for ch in word) or bool(_CHINESE_NUMBER.fullmatch(word))


def ordered_words(text: str) -> list[str]:
    """Words that carry meaning, in order: stop words dropped (negations kept), plurals
    folded, Chinese segmented into words."""
    words = []
    for token in _words(text):
        if _CJK_CHAR.match(token):
            if token not in STOP_WORDS or _negation(token):
                words.append(token)
        elif token in NEGATIONS or (
            token not in STOP_WORDS and (len(token) > 1 or token.isdigit())
        ):
            words.append(_stem(token))
    return words


def content_words(text: str) -> set[str]:
    """The set of `ordered_words`."""
    return set(ordered_words(text))


# Words that say a value changed, not what the statement is about (搬到 15 楼, 换成了周敏,
# "now on floor 15").
CHANGE_WORDS = frozenset(
    [
        "now",
        "moved",
        "move",
        "changed",
        "change",
        "switched",
        "switch",
        "updated",
        "new",
        "longer",
        "since",
        "starting",
        "搬到",
        "搬",
        "换成",
        "换到",
        "换",
        "改到",
        "改成",
        "改为",
        "改",
        "变成",
        "变为",
        "调到",
        "调整",
        "现在",
        "已经",
        "目前",
        "最近",
        "开始",
        "不再",
    ]
)


def _about(text: str, changed: set[str]) -> list[str]:
    """What a statement is about: its meaningful words before its first changed value
    (`changed`), without the words that only say something changed."""
    about = []
    for word in ordered_words(text):
        if word in changed:
            break
        if word not in CHANGE_WORDS:
            about.append(word)
    return about


def same_topic(new_text: str, old_text: str) -> bool:
    """Does each statement's first meaningful word (change words aside) occur in the other?
    A qualifier or another owner in front (备用手机号, 我妈妈对…, "my personal email") makes
    it a statement about another thing, whatever the rest shares."""
    mine = [w for w in ordered_words(new_text) if w not in CHANGE_WORDS and not _negation(w)]
    theirs = [w for w in ordered_words(old_text) if w not in CHANGE_WORDS and not _negation(w)]
    if not mine or not theirs:
        return False
    return mine[0] in theirs and theirs[0] in mine


def same_slot(new_text: str, old_text: str) -> bool:
    """Do the two statements give another value to the same thing? The words before the
    first changed value agree (我的工位 | 12 楼 / 我的工位搬到了 | 15 楼; "my manager is" |
    Li Wei / Zhou Min), and are not empty (我的 VPN | 账号 / 我的 Jenkins | 账号: the changed
    "value" names the thing). A negation toggled ("I like tea" / "I don't like tea") changes
    the same statement when the other meaningful words agree."""
    mine, theirs = value_words(new_text), value_words(old_text)
    changed = (mine - theirs) | (theirs - mine)
    if not changed:
        return False
    if all(_negation(word) for word in changed):
        # 不喝 / 喝: what is negated counts as said on both sides.
        negated = {w[1:] for w in changed if _CJK_CHAR.match(w) and w not in CHINESE_NEGATIONS}

        def rest(text: str) -> set[str]:
            return (content_words(text) | negated) - changed - CHANGE_WORDS

        return rest(new_text) == rest(old_text)
    about_new, about_old = _about(new_text, changed), _about(old_text, changed)
    return bool(about_new) and sorted(about_new) == sorted(about_old)


def word_overlap(a: str, b: str) -> float:
    """Shared meaningful words over the smaller side's (`content_words`)."""
    left, right = content_words(a), content_words(b)
    if not left or not right:
        return 0.0
    return len(left & right) / min(len(left), len(right))


def subject_overlap(a: str, b: str) -> float:
    """`word_overlap` over the words that are not values (`value_words`): what the two
    statements are about ("my manager", 工位 … 楼), whatever value each gives it."""
    left = content_words(a) - value_words(a)
    right = content_words(b) - value_words(b)
    if not left or not right:
        return 0.0
    return len(left & right) / min(len(left), len(right))


def value_words(text: str) -> set[str]:
    """Words that name a value: numbers and IDs (SZ20931, 12, 十五, 周二), names (capitalized
    mid-sentence; a Chinese family name and given name), negations (not, 不, 没有).
    Embeddings barely separate "budget is 2 million" from "budget is 3 million" (cosine 0.95
    with all-MiniLM-L6-v2 and multilingual-e5-small), so a difference in these words means
    "update" or another fact, never "duplicate"."""
    values = set()
    # In ALL-CAPS text capitalization says nothing: only numbers and negations count there.
    shouting = (text or "").isupper()
    for match in _LATIN_WORD.finditer(text or ""):
        word = match.group(0)
        folded = unicodedata.normalize("NFKC", word).casefold()
        if (
            any(ch.isdigit() for ch in word)
            or (
                not shouting
                and match.start() > 0
                and word[0].isupper()
                and folded not in STOP_WORDS  # "I", "I'm"
            )
            or folded in NEGATIONS
        ):
            values.add(_stem(folded))
    for word in _words(text):
        if _CJK_CHAR.match(word) and (_numeric(word) or _negation(word) or _chinese_name(word)):
            values.add(word)
    return values


def value_changes(new_text: str, old_text: str) -> tuple[bool, bool]:
    """(values changed, subject substituted) between two statements.

    A number, an ID or a negation on one side only is a changed value ("budget is 2 million" /
    "3 million", 12 楼 / 15 楼, 喜欢 / 不喜欢). A name on each side that the other lacks ("Li Wei
    sends the report" / "Tang Yu sends the report", or 李伟/唐宇) is a different subject:
    another fact, never an update of this one. Words present on one side only (an added "all",
    都会) are elaboration.
    """
    mine, theirs = value_words(new_text), value_words(old_text)
    only_mine, only_theirs = mine - theirs, theirs - mine

    def numeric(word: str) -> bool:
        return _numeric(word) or _negation(word)

    values_changed = bool(only_mine | only_theirs)
    # A name swapped where the sentence starts is its subject ("Li Wei sends…"); a name
    # swapped later is the value ("My manager is Li Wei" → "… is Zhou Min": an update).
    # The subject may lead on one side only ("Lin Xue needs invoices…" / "Invoices for Zhou
    # Lin must be sent…"): a swap counts as a new subject when either side leads with it.
    names_mine = {w for w in only_mine if not numeric(w)}
    names_theirs = {w for w in only_theirs if not numeric(w)}
    leading = bool(names_mine & _leading_words(new_text)) or bool(
        names_theirs & _leading_words(old_text)
    )
    return values_changed, bool(names_mine) and bool(names_theirs) and leading


def substituted_words(new_text: str, old_text: str) -> bool:
    """Does each side have a meaningful Chinese word the other lacks (工位 / 工号, 花生 / 青霉素)?
    In Chinese that names another thing far more often than it rewords the same one."""
    mine, theirs = content_words(new_text), content_words(old_text)
    return any(_CJK_CHAR.match(w) for w in mine - theirs) and any(
        _CJK_CHAR.match(w) for w in theirs - mine
    )


def _leading_words(text: str) -> set[str]:
    """The first two words of a statement, whatever their language (stop words included:
    "My manager is Li Wei" and 我的经理是李伟 do not lead with the name)."""
    return {_stem(word) for word in _words(text)[:2]}


class RuleJudge:
    """The judge without a model. duplicate: the same meaningful words, or a close paraphrase
    (cosine ≥ DUPLICATE_COSINE on the model's scale) that shares most words and its topic,
    changes no value and no subject and, in Chinese, swaps no word for another; update: same
    kind, topic and subject, and a changed value — a number or ID, a name, a negation — in the
    same slot (`same_slot`); new:
    anything else — in particular the same frame about another thing (工位 / 工号, peanuts /
    penicillin) or another person, which must never replace this one. Without a changed value
    two statements are both kept: a missed update costs a stale line, a false one a fact."""

    name = "rules"

    def judge(self, memory: Memory, candidates: list[Candidate]) -> Decision:
        best_update: Candidate | None = None
        mine = content_words(memory.content)
        for candidate in candidates:
            other = candidate.memory
            theirs = content_words(other.content)
            values_changed, subject_changed = value_changes(memory.content, other.content)
            shared = word_overlap(memory.content, other.content)
            if mine == theirs or (
                candidate.similarity >= candidate.duplicate_at
                and shared >= UPDATE_OVERLAP
                and same_topic(memory.content, other.content)
                and not values_changed
                and not subject_changed
                and not substituted_words(memory.content, other.content)
            ):
                return Decision(
                    DUPLICATE,
                    other,
                    f"near duplicate (cosine {candidate.similarity:.3f}, no value changed)",
                    self.name,
                    candidate.similarity,
                )
            if (
                best_update is None
                and values_changed
                and not subject_changed
                and other.kind == memory.kind
                and subject_overlap(memory.content, other.content) >= UPDATE_OVERLAP
                and same_topic(memory.content, other.content)
                and same_slot(memory.content, other.content)
            ):
                best_update = candidate
        if best_update is not None:
            return Decision(
                UPDATE,
                best_update.memory,
                f"same subject, different value (cosine {best_update.similarity:.3f})",
                self.name,
                best_update.similarity,
            )
        return Decision(NEW, None, "no candidate says the same thing", self.name)


JUDGE_PROMPT = """You deduplicate a memory store. Given a NEW memory and CANDIDATES already
stored (each with an id), answer with a JSON object {"decision": "duplicate" | "update" |
"new", "target_id": the candidate id it duplicates or updates (null for new), "reason": a
short explanation}. "duplicate": the new memory says nothing the candidate does not already
say. "update": it is about the same thing as the candidate but the value changed (the newer
statement should replace the older). "new": anything else."""


class ModelJudge:
    name = "model"

    def __init__(self, model: ModelProvider):
        self.model = model

    def judge(self, memory: Memory, candidates: list[Candidate]) -> Decision:
        if not candidates:
            return Decision(NEW, None, "no near candidates", self.name)
        listing = "\n".join(
            f"- id {c.memory.pk} ({c.memory.kind}, cosine {c.similarity:.2f}): {c.memory.content}"
            for c in candidates
        )
        with charged("memory.dedup", organization_id=memory.organization_id):
            answer = chat_json(
                self.model,
                JUDGE_PROMPT,
                f"NEW ({memory.kind}): {memory.content}\nCANDIDATES:\n{listing}",
            )
        decision = str(answer.get("decision", "")).lower()
        if decision not in (DUPLICATE, UPDATE, NEW):
            raise ProviderError(f"judge answered an unknown decision {decision!r}")
        target = None
        if decision != NEW:
            by_id = {c.memory.pk: c for c in candidates}
            try:
                chosen = by_id.get(int(answer.get("target_id")))
            except (TypeError, ValueError):
                chosen = None
            if chosen is None:
                raise ProviderError("judge named no valid candidate")
            target = chosen.memory
            similarity = chosen.similarity
        else:
            similarity = None
        reason = str(answer.get("reason", ""))[:500]
        return Decision(decision, target, reason, f"model:{self.model.model}", similarity)


class FallbackJudge:
    def __init__(self, primary: ModelJudge):
        self.primary = primary
        self.name = primary.name

    def judge(self, memory: Memory, candidates: list[Candidate]) -> Decision:
        try:
            return self.primary.judge(memory, candidates)
        except ProviderError as error:
            decision = RuleJudge().judge(memory, candidates)
            decision.judge = "rules (model failed)"
            decision.reason = f"{decision.reason}; model error: {str(error)[:200]}"
            return decision


def judge() -> Judge:
    model = memory_model()
    if model is None:
        return RuleJudge()
    return FallbackJudge(ModelJudge(model))
