"""The DIRECTORY recognizer: the organization's own members, known by name and contact details.

Each organization's members (display names in Chinese or Latin script, IM display names,
e-mail addresses, mobiles, IM user ids) become one Aho-Corasick automaton (`pyahocorasick`)
over lower-cased terms, so a message is scanned once whatever the size of the directory.

What counts as a mention (context rules):

- a full name — Chinese of 2-4 characters (`张伟明`), Latin of two or more words
  (`Wei Zhang`, also written `Zhang Wei`) — counts anywhere, Latin at word boundaries;
- a Chinese name that is also an ordinary word (`高兴`, `金山`, `平安`: `COMMON_WORDS`) and a
  Chinese given name alone (`伟明` for 张伟明; two characters or more) count only next to a
  person cue: `@` or a verb of address before (`找`, `问`, `让`, `跟`, `和`, `给`, `请`, `叫`),
  or a title or address after (`总`, `老师`, `经理`, `同学`, `说`, `在吗`, `你`, `，`, `：`…);
- a one-word Latin name counts written as the directory writes it (`Alice`, not `alice`); if
  it is an ordinary English word (`Will`, `Rose`, `Mark`: `COMMON_WORDS`) only after `@` or a
  title (`Mr`, `Ms`, `Dr`);
- e-mails, mobiles (digits, `+86` optional) and IM user ids (four characters or more) count
  at ASCII boundaries.

Detections have type `DIRECTORY` and score 0.7, below the built-in recognizers: a member's
e-mail stays an `EMAIL`, their mobile a `CN_PHONE`; the directory adds what the built-ins do not
know (names, IM ids).

Freshness: the automaton is cached per organization and rebuilt when a Member or IMIdentity of
it is saved or deleted (`post_save` / `post_delete` bump a version in Django's cache, which
every worker checks, one cache read per call).
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass

import ahocorasick

from cadre.governance.masking.recognizers import Detection

DIRECTORY_TYPE = "DIRECTORY"
SCORE = 0.7

NAME, COMMON, GIVEN, LATIN_WORD, CONTACT = "name", "common", "given", "latin_word", "contact"

# Two-character Chinese words that are also given or full names (高兴 Gao Xing, 金山 Jin Shan…),
# and English words that are first names: these need a person cue.
_COMMON_WORDS_TEXT = """
高兴 金山 平安 安全 光明 文明 江山 王国 海洋 春天 周到 方便 黄金 白云 高明 万里 明天 东方 江南 林立
马上 安静 高峰 向东 国庆 建国 建华 华夏 中华 和平 胜利 海燕 朝阳 红旗 长江 黄河 天明 雷雨 文化 成功
金星 高山 程序 于是 牛奶 司马 欧阳 宇宙 明明 小明 明月 春风 秋雨 晨曦 新月 志愿
will may rose grant bill mark hope joy june april summer faith art guy frank sunny lucky cherry
amber ivy dawn autumn jack penny rich sterling victor major page chase bishop
"""
COMMON_WORDS = frozenset(_COMMON_WORDS_TEXT.split())
_CUE_BEFORE = ("@", "找", "问", "让", "跟", "和", "给", "请", "叫", "催", "通知", "联系", "cc ")
# After a name: a title or a verb of speech (enough for a name that is an ordinary word) …
_TITLE_AFTER = re.compile(
    r"(?:总|老师|经理|主管|总监|同学|同事|老板|哥|姐|工|先生|女士|小姐|说|讲|在吗|回复|负责)"
)
# … or, for a given name alone, also addressing punctuation or a pronoun (`伟明，你看下`).
_CUE_AFTER = re.compile(r"(?:[，,：:、！!？?\s]|你|您)")
_TITLE_BEFORE = re.compile(r"(?:^|[^A-Za-z])(?:mr|mrs|ms|miss|dr|prof)\.?\s*$", re.I)
_SURNAME_FIRST = 1  # Chinese surnames are one character, save a few compound ones below
# (Chinese given names alone are taken from names of three characters or more.)
_COMPOUND_SURNAMES = (
    "欧阳",
    "司马",
    "上官",
    "诸葛",
    "东方",
    "皇甫",
    "令狐",
    "慕容",
    "尉迟",
    "长孙",
)


def _is_cjk(text: str) -> bool:
    return all("\u3400" <= ch <= "\u9fff" for ch in text)


def _ascii_word(ch: str) -> bool:
    return ch.isascii() and (ch.isalnum() or ch in "_")


@dataclass(frozen=True)
class Entry:
    term: str  # as the directory writes it
    kind: str


class Directory:
    """The automaton for one organization's members."""

    def __init__(self, members: list[dict]):
        self.automaton = ahocorasick.Automaton()
        entries: dict[str, list[Entry]] = {}

        def add(term: str, kind: str) -> None:
            term = term.strip()
            if term:
                entries.setdefault(term.lower(), []).append(Entry(term, kind))

        for member in members:
            for name in member.get("names", ()):
                name = " ".join(name.split())
                if not name:
                    continue
                if _is_cjk(name.replace(" ", "")):
                    name = name.replace(" ", "")
                    if 2 <= len(name) <= 5:
                        add(name, COMMON if name in COMMON_WORDS else NAME)
                        surname = next(
                            (s for s in _COMPOUND_SURNAMES if name.startswith(s) and len(name) > 2),
                            name[:_SURNAME_FIRST],
                        )
                        given = name[len(surname) :]
                        if len(name) >= 3 and len(given) >= 2:
                            add(given, COMMON if given in COMMON_WORDS else GIVEN)
                elif name.isascii():
                    words = name.split()
                    if len(words) >= 2:
                        add(name, NAME)
                        if len(words) == 2:
                            add(f"{words[1]} {words[0]}", NAME)
                    elif len(name) >= 3:
                        add(name, LATIN_WORD)
            for contact in member.get("contacts", ()):
                contact = contact.strip()
                if len(contact) >= 4:
                    add(contact, CONTACT)
                    digits = "".join(ch for ch in contact if ch.isdigit())
                    if contact.startswith("+86") and len(digits) == 13:
                        add(digits[2:], CONTACT)
        for key, found in entries.items():
            self.automaton.add_word(key, (len(key), tuple(found)))
        self.empty = not entries
        if not self.empty:
            self.automaton.make_automaton()

    def scan(self, text: str, lowered: str | None = None) -> list[Detection]:
        if self.empty or not text:
            return []
        lowered = text.lower() if lowered is None else lowered
        if len(lowered) != len(text):
            return []  # lower-casing changed the length (rare scripts): offsets would not match
        found = []
        for last, (size, entries) in self.automaton.iter(lowered):
            start, end = last - size + 1, last + 1
            if any(self._counts(entry, text, start, end) for entry in entries):
                found.append(Detection(start, end, DIRECTORY_TYPE, SCORE, "directory"))
        return _longest(found)

    @staticmethod
    def _counts(entry: Entry, text: str, start: int, end: int) -> bool:
        ascii_term = entry.term.isascii()
        if ascii_term and (
            (start > 0 and _ascii_word(text[start - 1]))
            or (end < len(text) and _ascii_word(text[end]))
        ):
            return False
        if entry.kind in (NAME, CONTACT):
            return True
        if entry.kind == LATIN_WORD:
            if text[start:end] != entry.term:
                return False
            if entry.term.lower() not in COMMON_WORDS:
                return True
            before = text[max(0, start - 6) : start]
            return before.endswith("@") or _TITLE_BEFORE.search(before) is not None
        # COMMON and GIVEN: a person cue on either side (a full name around a given name
        # wins as the longer hit).
        if text[max(0, start - 3) : start].endswith(_CUE_BEFORE):
            return True
        if _TITLE_AFTER.match(text, end) is not None:
            return True
        return entry.kind == GIVEN and (end == len(text) or _CUE_AFTER.match(text, end) is not None)


def _longest(found: list[Detection]) -> list[Detection]:
    """Overlapping directory hits: the longest wins (张伟明 over 伟明)."""
    found.sort(key=lambda d: (-(d.end - d.start), d.start))
    kept: list[Detection] = []
    for candidate in found:
        if all(candidate.end <= other.start or candidate.start >= other.end for other in kept):
            kept.append(candidate)
    return kept


# --- per-organization cache ----------------------------------------------------------------------

_cache: dict[int, tuple[int, Directory]] = {}
_lock = threading.Lock()


def _version_key(organization_id: int) -> str:
    return f"masking:directory:{organization_id}"


def directory_for(organization) -> Directory:
    """The organization's directory automaton; rebuilt after its members changed."""
    from django.core.cache import cache

    version = cache.get(_version_key(organization.pk), 0)
    cached = _cache.get(organization.pk)
    if cached is not None and cached[0] == version:
        return cached[1]
    directory = Directory(load_members(organization.pk))
    with _lock:
        _cache[organization.pk] = (version, directory)
    return directory


def load_members(organization_id: int) -> list[dict]:
    # lazy: settings — the engine and its directory run without Django (the masking benches).
    from cadre.tenancy.models import IMIdentity, Member

    members: dict[int, dict] = {}
    for pk, name, email, mobile in Member.objects.filter(
        organization_id=organization_id
    ).values_list("pk", "display_name", "email", "mobile"):
        members[pk] = {"names": [name], "contacts": [email, mobile]}
    for member_id, name, user_id in IMIdentity.objects.filter(
        organization_id=organization_id
    ).values_list("member_id", "display_name", "platform_user_id"):
        entry = members.setdefault(member_id, {"names": [], "contacts": []})
        entry["names"].append(name)
        entry["contacts"].append(user_id)
    return list(members.values())


def members_changed(sender, instance, **kwargs) -> None:
    """`post_save` / `post_delete` of a Member or IMIdentity: the next call rebuilds."""
    from django.core.cache import cache

    key = _version_key(instance.organization_id)
    try:
        cache.incr(key)
    except ValueError:
        cache.set(key, 1, timeout=None)
    _cache.pop(instance.organization_id, None)


def connect_signals() -> None:
    from django.db.models.signals import post_delete, post_save

    for model in ("tenancy.Member", "tenancy.IMIdentity"):
        post_save.connect(members_changed, sender=model, dispatch_uid=f"masking-dir-{model}")
        post_delete.connect(members_changed, sender=model, dispatch_uid=f"masking-dir-del-{model}")
