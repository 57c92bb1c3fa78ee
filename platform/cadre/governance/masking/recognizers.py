"""Built-in recognizers: compiled regex recognizers that plug into Presidio on demand.

Cadre's engine calls each recognizer's `scan()` directly: patterns are compiled once with the
standard library `re`, validators see the match and its surroundings, and no result or
explanation objects are built. The same recognizers keep Presidio's recognizer interface
(`supported_entities`, `validate_result`, `analyze`) and become real `PatternRecognizer`s with
`cadre.governance.masking.presidio.as_presidio()` — lazily, because importing
`presidio_analyzer` pulls in `transformers` and costs seconds per process.
docs/masking.md has the measurements behind this design.

Boundaries are lookarounds on ASCII letters and digits, never `\\b`: CJK characters are `\\w`,
so `\\b` would miss `手机13812345678`; these patterns find the number and leave the Chinese out.

Full-width characters (`１３８１２３４５６７８`, `133－1779－9444`, `152　8024　0883`) are folded to
ASCII before scanning (`fold_width`): each is one code point and so is its ASCII twin, so the
offsets found on the folded text are the offsets in the original, and the span keeps the
original characters.
"""

# ruff: noqa: RUF001, RUF002, RUF003 - Chinese text and its full-width punctuation are the point

from __future__ import annotations

import base64
import binascii
import re
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from cadre.governance.masking import checks

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

# Full-width digits and Latin letters (U+FF10-FF19, FF21-FF3A, FF41-FF5A), the ideographic
# space (U+3000) and the full-width signs that occur inside values (＋ － ． ＠ ＿) fold to ASCII
# for detection. Full-width sentence punctuation (，：；（）…) is left as it is: the patterns
# already treat it as text around a value, and folding it would change every Chinese message.
_FOLD = {0x3000: " ", 0xFF0B: "+", 0xFF0D: "-", 0xFF0E: ".", 0xFF20: "@", 0xFF3F: "_"}
_FOLD.update({code: chr(code - 0xFEE0) for code in range(0xFF10, 0xFF1A)})
_FOLD.update({code: chr(code - 0xFEE0) for code in range(0xFF21, 0xFF3B)})
_FOLD.update({code: chr(code - 0xFEE0) for code in range(0xFF41, 0xFF5B)})
_NEEDS_FOLD = re.compile("[\u3000\uff0b\uff0d\uff0e\uff10-\uff19\uff20-\uff3a\uff3f\uff41-\uff5a]")


def fold_width(text: str) -> str:
    """`text` with full-width digits, letters, value signs and U+3000 as ASCII; same length,
    same offsets (one code point for one). Returns `text` itself when there is nothing to fold."""
    if text.isascii() or _NEEDS_FOLD.search(text) is None:
        return text
    return text.translate(_FOLD)


_L = r"(?<![0-9A-Za-z])"  # not glued to an ASCII letter or digit on the left
_R = r"(?![0-9A-Za-z])"  # ... nor on the right; CJK text on either side is fine
# Values whose own format is unambiguous (phones, IDs, cards, IPv4, SSNs, IBANs) may be glued
# to Latin letters as well (`服务器IP10.1.2.3宕机了`, `…1234SSN`): the pattern only refuses a
# digit next to them, and `glued_ok` refuses a glued run that has digits in it (a hash, a code).
_LD = r"(?<![0-9])"
_RD = r"(?![0-9])"


def _ascii_alnum(ch: str) -> bool:
    return ch.isascii() and ch.isalnum()


_HEX_LETTERS = frozenset("abcdefABCDEF")


def glued_ok(text: str, start: int, end: int) -> bool:
    """Letters glued to the value are a word, not the middle of a hex string: on each side the
    run of ASCII letters next to the value, when more ASCII digits follow beyond it, must have
    a letter outside a-f. `IP10.1.2.3`, `13812345678Supplier`, `…ASAPID5101…` pass;
    `9fa13812345678`, `13812345678e9` (hex) do not."""
    index = start
    while index > 0 and text[index - 1].isascii() and text[index - 1].isalpha():
        index -= 1
    if (
        0 < index < start
        and _ascii_alnum(text[index - 1])
        and all(ch in _HEX_LETTERS for ch in text[index:start])
    ):
        return False
    index, size = end, len(text)
    while index < size and text[index].isascii() and text[index].isalpha():
        index += 1
    return not (
        end < index < size
        and _ascii_alnum(text[index])
        and all(ch in _HEX_LETTERS for ch in text[end:index])
    )


def _code_prefix(text: str, start: int) -> bool:
    """Glued right after 1-3 capital letters that are no phone label (`SF040891304371`,
    `JD…`): a tracking number or a code, not a phone."""
    index = start
    while index > 0 and "A" <= text[index - 1] <= "Z":
        index -= 1
    run = text[index:start]
    if not 1 <= len(run) <= 3 or run in ("TEL", "MOB", "PH"):
        return False
    return index == 0 or not (text[index - 1].isascii() and text[index - 1].isalpha())


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


_DASHED_IBAN = re.compile(r"^[A-Za-z0-9]{4}(?:-[A-Za-z0-9]{4})*(?:-[A-Za-z0-9]{1,3})?$")


class CadreIbanRecognizer(CadreRecognizer):
    """IBAN: the country's registered length decides where a grouped IBAN ends (groups split by
    spaces or dashes); mod-97 check. Upper case anywhere; lower or mixed case only within
    `window` characters after the word "IBAN" (a lower-case run passing mod-97 by chance is far
    likelier without it).

    A candidate that is no IBAN gives its characters back: the search resumes one character
    later (`ID110105… IBANNL54 …`, where `ID11…` is no IBAN), and after an IBAN at its end (an
    IBAN glued to the next one: `…7810TeamIBANDE05…`)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.any_case = re.compile(self.patterns[0][1], re.I)

    def scan(self, text: str, lowered: str) -> list[Detection]:
        found: list[Detection] = []
        pattern = self.any_case if "iban" in lowered else self.compiled[0]
        position = 0
        while (match := pattern.search(text, position)) is not None:
            position = match.start() + 1
            detection = self._candidate(text, lowered, match)
            if detection is not None:
                found.append(detection)
                position = detection.end
        return found

    def _candidate(self, text: str, lowered: str, match: re.Match) -> Detection | None:
        start = match.start()
        expected = checks.IBAN_LENGTHS.get(text[start : start + 2].upper())
        if expected is None:
            return None
        count, end = 0, start
        for index in range(start, match.end()):
            if text[index] not in " -":
                count += 1
                if count == expected:
                    end = index + 1
                    break
        if count != expected or not glued_ok(text, start, end):
            return None
        value = text[start:end]
        if "-" in value and not _DASHED_IBAN.match(value):
            return None  # dashes only between groups of four, never mixed with spaces
        if not value.isupper() and "iban" not in lowered[max(0, start - self.window) : start]:
            return None
        if checks.iban_valid(value.replace(" ", "").replace("-", "")):
            return Detection(start, end, self.entity, self.score, self.name)
        return None


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


# --- validators --------------------------------------------------------------------------------


def _cn_id(value: str, text: str, start: int, end: int) -> bool:
    return checks.cn_id_valid(value)


def _cn_id15(value: str, text: str, start: int, end: int) -> bool:
    return checks.cn_id15_valid(value)


def _card(value: str, text: str, start: int, end: int) -> bool:
    """Luhn and issuer; not glued to a short capital code (`SF507246596435`: a waybill)."""
    if start and "A" <= text[start - 1] <= "Z" and _code_prefix(text, start):
        return False
    if end < len(text) and text[end] in "Xx" and len(value) == 17:
        return False  # 17 digits and an X: a resident ID (one failing its check), not a card
    if start and _IBAN_SHAPED_BEFORE.search(text, max(0, start - 40), start):
        return False  # `GB31BARC6391…`: the rest of an IBAN, not a card
    return checks.payment_card_valid(value)


def _ssn(value: str, text: str, start: int, end: int) -> bool:
    return checks.us_ssn_valid(value)


def _ipv4(value: str, text: str, start: int, end: int) -> bool:
    """Octets 0-255 without leading zeros; not followed by a version word (`1.2.6.9版本`)."""
    if not all(
        len(octet) == 1 or (octet[0] != "0" and int(octet) <= 255) for octet in value.split(".")
    ):
        return False
    return VERSION_AFTER.match(text, end) is None


def _cn_passport(value: str, text: str, start: int, end: int) -> bool:
    """`G12345678Ticket`: glued to letters on the right only after a passport keyword."""
    if end < len(text) and text[end].isascii() and text[end].isalpha():
        before = text[max(0, start - 48) : start].lower()
        return any(word in before for word in PASSPORT_WORDS)
    return True


def _ipv6(value: str, text: str, start: int, end: int) -> bool:
    return checks.ipv6_valid(value)


_DIGIT_GROUPS = re.compile(r"\d+")
# A country code and two check digits, then groups of four (`FR45 `, `NL16SNSB`, `ES60-4623-`):
# what follows is the rest of an IBAN (one that fails its checksum is still no phone).
_IBAN_SHAPED_BEFORE = re.compile(r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?:[ -]?[A-Z0-9]{4})*[ -]?$")


def _phone(value: str, text: str, start: int, end: int) -> bool:
    """Not a slice of a longer digit-group run laid out like a card (`6258 0720 4090 1236`),
    nor a 400/800 "number" whose last seven digits are one digit repeated (`4000000000`)."""
    digits = checks.digits_of(value)
    if digits[:3] in ("400", "800") and len(set(digits[3:])) == 1:
        return False
    if start and _IBAN_SHAPED_BEFORE.search(text, max(0, start - 40), start):
        return False  # `FR45 0947 5035 2674 …`, `NL16SNSB0236373445`: an account number
    if start and "A" <= text[start - 1] <= "Z" and _code_prefix(text, start):
        return False
    left, right = start, end
    while left >= 2 and text[left - 1] in " -" and text[left - 2].isdigit():
        left -= 2
        while left > 0 and text[left - 1].isdigit():
            left -= 1
    while right + 1 < len(text) and text[right] in " -" and text[right + 1].isdigit():
        right += 2
        while right < len(text) and text[right].isdigit():
            right += 1
    if (left, right) == (start, end):
        return True
    groups = [len(group) for group in _DIGIT_GROUPS.findall(text[left:right])]
    return not (len(groups) >= 3 and all(size == 4 for size in groups[:-1]))


_PROVIDER_PREFIX = re.compile(
    r"^(?:sk-ant-(?:[a-z]+\d*-)?|sk-(?:proj-|svcacct-|admin-)?|gh[pousr]_|github_pat_|glpat-"
    r"|xox[abposr]-|xapp-|https://hooks\.slack\.com/services/|AIza|(?:sk|rk)_(?:live|test)_"
    r"|whsec_|hf_|LTAI|AKID)"
)
_GLUABLE_PREFIX = re.compile(
    r"(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA|APKA|gh[pousr]_|github_pat_|glpat-|xox[abposr]-"
    r"|xapp-)"
)
_AWS_KEY_ID = re.compile(r"^(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA|APKA)[0-9A-Z]{16}$")


def _provider_key(value: str, text: str, start: int, end: int) -> bool:
    """The random part after the provider's prefix has a digit or both cases.

    Per provider, not "a digit anywhere": a Hugging Face token is `hf_` + 34 letters (the
    gitleaks/detect-secrets rule), and a random 24-character Stripe key has no digit one time in
    seventy. Mixed case is what a word or a kebab-case name (`sk-some-long-name-here`) lacks.
    An AWS key id (fixed prefix, exactly 16 upper-case letters and digits) needs nothing more.

    Left boundary: not glued to a token character; prefixes no word ends with (AWS, GitHub,
    GitLab, Slack) may follow a letter (`plsghp_…`, `SSNAKIA…`), `sk-` may not
    (`task-proj-…` is a name).
    """
    if start:
        before = text[start - 1]
        if before.isascii() and (before.isdigit() or before in "_-"):
            return False
        if before.isascii() and before.isalpha() and not _GLUABLE_PREFIX.match(value):
            return False
    if _AWS_KEY_ID.match(value):
        return True
    prefix = _PROVIDER_PREFIX.match(value)
    body = value[prefix.end() :] if prefix else value
    return any(ch.isdigit() for ch in body) or (
        any(ch.isupper() for ch in body) and any(ch.islower() for ch in body)
    )


def _jwt(value: str, text: str, start: int, end: int) -> bool:
    """A JWT with an empty signature (`eyJ….eyJ….`) only when its header says `"alg":"none"`."""
    if not value.endswith("."):
        return True
    header = value.split(".", 1)[0]
    try:
        decoded = base64.urlsafe_b64decode(header + "=" * (-len(header) % 4))
    except (ValueError, binascii.Error):
        return False
    return b'"none"' in decoded.lower().replace(b" ", b"")


def _mixed_key(value: str, text: str, start: int, end: int) -> bool:
    return checks.shannon_mix(value)


_PLACEHOLDER_VALUE = re.compile(
    r"""^(?:\*+|x{3,}|\.{2,}|…|-+|<[^>]*>?|\[[^\]]*\]?|\$\{[^}]*\}?|%\([^)]*\)s|\{\{.*\}\}|\{[A-Za-z_]+\}|null|none|nil|true|false|undefined|empty|redacted
    |changeme|change_me|your[_-]?\w*|xxx\w*|\?+|todo|tbd|secret|password|passwd|token)$""",
    re.I | re.X,
)
# `$DB_PASSWORD`, `$db_pass`: a variable; `$imuM6h2UewGI` (mixed case) is a password.
_VARIABLE_VALUE = re.compile(r"^\$(?:[A-Z_][A-Z0-9_]*|[a-z_][a-z0-9_]*)$")


def _placeholder(value: str) -> bool:
    return _PLACEHOLDER_VALUE.match(value) is not None or _VARIABLE_VALUE.match(value) is not None


_CODE_VALUE = re.compile(
    r"^(?:[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*\s*[(\[]"
    r"|(?:os|self|request|req|env|config|settings|process|ctx|args|params|this|cfg)\.)"
)


def _char_classes(value: str) -> int:
    """How many of lower case, upper case, digit and other (symbol) `value` uses."""
    lower = upper = digit = other = False
    for ch in value:
        if ch.islower():
            lower = True
        elif ch.isupper():
            upper = True
        elif ch.isdigit():
            digit = True
        else:
            other = True
    return lower + upper + digit + other


def _random_letters(value: str) -> bool:
    """A letters-only token that is not a word: ≥ 10 ASCII letters, at least a quarter of them
    upper case and some lower case (`apLxcADpNjEcTEKpJTdjjune`, not `JavaScriptDeveloper`)."""
    if len(value) < 10 or not (value.isascii() and value.isalpha()):
        return False
    upper = sum(ch.isupper() for ch in value)
    return upper >= 3 and upper * 4 >= len(value) and len(value) - upper >= 2


def _credential_like(value: str) -> bool:
    """Looks like a credential rather than a word of prose: ≥ 6 characters with a digit or a
    symbol (`Hunter2!`), ≥ 5 using three of lower/upper/digit/symbol (`Ms@#1`), or a random
    mixed-case letter token (`apLxcADpNjEcTEKpJTdjjune`). Never a URL."""
    if "://" in value:
        return False
    if len(value) >= 6 and any(not ch.isalpha() for ch in value):
        return True
    return (len(value) >= 5 and _char_classes(value) >= 3) or _random_letters(value)


def _secret_value(value: str, text: str, start: int, end: int) -> bool:
    """A plausible secret value: not a placeholder, not code, and, after a bare `:`, not a word.

    A colon or "is" also introduces prose ("password: please reset it", "the password is
    required"), so an unquoted value there must look like a credential (`_credential_like`);
    after `=` or in quotes anything that is not a placeholder or code counts.
    """
    if len(value) < 4 or _placeholder(value) or _CODE_VALUE.match(value):
        return False
    if value[0] in "/~" and "/" in value[1:]:
        return False  # a path ("pwd: /home/deploy"), not a password
    before = text[max(0, start - 5) : start]
    quoted = before.endswith(('"', "'"))
    prose = before.rstrip().endswith((":", "：", " is", " was"))
    if prose and not quoted:
        return _credential_like(value)
    return True


def _mysql_password(value: str, text: str, start: int, end: int) -> bool:
    """`mysql … -pSECRET`: lower-case `-p` glued to the value (`-P3306` is the port)."""
    head = text[max(0, start - 3) : start].rstrip("\"'")
    return head.endswith("-p") and not _placeholder(value)


# "SHA256", "RSA-2048", "AES_256", "8-16": an algorithm or a length, not a password.
_NOT_A_PASSWORD = re.compile(r"^(?:[A-Z]{2,6}[-_]?\d{1,4}|\d{1,3}(?:[-~]\d{1,3})?)$")


def _chinese_secret_value(value: str, text: str, start: int, end: int) -> bool:
    """`密码：…` / `密码是…`: any non-placeholder value with a digit or a symbol (or a
    random-looking letter code, e.g. a 16-letter SMTP 授权码).

    `密码 Passw0rd@88` / `密码Passw0rd@88` (nothing but spaces between keyword and value) is
    stricter: ≥ 6 characters of two or more classes, not an algorithm name or a length, and
    ending the phrase (followed by space, punctuation or the end, not glued to more Chinese:
    `密码MD5加密` is about hashing).
    """
    if len(value) < 4 or _placeholder(value):
        return False
    index = start
    while index > 0 and text[index - 1] in " \t":
        index -= 1
    if index > 0 and text[index - 1] in ":：=是为":
        if any(not ch.isalpha() for ch in value) or _random_letters(value):
            return True
        return len(value) >= 12 and value.isascii() and value.islower()
    if end < len(text) and not (text[end].isspace() or unicodedata.category(text[end])[0] == "P"):
        return False
    if value[0] == "." or ("." in value and value.rsplit(".", 1)[1] in _FILE_EXTENSIONS):
        return False  # `密码.numbers`, `密码表.xlsx`: a file name
    return len(value) >= 6 and _char_classes(value) >= 2 and not _NOT_A_PASSWORD.match(value)


# Never top-level domains (checked against the IANA root zone): `icon@2x.png` is an image.
# Not listed because they ARE TLDs: zip, mov, app, dev, md, py, rs, sh, so, java, mobi.
_FILE_EXTENSIONS = frozenset({
    "png", "jpg", "jpeg", "gif", "svg", "webp", "bmp", "ico", "tif", "tiff", "heic", "avif",
    "psd", "pdf", "doc", "docx", "xls", "xlsx", "ppt", "pptx", "txt", "csv", "json", "xml",
    "yml", "yaml", "htm", "html", "css", "js", "ts", "jsx", "tsx", "vue", "log", "bak", "tmp",
    "exe", "dll", "apk", "dmg", "iso", "rar", "gz", "tgz", "tar", "wav", "avi", "mkv", "webm",
    "flv", "ogg",
})  # fmt: skip


def _email(value: str, text: str, start: int, end: int) -> bool:
    """Not a file name (`banner@2x.jpg`, `jquery@3.6.0.min.js`): the TLD is no file extension."""
    return value.rsplit(".", 1)[1].lower() not in _FILE_EXTENSIONS


def _bearer(value: str, text: str, start: int, end: int) -> bool:
    return len(value) >= 20 or any(ch.isdigit() for ch in value)


# --- patterns ----------------------------------------------------------------------------------

# 138 1234 5678, 138-1234-5678, 138.1234.5678 (dots only as both separators), +86/0086/86-
# or a bare 86 glued to the number (8613812345678).
CN_MOBILE = (
    r"(?<![0-9+])(?:(?:\+|00)86[ -]?|86-?)?"
    r"1[3-9]\d(?:(?:[ -]?\d{4}){2}|\.\d{4}\.\d{4}(?!\.\d))" + _RD
)
# Two-digit area codes (10, 2x: Beijing, Shanghai, Guangzhou, …) have eight-digit local
# numbers; three-digit ones seven or eight (`025-3325497` is no number, `0571-8765432` is).


def _landline(area: str, local: str) -> str:
    return r"(?:(?:\+|00)86[ -]?" + area + r"|[(（]0" + area + r"[)）]|0" + area + r")" + local


CN_LANDLINE = (
    r"(?<![0-9+])(?:"
    + _landline(r"(?:10|2\d)", r"[ -]?\d{4}[ -]?\d{4}")
    + "|"
    + _landline(r"[3-9]\d{2}", r"[ -]?\d{3,4}[ -]?\d{4}")
    + ")"
    + _RD
)
# 400/800 + 7 digits: 400-820-8820, 400-6818-978, 4006-818-978, 4008208820.
CN_SERVICE_NUMBER = (
    _LD + r"[48]00(?:[ -]?\d{3}[ -]?\d{4}|[ -]?\d{4}[ -]?\d{3}|\d[ -]\d{3}[ -]\d{3})" + _RD
)
# "订单号13361890954", "order no. 4008208820": a number introduced as an order, a tracking or
# an invoice number is not a phone.
PHONE_NEGATIVE_BEFORE = (
    r"(?:订单|单号|流水号|编号|工单|运单|发票|order|invoice|tracking)"
    r"(?:[ \t]*(?:no\.?|number|id|#))?[ \t]*[:：#=]?[ \t]*[a-z]{0,3}$"
)
CN_ID = (
    r"[1-9](?<![0-9][1-9])\d{5} ?(?:18|19|20)\d{2}(?:0[1-9]|1[0-2])"
    r"(?:0[1-9]|[12]\d|3[01]) ?\d{3}[\dXx]" + _RD
)
# First-generation 15-digit ID (area, YYMMDD, sequence; no check digit): only with a keyword.
CN_ID15 = r"[1-9](?<![0-9][1-9])\d{7}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])\d{3}" + _RD
# Written to start with a digit (not a lookbehind) so the regex engine can skip to digits.
# Groups split by one space, two spaces or a dash (the same separator throughout). Not the
# continuation of a decimal number (`12.584360 82917467979`: a timestamp's fraction).
CARD = (
    r"\d(?<![0-9]\d)(?<!\d[ .-]\d)(?<!\d  \d)(?:"
    r"\d{11,18}(?![0-9]|-\d)"
    r"|(?:\d{3}( {1,2}|-)\d{4}\1\d{4}(?:\1\d{1,4}(?:\1\d{1,3})?)?"  # 4-4-4[-4[-3]]
    r"|\d{3}( {1,2}|-)\d{6}\2\d{4,5}"  # Amex 4-6-5, Diners 4-6-4
    r"|(?<=6)\d{5}( {1,2}|-)\d{12,13}"  # 6-12, 6-13: a 6… bank BIN, then the account
    r")(?![0-9]|[ -]\d|  \d))"
)
EMAIL = (
    r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9][A-Za-z0-9._%+-]{0,63}@"
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,24}(?![A-Za-z0-9-])"
)
# Octet ranges (0-255, no leading zero) are checked by the validator, so the pattern can
# start with a digit and the regex engine can skip to digits.
IPV4 = r"\d(?<![0-9.]\d)\d{0,2}(?:\.\d{1,3}){3}(?![0-9]|\.\d)"
# Starts after a non-address character, or glued to a word: right after a letter outside a-f
# when it starts with a digit or has three colons (`IP2001:db8::1`, `IPfe80::1:2:3`), or after
# a label's colon (`ip:2001:db8::1`, `ip:::ffff:10.0.0.1`). Ends before a non-hex character
# (`…::1Ticket`, `…::1宕机`).
# Every IPv6 address has `::` or four hex groups in a row.
IPV6_HINT = r"::|[0-9a-f]:[0-9a-f]{1,4}:[0-9a-f]{1,4}:[0-9a-f]{1,4}:"
IPV6 = (
    r"(?:(?<![0-9A-Za-z:.])|(?<=[G-Zg-z])(?=\d|[0-9A-Fa-f]{1,4}(?::[0-9A-Fa-f]{0,4}){3})"
    r"|(?<=[A-Za-z]:)|(?<=[Ii][Pp])(?=::[0-9A-Fa-f]))"
    r"(?=[0-9A-Fa-f]*:[0-9A-Fa-f]*:)[0-9A-Fa-f:]{2,39}"
    r"(?:(?<=:)(?:\d{1,3}\.){3}\d{1,3})?(?![0-9A-Fa-f:]|\.\d)"
)
# "version 1.2.3.4", "版本号：10.2.0.1": a dotted quad introduced as a version is not an address.
VERSION_BEFORE = (
    r"(?:(?:version|release|build|firmware|(?<![a-z])(?:ver\.?|v)|版本号?|固件|内部版本)"
    r"[ \t]*(?:[:：=#]|is|为|是)?[ \t]*|v)$"
)
# "1.2.6.9版本", "4.10.2.1 release notes": a version word right after the dotted quad — unless
# a dotted version follows the word (`10.1.2.3 release 2.3.4`: the word introduces that one;
# `7.6.6.7 版本 2026-01-05` is still a version, and so is `7.6.6.7 版本 41.32%`: a percentage
# is no version).
VERSION_AFTER = re.compile(
    r"[ \t]*(?:版本|version|release)(?![ \t]*[:：=]?[ \t]*v?\d+\.\d+(?![\d.]*%))", re.I
)
CN_PASSPORT = r"[EG](?<![0-9A-Za-z][EG])(?:\d{8}|(?<=E)[A-HJ-NP-Z]\d{7})" + _RD
# US/UK 9 digits, letter(s) + digits, letter-7 digits-letter; France 2 digits-2 letters-5 digits;
# Germany 9 characters from its vowel-free alphabet (C F G H J K L M N P R T V W X Y Z 0-9).
GENERIC_PASSPORT = (  # first character, then what may follow it (the engine skips ahead)
    r"[0-9A-Z](?<![0-9A-Za-z][0-9A-Z])(?:(?<=[A-Z])(?:\d{7}[A-Z](?![A-Za-z])|[A-Z]?\d{6,8})"
    r"|(?<=\d)(?:\d{8}|\d[A-Z]{2}\d{5})|(?<=[CFGHJK])[CFGHJKLMNPRTVWXYZ0-9]{8})" + _RD
)
PASSPORT_WORDS = (
    "passport", "护照", "passeport", "pasaporte", "reisepass", "パスポート", "旅券",
    "travel document",
)  # fmt: skip
SSN_WORDS = ("ssn", "social security", "社会安全号", "社保号")
# Other documents whose numbers look like passport numbers: nearer than "passport", they win.
OTHER_DOCUMENT_WORDS = (
    "通行证", "回乡证", "台胞证", "驾驶证", "驾照", "driver's licen", "driving licen",
)  # fmt: skip
SSN = r"\d(?<![0-9-]\d)\d{2}-\d{2}-\d{4}(?![0-9]|-\d)"
# "零件编号 382-26-8784", "SKU 599-76-4801": a part, order or model number, not an SSN.
SSN_NEGATIVE_BEFORE = (
    r"(?:编号|型号|料号|零件号?|订单号?|单号|part|sku|model|item|order|invoice)"
    r"(?:[ \t]*(?:no\.?|number|#))?[ \t]*[:：#=]?[ \t]*$"
)
SSN_CONTEXT = _LD + r"(?:\d{3} \d{2} \d{4}|\d{9})" + _RD
IBAN = r"[A-Z](?<![0-9][A-Z])[A-Z]\d{2}(?:[ -]?[A-Z0-9]){10,34}"

_TOKEN_R = r"(?![A-Za-z0-9_-])"
# The left boundary is checked by the validator (`_provider_key`), so the pattern starts with
# the prefixes and the regex engine skips ahead to them.
_TOKEN_L_GLUED = r"(?<![0-9_-])"
PROVIDER_KEYS = (
    r"(?:(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA|APKA)[0-9A-Z]{16}"  # AWS access key id
    r"|gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255}"  # GitHub
    r"|glpat-[A-Za-z0-9_-]{20,}"  # GitLab
    r"|xox[abposr]-[A-Za-z0-9-]{10,}|xapp-\d-[A-Za-z0-9-]{10,}"  # Slack
    r"|sk-ant-[A-Za-z0-9_-]{20,}"  # Anthropic
    r"|sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"  # OpenAI
    r"|https://hooks\.slack\.com/services/[A-Za-z0-9_/]{20,}"  # Slack webhook
    r"|AIza[0-9A-Za-z_-]{35}"  # Google
    r"|(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,}|whsec_[0-9A-Za-z]{24,}"  # Stripe
    r"|hf_[A-Za-z0-9]{30,}"  # Hugging Face (34 letters, or letters and digits)
    r"|LTAI[A-Za-z0-9]{12,20}"  # Alibaba Cloud AccessKey id
    r"|AKID[A-Za-z0-9]{32})" + _TOKEN_R  # Tencent Cloud SecretId
)
# The signature may be empty for `"alg": "none"` (validator), then the span ends with the dot.
JWT = (
    _TOKEN_L_GLUED
    + r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.(?:[A-Za-z0-9_-]{8,})?"
    + _TOKEN_R
)
PEM = (
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
    r"(?:[\s\S]{0,20000}?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
    r"|(?:(?:\s|\\n)*[A-Za-z0-9+/=:,-]{16,})+)"
)
# CJK ideographs, kana, hangul, CJK and full-width punctuation: a bare value or a URI never
# runs on into them (`password=Qw3rty!明天改`, `…@db:5432/prod银行卡6222…`).
_CJK = "\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef"
CONNECTION_STRING = (
    r"(?<![A-Za-z0-9+.-])(?:jdbc:)?(?:postgres(?:ql)?|mysql|mariadb|mongodb(?:\+srv)?|rediss?"
    r"|amqps?|mssql|sqlserver|oracle|clickhouse|cockroachdb|neo4j(?:\+s)?|nats|ldaps?|s?ftp"
    r"|smtps?|https?|git|ssh|svn)(?:\+[a-z0-9]+)?://[^\s:@/'\"<>]*:[^\s@/'\"<>]+@[^\s'\"<>"
    + _CJK
    + r"]+"
)
_SECRET_KEYS = (
    r"password|passwd|passphrase|passcode|(?<![a-z])pass|pwd|secret|token|api[ _-]?key|apikey"
    r"|access[ _-]?key(?:[ _-]?id)?|secret[ _-]?key|private[ _-]?key|client[ _-]?secret"
    r"|auth[ _-]?key|app[ _-]?key|credentials?"
)
# A bare value ends at whitespace, quotes, separators, CJK text — and at `&name=` (the next URL
# parameter).
_VALUE = r"(?:[^\s\"',;&" + _CJK + r"]|&(?![A-Za-z_][A-Za-z0-9_]*=)){1,300}"
# "my password is Hunter2!": prose, so the value must look like a credential (validator).
# "The password for the VPN is Qwer@88": up to four words after for/of/to/on/at.
PASSWORD_IS = (
    r"(?i)(?<![a-z])(?:password|passwd|passcode|pwd)"
    r"(?:[ \t]+(?:for|of|to|on|at)(?:[ \t]+[^\s,;!?\"'()]{1,60}){1,4}?)?"
    r"[ \t]+(?:is|was)[ \t]+(?:(?P<q>[\"'])"
    r"(?P<quoted>[^\"'\r\n]{1,300})(?P=q)|(?P<bare>" + _VALUE + r"))"
)
KEY_VALUE = (
    r"(?i)(?:" + _SECRET_KEYS + r")[\"']?"
    r"[ \t]*(?:=|:(?!//)|：)[ \t]*(?:(?P<q>[\"'])(?P<quoted>[^\"'\r\n]{1,300})(?P=q)"
    r"|(?P<bare>" + _VALUE + r"))"
)
CLI_FLAG = (
    r"(?i)(?<!-)--(?:password|passwd|pass|token|api-key|secret)[= ]"
    r"(?:(?P<q>[\"'])(?P<quoted>[^\"'\r\n]{1,300})(?P=q)|(?P<bare>" + _VALUE + r"))"
)
# 密码：v, 密码是v, 密码是：v, 密码为 v — and 密码 v / 密码v (validator: must look like one).
CHINESE_KEY_VALUE = (
    r"(?:密码|口令|密钥|秘钥|令牌|授权码)(?:[ \t]*(?:是|为)?[ \t]*[:：=]|[ \t]*(?:是|为))?[ \t]*"
    r"(?P<bare>[!#-&(-+\--:<-~]{1,200})"
)
# mysql/mysqldump/mysqladmin … -pSECRET (the value glued to -p; `-p` alone prompts).
MYSQL_PASSWORD = (
    r"(?<![a-z0-9_-])mysql(?:dump|admin|sh)?[ \t][^\n|;&]*?(?<=[ \t])-p"
    r"(?:(?P<q>[\"'])(?P<quoted>[^\"'\r\n]{1,300})(?P=q)|(?P<bare>" + _VALUE + r"))"
)
BEARER = (
    r"(?i)(?<![A-Za-z0-9])(?:bearer|authorization:\s*(?:basic|token))\s+"
    r"(?P<bare>[A-Za-z0-9._~+/-]{8,}=*)"
)
AWS_SECRET = r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"


class _SecretValueRecognizer(TrailingPunctuationRecognizer):
    """Reports one of the named value groups (`quoted` or `bare`), whichever matched."""

    _anchor: re.Pattern | None = None

    def _windows(self, text: str, lowered: str) -> list[tuple[int, int]]:
        """Where to look: around each keyword (the patterns start with one), merged."""
        if not self.literals:
            return [(0, len(text))]
        if self._anchor is None:
            self._anchor = re.compile("|".join(re.escape(word) for word in self.literals))
        windows: list[tuple[int, int]] = []
        for hit in self._anchor.finditer(lowered):
            low, high = max(0, hit.start() - 24), min(len(text), hit.end() + 360)
            if windows and low <= windows[-1][1]:
                windows[-1] = (windows[-1][0], high)
            else:
                windows.append((low, high))
        return windows

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        # The same patterns without (?i), run on the lower-cased text: ~3x faster in CPython's
        # regex engine; offsets are the same whenever lower-casing kept the length.
        self.lower_compiled = [re.compile(c.pattern.removeprefix("(?i)")) for c in self.compiled]

    def scan(self, text: str, lowered: str) -> list[Detection]:
        if len(self.literals) == 1 and self.literals[0] not in lowered:
            return []  # one keyword: a substring test is cheaper than the anchor regex
        if len(lowered) == len(text):
            subject, patterns = lowered, self.lower_compiled
        else:
            subject, patterns = text, self.compiled
        found: list[Detection] = []
        for low, high in self._windows(text, lowered):
            found.extend(self._scan_window(text, subject, patterns, low, high))
        return found

    def _scan_window(self, text, subject, patterns, low: int, high: int) -> list[Detection]:
        found: list[Detection] = []
        for compiled in patterns:
            for match in compiled.finditer(subject, low, high):
                if match.groupdict().get("quoted") is not None:
                    start, end = match.span("quoted")
                else:
                    start, end = self.trim(text, *match.span("bare"))
                value = text[start:end]
                if end > start and self.validator(value, text, start, end):
                    found.append(Detection(start, end, self.entity, self.score, self.name))
        return found


def builtin_recognizers() -> list[CadreRecognizer]:
    """Fresh instances of every built-in recognizer (the engine builds them once)."""
    return [
        CadreRecognizer(name="cn_mobile", entity="CN_PHONE", patterns=[("mobile", CN_MOBILE)],
                        score=0.85, validator=_phone, negative_context=PHONE_NEGATIVE_BEFORE,
                        glue=True),
        CadreRecognizer(name="cn_landline", entity="CN_PHONE",
                        patterns=[("landline", CN_LANDLINE), ("service", CN_SERVICE_NUMBER)],
                        score=0.75, validator=_phone, negative_context=PHONE_NEGATIVE_BEFORE,
                        glue=True),
        CadreRecognizer(name="cn_resident_id", entity="CN_ID", patterns=[("id18", CN_ID)],
                        score=1.0, validator=_cn_id, glue=True),
        CadreRecognizer(name="cn_resident_id15", entity="CN_ID", patterns=[("id15", CN_ID15)],
                        score=1.0, validator=_cn_id15,
                        context=("身份证", "证件", "id card", "identity card", "resident id"),
                        context_required=True, glue=True, keyword_claims=True),
        CadreRecognizer(name="payment_card", entity="PAYMENT_CARD", patterns=[("card", CARD)],
                        score=1.0, validator=_card, glue=True,
                        negative_context=PHONE_NEGATIVE_BEFORE),
        CadreRecognizer(name="email", entity="EMAIL", patterns=[("email", EMAIL)], score=0.9,
                        literals=("@",), validator=_email),
        CadreRecognizer(name="ipv4", entity="IP_ADDRESS", patterns=[("ipv4", IPV4)], score=0.8,
                        validator=_ipv4,
                        literals=(".",), negative_context=VERSION_BEFORE, glue=True),
        CadreRecognizer(name="ipv6", entity="IP_ADDRESS", patterns=[("ipv6", IPV6)], score=0.8,
                        literals=(":",), validator=_ipv6, glue=True, precheck=IPV6_HINT),
        CadreRecognizer(name="cn_passport", entity="PASSPORT", patterns=[("cn", CN_PASSPORT)],
                        score=0.75, validator=_cn_passport, glue=True),
        CadreRecognizer(name="passport_in_context", entity="PASSPORT",
                        patterns=[("generic", GENERIC_PASSPORT)], score=0.7,
                        context=PASSPORT_WORDS, context_required=True,
                        rival_context=SSN_WORDS + OTHER_DOCUMENT_WORDS, glue=True,
                        keyword_claims=True),
        CadreRecognizer(name="us_ssn", entity="US_SSN", patterns=[("ssn", SSN)], score=0.85,
                        literals=("-",), validator=_ssn, negative_context=SSN_NEGATIVE_BEFORE,
                        glue=True),
        CadreRecognizer(name="us_ssn_in_context", entity="US_SSN",
                        patterns=[("ssn_bare", SSN_CONTEXT)], score=0.7, validator=_ssn,
                        context=SSN_WORDS, context_required=True, rival_context=PASSPORT_WORDS,
                        glue=True, keyword_claims=True),
        CadreIbanRecognizer(name="iban", entity="IBAN", patterns=[("iban", IBAN)], score=1.0),
        CadreRecognizer(name="provider_key", entity="SECRET",
                        patterns=[("provider", PROVIDER_KEYS)], score=1.0, validator=_provider_key),
        CadreRecognizer(name="jwt", entity="SECRET", patterns=[("jwt", JWT)], score=1.0,
                        literals=("eyJ",), validator=_jwt),
        # "PRIVATE KEY", not "PRIVATE KEY-----": a PGP header ends "PRIVATE KEY BLOCK-----".
        CadreRecognizer(name="pem_private_key", entity="SECRET", patterns=[("pem", PEM)],
                        score=1.0, literals=("PRIVATE KEY",)),
        TrailingPunctuationRecognizer(name="connection_string", entity="SECRET",
                                      patterns=[("uri", CONNECTION_STRING)], score=1.0,
                                      flags=re.I, literals=("://",)),
        _SecretValueRecognizer(name="secret_key_value", entity="SECRET",
                               patterns=[("key_value", KEY_VALUE), ("cli_flag", CLI_FLAG),
                                         ("password_is", PASSWORD_IS)],
                               score=1.0, validator=_secret_value,
                               literals=("pass", "pwd", "secret", "token", "key", "credential")),
        _SecretValueRecognizer(name="secret_key_value_zh", entity="SECRET",
                               patterns=[("key_value_zh", CHINESE_KEY_VALUE)], score=1.0,
                               validator=_chinese_secret_value,
                               literals=("密码", "口令", "密钥", "秘钥", "令牌", "授权码")),
        _SecretValueRecognizer(name="mysql_cli_password", entity="SECRET",
                               patterns=[("mysql_p", MYSQL_PASSWORD)], score=1.0,
                               validator=_mysql_password, literals=("mysql",)),
        _SecretValueRecognizer(name="bearer_token", entity="SECRET",
                               patterns=[("bearer", BEARER)], score=1.0, validator=_bearer,
                               literals=("bearer", "authorization")),
        CadreRecognizer(name="aws_secret_key", entity="SECRET",
                        patterns=[("aws_secret", AWS_SECRET)], score=0.9, validator=_mixed_key,
                        context=("aws", "secret"), context_required=True),
    ]  # fmt: skip


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
