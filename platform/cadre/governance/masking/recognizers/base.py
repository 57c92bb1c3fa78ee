"""The recognizer machinery: entity types, `Detection`, `CadreRecognizer` (fast `scan()`,
context and rival keywords) and overlap resolution."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from cadre.governance.masking.recognizers.text import fold_width, glued_ok

ENTITY_TYPES = (
    "CN_PHONE",
    "CN_ID",
    "PAYMENT_CARD",
    "EMAIL",
    "IP_ADDRESS",
    "PASSPORT",
    "US_SSN",
    "IBAN",
    "SECRET",
)

# Tie-break between overlapping detections of equal score and length (lower wins).
TYPE_PRIORITY = {name: index for index, name in enumerate(
    ("SECRET", "CN_ID", "PAYMENT_CARD", "IBAN", "US_SSN", "PASSPORT", "CN_PHONE", "EMAIL",
     "IP_ADDRESS")
)}  # fmt: skip
CUSTOM_PRIORITY = len(TYPE_PRIORITY)


@dataclass(frozen=True, slots=True)
class Detection:
    start: int
    end: int
    type: str
    score: float
    recognizer: str

    def as_dict(self) -> dict:
        return {
            "type": self.type,
            "start": self.start,
            "end": self.end,
            "score": round(self.score, 3),
            "recognizer": self.recognizer,
        }


Validator = Callable[[str, str, int, int], bool]  # (value, text, start, end) -> keep?


class CadreRecognizer:
    """A pattern recognizer with a fast `scan()` (Presidio adapter: `presidio.as_presidio`).

    `span_group` names the regex group that is the reported span (e.g. only the value of
    `password=…`). `context` words within `window` characters make a match count when
    `context_required`; text just before a match that ends with `negative_context` (a regex)
    rejects it. `rival_context` words belong to another kind of number: when the keyword
    nearest before the match (or, with none before, nearest after it) is a rival, the match is
    not this type (`SSN 290-12-6062, passport 779080417`: the 9 digits belong to "passport").
    """

    def __init__(
        self,
        *,
        name: str,
        entity: str,
        patterns: Sequence[tuple[str, str]],
        score: float,
        flags: int = 0,
        validator: Validator | None = None,
        span_group: str | None = None,
        literals: Sequence[str] = (),
        context: Sequence[str] = (),
        context_required: bool = False,
        window: int = 48,
        negative_context: str | None = None,
        negative_window: int = 24,
        rival_context: Sequence[str] = (),
        glue: bool = False,
        precheck: str | None = None,
        keyword_claims: bool = False,
    ):
        self.name = name
        self.glue = glue
        # A keyword introduces the value that follows it (and a list continuing it), not any
        # number further on: see `_introduces`.
        self.keyword_claims = keyword_claims
        # A cheap regex that must find something in the lower-cased text before the patterns run.
        self.precheck = re.compile(precheck) if precheck else None
        self.supported_entities = [entity]
        self.patterns = list(patterns)
        self.flags = flags
        self.entity = entity
        self.score = score
        self.validator = validator
        self.span_group = span_group
        self.literals = tuple(literals)
        self.context_words = tuple(word.lower() for word in context)
        self.context_required = context_required
        self.window = window
        # A regex that, matching the end of the text just before a match, rejects it.
        self.negative_context = re.compile(negative_context) if negative_context else None
        self.negative_window = negative_window
        self.rival_words = tuple(word.lower() for word in rival_context)
        # One alternation of every keyword (no lookarounds, so the regex engine skips ahead to
        # their first characters); which side a hit is on comes from `keyword_side`.
        self.keyword_side = {word: False for word in self.context_words}
        self.keyword_side.update({word: True for word in self.rival_words})
        self.keywords = _alternation(self.keyword_side)
        self.context_regex = _alternation(self.context_words)
        self.compiled = [re.compile(regex, flags) for _, regex in patterns]

    # --- Presidio interface ------------------------------------------------------------------

    def validate_result(self, pattern_text: str) -> bool | None:
        if self.validator is None:
            return None
        return self.validator(pattern_text, pattern_text, 0, len(pattern_text))

    def analyze(self, text: str, entities=None, nlp_artifacts=None) -> list[Detection]:
        if entities and self.entity not in entities:
            return []
        text = fold_width(text)
        return self.scan(text, text.lower())

    # --- the fast path -----------------------------------------------------------------------

    def _near(self, lowered: str, start: int, end: int) -> bool:
        """A context word within `window` characters before or `window // 2` after the match;
        an ASCII word not as the tail of a longer word (`ssn` is not in "className")."""
        low, high = max(0, start - self.window), end + self.window // 2
        for hit in self.context_regex.finditer(lowered, low, high):
            if not self._is_word(lowered, hit):
                continue
            if not self.keyword_claims:
                return True
            if hit.end() <= start:
                if _introduces(lowered, hit.end(), start):
                    return True
            elif hit.start() >= end and not _has_own_value(lowered, hit.end()):
                return True
        return False

    def _rival_wins(self, lowered: str, start: int, end: int) -> bool:
        """The nearest keyword before the match (else the nearest after it) is a rival's.
        An ASCII keyword must not be the tail of a longer word (`ssn` is not in "Passnummer")."""
        nearest = None
        for hit in self.keywords.finditer(lowered, max(0, start - self.window), start):
            if self._is_word(lowered, hit):
                nearest = hit
        if nearest is None:
            for hit in self.keywords.finditer(lowered, end, end + self.window // 2):
                if self._is_word(lowered, hit):
                    nearest = hit
                    break
        return nearest is not None and self.keyword_side[nearest.group()]

    @staticmethod
    def _is_word(lowered: str, hit: re.Match) -> bool:
        start = hit.start()
        return not (hit.group()[0].isascii() and start and "a" <= lowered[start - 1] <= "z")

    def scan(self, text: str, lowered: str) -> list[Detection]:
        if self.literals and not any(literal in text for literal in self.literals):
            return []
        if self.context_required and not any(word in lowered for word in self.context_words):
            return []
        if self.precheck is not None and self.precheck.search(lowered) is None:
            return []
        found: list[Detection] = []
        for compiled in self.compiled:
            for match in compiled.finditer(text):
                if self.span_group and match.group(self.span_group) is not None:
                    start, end = match.span(self.span_group)
                else:
                    start, end = match.span()
                start, end = self.trim(text, start, end)
                if end <= start:
                    continue
                value = text[start:end]
                if self.validator is not None and not self.validator(value, text, start, end):
                    continue
                if self.glue and not glued_ok(text, start, end):
                    continue
                if self.context_required and not self._near(lowered, start, end):
                    continue
                if self.negative_context is not None and self.negative_context.search(
                    lowered, max(0, start - self.negative_window), start
                ):
                    continue
                if self.rival_words and self._rival_wins(lowered, start, end):
                    continue
                found.append(Detection(start, end, self.entity, self.score, self.name))
        return found

    def trim(self, text: str, start: int, end: int) -> tuple[int, int]:
        return start, end


class TrailingPunctuationRecognizer(CadreRecognizer):
    """For open-ended tokens (URLs, values): a trailing `.`, `,`, `)` … ends the sentence."""

    def trim(self, text: str, start: int, end: int) -> tuple[int, int]:
        while end > start and text[end - 1] in ".,;:)]}>'\"":
            end -= 1
        return start, end


# A value-like token: letters, digits and dashes, digit groups split by single spaces
# (`730 11 9557`); it counts as a value with five digits or more (`_value_tokens`).
_VALUE_TOKEN = re.compile(r"(?<![0-9a-z])[0-9a-z][0-9a-z-]*(?: \d[0-9a-z-]*)*")
# What may stand between two values of one list: separators, brackets, quotes, spaces.
_LIST_GAP = re.compile(r"[\s,，、;；/|()（）\[\]「」“”\"'&+]*(?:(?:and|or|和|及|或|与)[\s,，、]*)?")


def _value_tokens(lowered: str, low: int, high: int) -> Iterable[re.Match]:
    for token in _VALUE_TOKEN.finditer(lowered, low, high):
        if sum(ch.isdigit() for ch in token.group()) >= 5:
            yield token


def _has_own_value(lowered: str, keyword_end: int) -> bool:
    """A keyword after a match that is followed (after its label words, within 12
    characters) by a value of its own: `total 249570180件 and SSN 119694519`."""
    return any(
        token.start() - keyword_end <= 12
        for token in _value_tokens(lowered, keyword_end, keyword_end + 40)
    )


def _introduces(lowered: str, keyword_end: int, start: int) -> bool:
    """The keyword ending at `keyword_end` introduces the value at `start`: no other value
    stands between them, or the values between form a list with it (`SSN: 123456789,
    987654321`). `passport: EF6226130, 共749268682件` — the keyword's value is the first one;
    the 9 digits after it are a count."""
    last = None
    for token in _value_tokens(lowered, keyword_end, start):
        last = token
    if last is None:
        return True
    return _LIST_GAP.fullmatch(lowered, last.end(), start) is not None


def _alternation(words: Iterable[str]) -> re.Pattern:
    """Literal words, longest first; no lookarounds, so the regex engine skips ahead to their
    first characters."""
    words = sorted(words, key=len, reverse=True)
    return re.compile("|".join(map(re.escape, words)) if words else "(?!)")


def resolve_overlaps(candidates: Iterable[Detection], priority: dict[str, int]) -> list[Detection]:
    """Keep a non-overlapping set: higher score, then longer span, then type priority, then
    earlier start wins. Deterministic for any input order."""
    ordered = sorted(
        candidates,
        key=lambda d: (
            -d.score,
            -(d.end - d.start),
            priority.get(d.type, CUSTOM_PRIORITY),
            d.start,
            d.recognizer,
        ),
    )
    kept: list[Detection] = []
    for candidate in ordered:
        if all(candidate.end <= other.start or candidate.start >= other.end for other in kept):
            kept.append(candidate)
    kept.sort(key=lambda d: (d.start, d.end))
    return kept
