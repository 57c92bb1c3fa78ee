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
"""

# ruff: noqa: RUF001, RUF003 - Chinese text and its full-width punctuation are the point

from __future__ import annotations

import re
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

_L = r"(?<![0-9A-Za-z])"  # not glued to an ASCII letter or digit on the left
_R = r"(?![0-9A-Za-z])"  # ... nor on the right; CJK text on either side is fine


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
    rejects it.
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
    ):
        self.name = name
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
        self.compiled = [re.compile(regex, flags) for _, regex in patterns]

    # --- Presidio interface ------------------------------------------------------------------

    def validate_result(self, pattern_text: str) -> bool | None:
        if self.validator is None:
            return None
        return self.validator(pattern_text, pattern_text, 0, len(pattern_text))

    def analyze(self, text: str, entities=None, nlp_artifacts=None) -> list[Detection]:
        if entities and self.entity not in entities:
            return []
        return self.scan(text, text.lower())

    # --- the fast path -----------------------------------------------------------------------

    def _near(self, lowered: str, start: int, end: int, words: tuple[str, ...]) -> bool:
        window = lowered[max(0, start - self.window) : end + self.window // 2]
        return any(word in window for word in words)

    def scan(self, text: str, lowered: str) -> list[Detection]:
        if self.literals and not any(literal in text for literal in self.literals):
            return []
        if self.context_required and not any(word in lowered for word in self.context_words):
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
                if self.context_required and not self._near(
                    lowered, start, end, self.context_words
                ):
                    continue
                if self.negative_context is not None and self.negative_context.search(
                    lowered, max(0, start - self.negative_window), start
                ):
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


class CadreIbanRecognizer(CadreRecognizer):
    """IBAN: the country's registered length decides where a spaced IBAN ends; mod-97 check."""

    def scan(self, text: str, lowered: str) -> list[Detection]:
        found: list[Detection] = []
        for match in self.compiled[0].finditer(text):
            start = match.start()
            expected = checks.IBAN_LENGTHS.get(text[start : start + 2])
            if expected is None:
                continue
            count, end = 0, start
            for index in range(start, match.end()):
                if text[index] != " ":
                    count += 1
                    if count == expected:
                        end = index + 1
                        break
            if count != expected or (
                end < len(text) and text[end].isalnum() and text[end].isascii()
            ):
                continue
            if checks.iban_valid(text[start:end].replace(" ", "")):
                found.append(Detection(start, end, self.entity, self.score, self.name))
        return found


# --- validators --------------------------------------------------------------------------------


def _cn_id(value: str, text: str, start: int, end: int) -> bool:
    return checks.cn_id_valid(value)


def _card(value: str, text: str, start: int, end: int) -> bool:
    return checks.payment_card_valid(value)


def _ssn(value: str, text: str, start: int, end: int) -> bool:
    return checks.us_ssn_valid(value)


def _ipv4(value: str, text: str, start: int, end: int) -> bool:
    return all(
        len(octet) == 1 or (octet[0] != "0" and int(octet) <= 255) for octet in value.split(".")
    )


def _ipv6(value: str, text: str, start: int, end: int) -> bool:
    return checks.ipv6_valid(value)


_DIGIT_GROUPS = re.compile(r"\d+")


def _phone(value: str, text: str, start: int, end: int) -> bool:
    """Not a slice of a longer digit-group run laid out like a card (`6258 0720 4090 1236`)."""
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


def _has_digit(value: str, text: str, start: int, end: int) -> bool:
    return any(ch.isdigit() for ch in value)


def _mixed_key(value: str, text: str, start: int, end: int) -> bool:
    return checks.shannon_mix(value)


_PLACEHOLDER_VALUE = re.compile(
    r"""^(?:\*+|x{3,}|\.{2,}|…|-+|<[^>]*>?|\[[^\]]*\]?|\$\{[^}]*\}?|\$[A-Za-z_][A-Za-z0-9_]*
    |%\([^)]*\)s|\{\{.*\}\}|\{[A-Za-z_]+\}|null|none|nil|true|false|undefined|empty|redacted
    |changeme|change_me|your[_-]?\w*|xxx\w*|\?+|todo|tbd|secret|password|passwd|token)$""",
    re.I | re.X,
)
_CODE_VALUE = re.compile(
    r"^(?:[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*\s*[(\[]"
    r"|(?:os|self|request|req|env|config|settings|process|ctx|args|params|this|cfg)\.)"
)


def _secret_value(value: str, text: str, start: int, end: int) -> bool:
    """A plausible secret value: not a placeholder, not code, and, after a bare `:`, not a word.

    A colon or "is" also introduces prose ("password: please reset it", "the password is
    required"), so an unquoted value there must look like a credential (a digit or a symbol).
    """
    if len(value) < 4 or _PLACEHOLDER_VALUE.match(value) or _CODE_VALUE.match(value):
        return False
    if value[0] in "/~" and "/" in value[1:]:
        return False  # a path ("pwd: /home/deploy"), not a password
    before = text[max(0, start - 5) : start]
    quoted = before.endswith(('"', "'"))
    prose = before.rstrip().endswith((":", "：", " is", " was"))
    if prose and not quoted:
        return len(value) >= 6 and any(not ch.isalpha() for ch in value)
    return True


def _chinese_secret_value(value: str, text: str, start: int, end: int) -> bool:
    return (
        len(value) >= 4
        and not _PLACEHOLDER_VALUE.match(value)
        and any(not ch.isalpha() for ch in value)
    )


def _bearer(value: str, text: str, start: int, end: int) -> bool:
    return len(value) >= 20 or any(ch.isdigit() for ch in value)


# --- patterns ----------------------------------------------------------------------------------

_CN_AREA = r"(?:10|2\d|[3-9]\d{2})"
CN_MOBILE = (
    r"(?<![0-9A-Za-z+])(?:(?:\+|00)86[ -]?|86-)?"
    r"1[3-9]\d(?:[ -]?\d{4}){2}" + _R
)
CN_LANDLINE = (
    r"(?<![0-9A-Za-z+])(?:(?:\+|00)86[ -]?"
    + _CN_AREA
    + r"|\(0"
    + _CN_AREA
    + r"\)|0"
    + _CN_AREA
    + r")[ -]?\d{3,4}[ -]?\d{4}"
    + _R
)
CN_SERVICE_NUMBER = _L + r"[48]00[ -]\d{3}[ -]\d{4}" + _R
CN_ID = (
    r"[1-9](?<![0-9A-Za-z][1-9])\d{5} ?(?:18|19|20)\d{2}(?:0[1-9]|1[0-2])"
    r"(?:0[1-9]|[12]\d|3[01]) ?\d{3}[\dXx]" + _R
)
# Written to start with a digit (not a lookbehind) so the regex engine can skip to digits.
CARD = (
    r"\d(?<![0-9A-Za-z]\d)(?<!\d[ -]\d)(?:"
    r"\d{11,18}"
    r"|\d{3}([ -])\d{4}\1\d{4}(?:\1\d{1,4}(?:\1\d{1,3})?)?"  # 4-4-4[-4[-3]]
    r"|\d{3}([ -])\d{6}\2\d{4,5}"  # Amex 4-6-5, Diners 4-6-4
    r"|\d{5}([ -])\d{13}"  # 6-13
    r")(?![0-9A-Za-z]|[ -]\d)"
)
EMAIL = (
    r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9][A-Za-z0-9._%+-]{0,63}@"
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,24}(?![A-Za-z0-9-])"
)
# Octet ranges (0-255, no leading zero) are checked by the validator, so the pattern can
# start with a digit and the regex engine can skip to digits.
IPV4 = r"\d(?<![0-9A-Za-z.]\d)\d{0,2}(?:\.\d{1,3}){3}(?![0-9A-Za-z]|\.\d)"
IPV6 = (
    r"(?<![0-9A-Za-z:.])(?=[0-9A-Fa-f]*:[0-9A-Fa-f]*:)[0-9A-Fa-f:]{2,39}"
    r"(?:(?<=:)(?:\d{1,3}\.){3}\d{1,3})?(?![0-9A-Za-z:]|\.\d)"
)
# "version 1.2.3.4", "版本号：10.2.0.1": a dotted quad introduced as a version is not an address.
VERSION_BEFORE = (
    r"(?:(?<![a-z])(?:version|ver\.?|release|build|firmware|v)|版本号?|固件|内部版本)"
    r"[ \t]*(?:[:：=#]|is|为|是)?[ \t]*$"
)
CN_PASSPORT = r"[EG](?<![0-9A-Za-z][EG])(?:\d{8}|(?<=E)[A-HJ-NP-Z]\d{7})" + _R
GENERIC_PASSPORT = _L + r"(?:[A-Z]{1,2}\d{6,8}|\d{9}|[A-Z]\d{7}[A-Z])" + _R
SSN = r"\d(?<![0-9A-Za-z-]\d)\d{2}-\d{2}-\d{4}(?![0-9A-Za-z]|-\d)"
SSN_CONTEXT = _L + r"(?:\d{3} \d{2} \d{4}|\d{9})" + _R
IBAN = r"[A-Z](?<![0-9A-Za-z][A-Z])[A-Z]\d{2}(?: ?[A-Z0-9]){10,34}"

_TOKEN_L = r"(?<![A-Za-z0-9_-])"
_TOKEN_R = r"(?![A-Za-z0-9_-])"
PROVIDER_KEYS = (
    _TOKEN_L + r"(?:sk-ant-[A-Za-z0-9_-]{20,}"  # Anthropic
    r"|sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"  # OpenAI
    r"|(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA|APKA)[0-9A-Z]{16}"  # AWS access key id
    r"|gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255}"  # GitHub
    r"|glpat-[A-Za-z0-9_-]{20,}"  # GitLab
    r"|xox[abposr]-[A-Za-z0-9-]{10,}|xapp-\d-[A-Za-z0-9-]{10,}"  # Slack
    r"|https://hooks\.slack\.com/services/[A-Za-z0-9_/]{20,}"  # Slack webhook
    r"|AIza[0-9A-Za-z_-]{35}"  # Google
    r"|(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,}|whsec_[0-9A-Za-z]{24,}"  # Stripe
    r"|hf_[A-Za-z0-9]{30,}"  # Hugging Face
    r"|LTAI[A-Za-z0-9]{12,20}"  # Alibaba Cloud AccessKey id
    r"|AKID[A-Za-z0-9]{32})"  # Tencent Cloud SecretId
     + _TOKEN_R
)
JWT = _TOKEN_L + r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}" + _TOKEN_R
PEM = (
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
    r"(?:[\s\S]{0,20000}?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
    r"|(?:(?:\s|\\n)*[A-Za-z0-9+/=:,-]{16,})+)"
)
CONNECTION_STRING = (
    r"(?<![A-Za-z0-9+.-])(?:jdbc:)?(?:postgres(?:ql)?|mysql|mariadb|mongodb(?:\+srv)?|rediss?"
    r"|amqps?|mssql|sqlserver|oracle|clickhouse|cockroachdb|neo4j(?:\+s)?|nats|ldaps?|s?ftp"
    r"|smtps?|https?|git|ssh|svn)(?:\+[a-z0-9]+)?://[^\s:@/'\"<>]*:[^\s@/'\"<>]+@[^\s'\"<>，。；、）」]+"
)
_SECRET_KEYS = (
    r"password|passwd|passphrase|passcode|(?<![a-z])pass|pwd|secret|token|api[_-]?key|apikey|access[_-]?key(?:[_-]?id)?"
    r"|secret[_-]?key|private[_-]?key|client[_-]?secret|auth[_-]?key|credentials?"
)
# A bare value ends at whitespace, quotes, separators — and at `&name=` (the next URL parameter).
_VALUE = r"(?:[^\s\"',;&，。；、）」]|&(?![A-Za-z_][A-Za-z0-9_]*=)){1,300}"
# "my password is Hunter2!": prose, so the value must look like a credential (validator).
PASSWORD_IS = (
    r"(?i)(?<![a-z])(?:password|passwd|passcode|pwd)[ \t]+(?:is|was)[ \t]+(?:(?P<q>[\"'])"
    r"(?P<quoted>[^\"'\r\n]{1,300})(?P=q)|(?P<bare>" + _VALUE + r"))"
)
KEY_VALUE = (
    r"(?i)(?:" + _SECRET_KEYS + r")[\"']?"
    r"[ \t]*(?:=|:(?!//))[ \t]*(?:(?P<q>[\"'])(?P<quoted>[^\"'\r\n]{1,300})(?P=q)"
    r"|(?P<bare>" + _VALUE + r"))"
)
CLI_FLAG = (
    r"(?i)(?<![A-Za-z0-9_-])--(?:password|passwd|pass|token|api-key|secret)[= ]"
    r"(?:(?P<q>[\"'])(?P<quoted>[^\"'\r\n]{1,300})(?P=q)|(?P<bare>" + _VALUE + r"))"
)
CHINESE_KEY_VALUE = (
    r"(?:密码|口令|密钥|秘钥|令牌|授权码)[ \t]*(?:[:：=]|是|为)[ \t]*"
    r"(?P<bare>[!#-&(-+\--:<-~]{1,200})"
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
                        score=0.85, validator=_phone),
        CadreRecognizer(name="cn_landline", entity="CN_PHONE",
                        patterns=[("landline", CN_LANDLINE), ("service", CN_SERVICE_NUMBER)],
                        score=0.75, validator=_phone),
        CadreRecognizer(name="cn_resident_id", entity="CN_ID", patterns=[("id18", CN_ID)],
                        score=1.0, validator=_cn_id),
        CadreRecognizer(name="payment_card", entity="PAYMENT_CARD", patterns=[("card", CARD)],
                        score=1.0, validator=_card),
        CadreRecognizer(name="email", entity="EMAIL", patterns=[("email", EMAIL)], score=0.9,
                        literals=("@",)),
        CadreRecognizer(name="ipv4", entity="IP_ADDRESS", patterns=[("ipv4", IPV4)], score=0.8,
                        validator=_ipv4,
                        literals=(".",), negative_context=VERSION_BEFORE),
        CadreRecognizer(name="ipv6", entity="IP_ADDRESS", patterns=[("ipv6", IPV6)], score=0.8,
                        literals=(":",), validator=_ipv6),
        CadreRecognizer(name="cn_passport", entity="PASSPORT", patterns=[("cn", CN_PASSPORT)],
                        score=0.75),
        CadreRecognizer(name="passport_in_context", entity="PASSPORT",
                        patterns=[("generic", GENERIC_PASSPORT)], score=0.7,
                        context=("passport", "护照", "passeport", "pasaporte", "reisepass",
                                 "パスポート", "旅券", "travel document"),
                        context_required=True),
        CadreRecognizer(name="us_ssn", entity="US_SSN", patterns=[("ssn", SSN)], score=0.85,
                        literals=("-",), validator=_ssn),
        CadreRecognizer(name="us_ssn_in_context", entity="US_SSN",
                        patterns=[("ssn_bare", SSN_CONTEXT)], score=0.7, validator=_ssn,
                        context=("ssn", "social security", "社会安全号", "社保号"),
                        context_required=True),
        CadreIbanRecognizer(name="iban", entity="IBAN", patterns=[("iban", IBAN)], score=1.0),
        CadreRecognizer(name="provider_key", entity="SECRET",
                        patterns=[("provider", PROVIDER_KEYS)], score=1.0, validator=_has_digit),
        CadreRecognizer(name="jwt", entity="SECRET", patterns=[("jwt", JWT)], score=1.0,
                        literals=("eyJ",)),
        CadreRecognizer(name="pem_private_key", entity="SECRET", patterns=[("pem", PEM)],
                        score=1.0, literals=("PRIVATE KEY-----",)),
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
