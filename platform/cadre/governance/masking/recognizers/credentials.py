"""Secrets: provider API keys, JWTs, private keys, connection strings, and passwords or keys
given as `key=value`, a CLI flag, prose or Chinese (`密码：…`)."""

from __future__ import annotations

import base64
import binascii
import re
import unicodedata

from cadre.governance.masking import checks
from cadre.governance.masking.recognizers.base import CadreRecognizer, Detection
from cadre.governance.masking.recognizers.text import FILE_EXTENSIONS

_TOKEN_R = r"(?![A-Za-z0-9_-])"
# The left boundary is checked by the validator (`is_provider_key`), so the pattern starts with
# the prefixes and the regex engine skips ahead to them. No right boundary: each token runs over
# its own alphabet and stops at the first character outside it, so a glued neighbour never makes
# a token vanish (`xoxb-…_`, `sk_live_…_` in markdown emphasis); a word glued to a fixed-length
# token is cut off again by `ProviderKeyRecognizer.trim`, anything else stays masked with it.
_TOKEN_L_GLUED = r"(?<![0-9-])(?<![A-Za-z0-9_-]_)"
PROVIDER_KEYS = (
    r"(?:(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA|APKA)[0-9A-Z]{16}[0-9A-Za-z]*"  # AWS key id
    r"|gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255}"  # GitHub
    r"|glpat-[A-Za-z0-9_-]{20,}"  # GitLab
    r"|xox[abposr]-[A-Za-z0-9-]{10,}|xapp-\d-[A-Za-z0-9-]{10,}"  # Slack
    r"|sk-ant-[A-Za-z0-9_-]{20,}"  # Anthropic
    r"|sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"  # OpenAI
    r"|https://hooks\.slack\.com/services/[A-Za-z0-9_/]{20,}"  # Slack webhook
    r"|AIza[0-9A-Za-z_-]{35,}"  # Google
    r"|(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,}|whsec_[0-9A-Za-z]{24,}"  # Stripe
    r"|hf_[A-Za-z0-9]{30,}"  # Hugging Face (34 letters, or letters and digits)
    r"|LTAI[A-Za-z0-9]{12,}"  # Alibaba Cloud AccessKey id
    r"|AKID[A-Za-z0-9]{32,})"  # Tencent Cloud SecretId
)
# Formats whose issuer fixes the length (prefix included): AWS key ids 20, GitHub classic
# tokens 40 (`ghp_` + 36), fine-grained ones 93 (`github_pat_` + 22 + `_` + 59), Google API
# keys 39, Tencent SecretIds 36. Longer runs are these tokens glued to whatever follows.
_FIXED_LENGTHS = (
    (re.compile(r"(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA|APKA)[0-9A-Z]{16}"), 20),
    (re.compile(r"gh[pousr]_"), 40),
    (re.compile(r"github_pat_[A-Za-z0-9]{22}_[A-Za-z0-9]{59}"), 93),
    (re.compile(r"AIza"), 39),
    (re.compile(r"AKID"), 36),
)
# What is glued after a fixed-length token and is cut off: a word (`Contact`, `Thanks`, `asap`,
# `Regards`), read as capitalized or lower case letters. Anything else (`…EXAMPLEUSER`,
# `…1234abcd`) might be the token's own characters, so it stays masked.
_GLUED_WORD = re.compile(r"[A-Z]?[a-z]+")


class ProviderKeyRecognizer(CadreRecognizer):
    """Provider tokens: a run over the token's alphabet, cut back to the issuer's length when
    what follows that length is a glued word (`AKIAIOSFODNN7EXAMPLEContact:`)."""

    def trim(self, text: str, start: int, end: int) -> tuple[int, int]:
        for prefix, length in _FIXED_LENGTHS:
            if end - start > length and prefix.match(text, start):
                if _GLUED_WORD.fullmatch(text, start + length, end):
                    return start, start + length
                break
        return start, end


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


_PROVIDER_PREFIX = re.compile(
    r"^(?:sk-ant-(?:[a-z]+\d*-)?|sk-(?:proj-|svcacct-|admin-)?|gh[pousr]_|github_pat_|glpat-"
    r"|xox[abposr]-|xapp-|https://hooks\.slack\.com/services/|AIza|(?:sk|rk)_(?:live|test)_"
    r"|whsec_|hf_|LTAI|AKID)"
)
# Prefixes no word ends with: a token may be glued to the word before it. `AIza` (Google) is
# one too: a capital `AI` after a word's letters, then `za`.
_GLUABLE_PREFIX = re.compile(
    r"(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA|APKA|gh[pousr]_|github_pat_|glpat-|xox[abposr]-"
    r"|xapp-|AIza)"
)
_AWS_PREFIX = re.compile(r"AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA|APKA")
_AWS_KEY_ID = re.compile(r"^(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA|APKA)[0-9A-Z]{16}$")


def _token_char(ch: str) -> bool:
    return ch.isascii() and (ch.isalnum() or ch in "_-")


def is_provider_key(value: str, text: str, start: int, end: int) -> bool:
    """The random part after the provider's prefix has a digit or both cases.

    Per provider, not "a digit anywhere": a Hugging Face token is `hf_` + 34 letters (the
    gitleaks/detect-secrets rule), and a random 24-character Stripe key has no digit one time in
    seventy. Mixed case is what a word or a kebab-case name (`sk-some-long-name-here`) lacks.
    An AWS key id (fixed prefix, exactly 16 upper-case letters and digits) needs nothing more.

    Left boundary: not glued to a token character; prefixes no word ends with (AWS, GitHub,
    GitLab, Slack) may follow a letter (`plsghp_…`, `SSNAKIA…`), `sk-` may not
    (`task-proj-…` is a name). An underscore that opens markdown emphasis (`_ghp_…_`: nothing
    of a token before it) is no token character.
    """
    if start:
        before = text[start - 1]
        if before == "_" and (start == 1 or not _token_char(text[start - 2])):
            before = " "
        if before.isascii() and (before.isdigit() or before in "_-"):
            return False
        if before.isascii() and before.isalpha() and not _GLUABLE_PREFIX.match(value):
            return False
    if _AWS_KEY_ID.match(value):
        return True
    if _AWS_PREFIX.match(value):
        # Longer than an id: an id glued to more characters only when its own 16 random ones
        # look random (a digit); `ASIAPACIFICHEADQUARTERSReport` is words.
        return any(ch.isdigit() for ch in value[4:20])
    prefix = _PROVIDER_PREFIX.match(value)
    body = value[prefix.end() :] if prefix else value
    if value.startswith("xox"):
        # Slack tokens always have their numeric team/user segments (`xoxb-<digits>-<digits>-…`):
        # `xoxb-your-token-here` is a placeholder.
        return any(ch.isdigit() for ch in body)
    return any(ch.isdigit() for ch in body) or (
        any(ch.isupper() for ch in body) and any(ch.islower() for ch in body)
    )


def is_jwt(value: str, text: str, start: int, end: int) -> bool:
    """A JWT with an empty signature (`eyJ….eyJ….`) only when its header says `"alg":"none"`."""
    if not value.endswith("."):
        return True
    header = value.split(".", 1)[0]
    try:
        decoded = base64.urlsafe_b64decode(header + "=" * (-len(header) % 4))
    except (ValueError, binascii.Error):
        return False
    return b'"none"' in decoded.lower().replace(b" ", b"")


def is_mixed_key(value: str, text: str, start: int, end: int) -> bool:
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


# Code, not a value: a call or a subscript (`get_password()`, `os.getenv(` cut by the quote that
# follows, `env(DB_PASS)`, `settings["x"]` cut the same way), whose arguments, when the value
# shows them, are names only; or an attribute of a well-known object. A password may hold a
# parenthesis too (`g8aBPUtI2(45Up`, `s(X%1I0g))`): unclosed, or with symbols inside, it is none.
_CODE_VALUE = re.compile(
    r"^(?:[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*\s*[(\[](?:[A-Za-z0-9_.]*[)\]])?$"
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


_EMPHASIS = "_*`~"


def _without_closing_emphasis(value: str, text: str, start: int) -> str:
    """`value` without a trailing markdown mark that closes one opened before it on the line
    (`_password: ******_`, `*token=get_token()*`), for judging what the value is. The span
    keeps the mark: a password may end with `_` too, and masking one more character is safe."""
    mark = value[-1:]
    if not mark or mark not in _EMPHASIS:
        return value
    index, stop = start - 1, max(-1, start - 1 - _LOOK_BACK)
    while index > stop and text[index] not in "\r\n":
        if text[index] == mark and (index == 0 or not _token_char(text[index - 1])):
            return value.rstrip(mark)
        index -= 1
    return value


def is_secret_value(value: str, text: str, start: int, end: int) -> bool:
    """A plausible secret value: not a placeholder, not code, and, after a bare `:`, not a word.

    A colon or "is" also introduces prose ("password: please reset it", "the password is
    required"), so an unquoted value there must look like a credential (`_credential_like`);
    after `=` or in quotes anything that is not a placeholder or code counts.
    """
    value = _without_closing_emphasis(value, text, start)
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


def is_mysql_password(value: str, text: str, start: int, end: int) -> bool:
    """`mysql … -pSECRET`: lower-case `-p` glued to the value (`-P3306` is the port)."""
    head = text[max(0, start - 3) : start].rstrip("\"'")
    return head.endswith("-p") and not _placeholder(value)


# "SHA256", "RSA-2048", "AES_256", "8-16": an algorithm or a length, not a password.
_NOT_A_PASSWORD = re.compile(r"^(?:[A-Z]{2,6}[-_]?\d{1,4}|\d{1,3}(?:[-~]\d{1,3})?)$")


def is_chinese_secret_value(value: str, text: str, start: int, end: int) -> bool:
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
    if value[0] == "." or ("." in value and value.rsplit(".", 1)[1] in FILE_EXTENSIONS):
        return False  # `密码.numbers`, `密码表.xlsx`: a file name
    return len(value) >= 6 and _char_classes(value) >= 2 and not _NOT_A_PASSWORD.match(value)


def is_bearer(value: str, text: str, start: int, end: int) -> bool:
    return len(value) >= 20 or any(ch.isdigit() for ch in value)


# How far back on the line an opening bracket or emphasis mark is looked for: a sentence, and
# a bound on the work per value however long the line.
_LOOK_BACK = 200
_CLOSING = {")": "(", "]": "[", "}": "{", ">": "<", "）": "（", "】": "【", "」": "「", "》": "《"}


def _unclosed_before(text: str, position: int, opener: str, closer: str) -> bool:
    """An `opener` on the line before `position` that no `closer` closes yet."""
    depth = 0
    index, stop = position - 1, max(-1, position - 1 - _LOOK_BACK)
    while index > stop and text[index] not in "\r\n":
        if text[index] == closer:
            depth -= 1
        elif text[index] == opener:
            depth += 1
            if depth > 0:
                return True
        index -= 1
    return False


class SecretValueRecognizer(CadreRecognizer):
    """Reports one of the named value groups (`quoted` or `bare`), whichever matched.

    A bare value ends where `_VALUE` stops (whitespace, quotes, `,` `;`, `&name=`, CJK). Its
    last characters are the password's own even when they are punctuation (`Summer2024.`,
    `Ab3$x)`): cutting them off would send them to the model. Only a closing bracket that closes
    one opened before the label and not inside the value is taken off (`(password: Qw3rty!9x)`);
    a sentence's full stop after a password is masked with it.
    """

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

    @staticmethod
    def _trim_brackets(text: str, label: int, start: int, end: int) -> tuple[int, int]:
        while end > start and text[end - 1] in _CLOSING:
            closer, opener = text[end - 1], _CLOSING[text[end - 1]]
            value = text[start : end - 1]
            if value.count(opener) >= value.count(closer) + 1:
                break  # it closes a bracket of the value itself
            if not _unclosed_before(text, label, opener, closer):
                break
            end -= 1
        return start, end

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
                    start, end = self._trim_brackets(text, match.start(), *match.span("bare"))
                value = text[start:end]
                if end > start and self.validator(value, text, start, end):
                    found.append(Detection(start, end, self.entity, self.score, self.name))
        return found
