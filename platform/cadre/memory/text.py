"""Tokenization for memory full-text search: CJK-aware, mixed-language, stop-word aware.

PostgreSQL's `simple` text-search configuration only lower-cases and splits on non-word
characters, so a Chinese sentence would become one giant "word". Cadre therefore stores a
pre-segmented lexical document in `Memory.search_text`: Chinese runs are segmented with jieba
(search mode, so both words and their sub-words are indexed), everything else is split into
letter/digit runs. Every token is made only of characters PostgreSQL's parser keeps together,
so `to_tsvector('simple', search_text)` yields exactly these tokens and query terms built by
`query_terms` match them one for one.
"""

from __future__ import annotations

import logging
import re
import threading
import unicodedata
from datetime import datetime

# CJK ideographs (unified + extension A + compatibility) — the runs jieba segments.
_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_CJK_RUN = re.compile(f"[{_CJK}]+")
# A "word" for the non-CJK parts: letters and digits only (no underscore, no punctuation), so
# "e-mail" -> "e", "mail" and "don't" -> "don", "t", exactly as PostgreSQL splits them.
_WORD = re.compile(f"[^\\W_{_CJK}]+")
_SEGMENT = re.compile(f"[{_CJK}]+|[^\\W_{_CJK}]+")

_jieba_lock = threading.Lock()
_jieba = None


# How much a CJK ideograph says against a Latin letter, for matching a text inside others: a
# Chinese word is 1.5 ideographs on average, an English one 5 letters and a space, so a
# phrase takes about a third as many characters in Chinese ("我喜欢绿茶", "I like green tea").
CJK_CHARACTER_WEIGHT = 3


def match_length(text: str) -> int:
    """A text's length for deciding whether finding it inside another text means the other
    quotes it: its characters, an ideograph counting CJK_CHARACTER_WEIGHT."""
    ideographs = sum(len(run) for run in _CJK_RUN.findall(text))
    return len(text) + (CJK_CHARACTER_WEIGHT - 1) * ideographs


def _segmenter():
    """jieba, imported and initialised once per process, without its start-up chatter."""
    global _jieba
    if _jieba is None:
        with _jieba_lock:
            if _jieba is None:
                import jieba

                jieba.setLogLevel(logging.WARNING)
                jieba.initialize()  # builds its prefix dictionary from the packaged file
                _jieba = jieba
    return _jieba


def known_word(word: str) -> bool:
    """Whether jieba's dictionary has `word` (a Chinese word it does not know is often a
    name)."""
    return bool(_segmenter().dt.FREQ.get(word))


_VOWELS = frozenset("aeiouy")


def stem(token: str) -> str:
    """A light English stemmer (no dependency): folds plurals and -ed/-ing forms so that
    "painted", "painting" and "paints" all meet "paint", and "hiked"/"hiking" meet "hike".
    Stems need not be words; they only have to agree between documents and queries."""
    if len(token) <= 3 or not token.isascii() or not token.isalpha():
        return token
    word = token
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("sses"):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    verb_suffix = True
    if word.endswith("ied") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("ing") and len(word) - 3 >= 3 and _VOWELS & set(word[:-3]):
        word = word[:-3]
    elif word.endswith("ed") and len(word) - 2 >= 3 and _VOWELS & set(word[:-2]):
        word = word[:-2]
    else:
        verb_suffix = False
    # running -> runn -> run; stopped -> stopp -> stop (but keep fall, miss, buzz)
    if verb_suffix and len(word) > 3 and word[-1] == word[-2] and word[-1] not in "lszaeiou":
        word = word[:-1]
    if word.endswith("e") and len(word) > 3:
        word = word[:-1]  # bake/baked/baking -> bak
    return word


def tokenize(text: str, *, search_mode: bool = True, stemmed: bool = True) -> list[str]:
    """Lower-cased tokens of `text` in order; Chinese segmented into words (and sub-words),
    English words stemmed (`stem`) unless `stemmed=False`."""
    if not text:
        return []
    text = unicodedata.normalize("NFKC", text).lower()
    tokens: list[str] = []
    for match in _SEGMENT.finditer(text):
        piece = match.group(0)
        if _CJK_RUN.fullmatch(piece):
            jieba = _segmenter()
            cut = jieba.cut_for_search(piece) if search_mode else jieba.cut(piece)
            tokens.extend(word for word in cut if word.strip())
        else:
            tokens.append(stem(piece) if stemmed else piece)
    return tokens


# Function words of questions and small talk. They are kept in the stored document (harmless)
# but dropped from queries, where an OR over them would match almost every memory.


def _word_set(words: str) -> frozenset[str]:
    return frozenset(words.split())


ENGLISH_STOP_WORDS = _word_set(
    """
    a about above after again against all am an and any are aren as at be because been before
    being below between both but by can could did didn do does doesn doing don down during each
    few for from further had hadn has hasn have haven having he her here hers herself him himself
    his how i if in into is isn it its itself just let ll me might more most must my myself no nor
    not now of off on once only or other ought our ours ourselves out over own re same shall she
    should so some such t than that the their theirs them themselves then there these they this
    those through to too under until up us very was wasn we were weren what when where which while
    who whom whose why will with won would you your yours yourself yourselves s d m ve y
    also ever kind get got go going like really would yeah oh hey hi hello
    """
)
CHINESE_STOP_WORDS = _word_set(
    """
    的 了 是 在 我 你 他 她 它 我们 你们 他们 她们 吗 呢 吧 啊 呀 哦 嗯 么 谁 什么 哪 哪里 哪儿
    哪个 怎么 怎样 如何 为什么 几 多少 和 与 及 或 把 被 就 都 也 还 这 那 这个 那个 这些 那些
    有 没有 一个 一下 请 请问 要 会 能 可以 吗 呢 之 其 个 么 让 给 对 从 到 上 下 中 里
    """
)
STOP_WORDS = ENGLISH_STOP_WORDS | CHINESE_STOP_WORDS

# Acknowledgements and fillers: a message made only of these asks nothing of memory.
ACKNOWLEDGEMENTS = _word_set(
    """
    ok okay k kk yes yep yup no nope sure thanks thank thx ty cool nice great good fine got it
    lol haha hmm hm um uh ah alright right bye goodbye noted done gotcha
    好 好的 好滴 好吧 嗯 嗯嗯 哦 哦哦 噢 啊 行 可以 收到 谢谢 多谢 感谢 谢 了 对 是 是的 没问题
    明白 知道 知道了 好嘞 哈 哈哈 哈哈哈 拜拜 再见 ok了
    """
)


def content_terms(text: str) -> list[str]:
    """Distinct query terms worth searching for, in first-seen order (stop words dropped)."""
    seen: dict[str, None] = {}
    for token in tokenize(text, stemmed=False):
        if token in STOP_WORDS or token in ACKNOWLEDGEMENTS:
            continue
        if len(token) == 1 and token.isascii() and not token.isdigit():
            continue  # stray letters from contractions and initials
        seen.setdefault(stem(token), None)
    return list(seen)


_MONTHS = (
    "january", "february", "march", "april", "may", "june",
    "july", "august", "september", "october", "november", "december",
)  # fmt: skip


def date_words(moment: datetime) -> list[str]:
    """Words a person would use for a date: '8 may 2023' plus '2023年5月8日' segments."""
    return [
        str(moment.day),
        _MONTHS[moment.month - 1],
        str(moment.year),
        f"{moment.year}年",
        f"{moment.month}月",
        f"{moment.day}日",
    ]


def lexical_document(content: str, attributes: dict | None = None) -> str:
    """The text stored in `Memory.search_text` for full-text search (see module docstring).

    Attribute text that helps people find a memory is appended: speaker/author names, topic,
    title, and the words of a `date`/`session_date` attribute (ISO format) when present.
    """
    parts = [content or ""]
    for key in ("speaker", "author", "title", "topic", "subject", "caption", "keywords"):
        value = (attributes or {}).get(key)
        if isinstance(value, str):
            parts.append(value)
        elif isinstance(value, list):
            parts.extend(str(item) for item in value if isinstance(item, str | int))
    tokens = tokenize(" ".join(parts))
    for key in ("date", "session_date"):
        value = (attributes or {}).get(key)
        if isinstance(value, str):
            try:
                moment = datetime.fromisoformat(value)
            except ValueError:
                continue
            tokens.extend(tokenize(" ".join(date_words(moment))))
            break
    return " ".join(tokens)
