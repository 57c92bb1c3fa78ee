"""Identity documents: Chinese resident IDs, passports and US social security numbers."""

from __future__ import annotations

import re

from cadre.governance.masking import checks
from cadre.governance.masking.recognizers.text import NO_DIGIT_AFTER, NO_DIGIT_BEFORE

CN_ID = (
    r"[1-9](?<![0-9][1-9])\d{5} ?(?:18|19|20)\d{2}(?:0[1-9]|1[0-2])"
    r"(?:0[1-9]|[12]\d|3[01]) ?\d{3}[\dXx]" + NO_DIGIT_AFTER
)
# First-generation 15-digit ID (area, YYMMDD, sequence; no check digit): only with a keyword.
CN_ID15 = r"[1-9](?<![0-9][1-9])\d{7}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])\d{3}" + NO_DIGIT_AFTER


CN_PASSPORT = r"[EG](?<![0-9A-Za-z][EG])(?:\d{8}|(?<=E)[A-HJ-NP-Z]\d{7})" + NO_DIGIT_AFTER
# US/UK 9 digits, letter(s) + digits, letter-7 digits-letter; France 2 digits-2 letters-5 digits;
# Germany 9 characters from its vowel-free alphabet (C F G H J K L M N P R T V W X Y Z 0-9).
GENERIC_PASSPORT = (  # first character, then what may follow it (the engine skips ahead)
    r"[0-9A-Z](?<![0-9A-Za-z][0-9A-Z])(?:(?<=[A-Z])(?:\d{7}[A-Z](?![A-Za-z])|[A-Z]?\d{6,8})"
    r"|(?<=\d)(?:\d{8}|\d[A-Z]{2}\d{5})|(?<=[CFGHJK])[CFGHJKLMNPRTVWXYZ0-9]{8})" + NO_DIGIT_AFTER
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
SSN_CONTEXT = NO_DIGIT_BEFORE + r"(?:\d{3} \d{2} \d{4}|\d{9})" + NO_DIGIT_AFTER


def is_cn_id(value: str, text: str, start: int, end: int) -> bool:
    return checks.cn_id_valid(value)


def is_cn_id15(value: str, text: str, start: int, end: int) -> bool:
    return checks.cn_id15_valid(value)


def is_ssn(value: str, text: str, start: int, end: int) -> bool:
    return checks.us_ssn_valid(value)


# Letters glued after a passport number that read as a word (`Ticket`, `please`), not as the
# rest of a code (`E12345678AB`, `G12345678X1`).
_GLUED_WORD_AFTER = re.compile(r"[A-Z]?[a-z]{2,}(?![A-Za-z0-9])")
# A hyphen and more letters or digits: the number is one part of a longer code.
_HYPHENATED_AFTER = re.compile(r"-[A-Za-z0-9]")


def is_cn_passport(value: str, text: str, start: int, end: int) -> bool:
    """`G12345678Ticket`: glued to letters on the right when they are a word, or after a
    passport keyword (`护照：G12345678TK`); continued by a hyphen (`E12345678-B`) only after a
    passport keyword."""
    if end < len(text) and text[end].isascii() and text[end].isalpha():
        if _GLUED_WORD_AFTER.match(text, end):
            return True
        return _after_passport_word(text, start)
    if _HYPHENATED_AFTER.match(text, end):
        return _after_passport_word(text, start)  # `E12345678-B`: a hyphenated code
    return True


def _after_passport_word(text: str, start: int) -> bool:
    before = text[max(0, start - 48) : start].lower()
    return any(word in before for word in PASSPORT_WORDS)
