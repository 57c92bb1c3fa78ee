"""Chinese phone numbers: mobiles, landlines and 400/800 service numbers."""

from __future__ import annotations

import re

from cadre.governance.masking import checks
from cadre.governance.masking.recognizers.text import (
    IBAN_SHAPED_BEFORE,
    NO_DIGIT_AFTER,
    NO_DIGIT_BEFORE,
    code_prefix,
)

# 138 1234 5678, 138-1234-5678, 138.1234.5678 (dots only as both separators), +86/0086/86-
# or a bare 86 glued to the number (8613812345678).
CN_MOBILE = (
    r"(?<![0-9+])(?:(?:\+|00)86[ -]?|86-?)?"
    r"1[3-9]\d(?:(?:[ -]?\d{4}){2}|\.\d{4}\.\d{4}(?!\.\d))" + NO_DIGIT_AFTER
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
    + NO_DIGIT_AFTER
)
# 400/800 + 7 digits: 400-820-8820, 400-6818-978, 4006-818-978, 4008208820.
CN_SERVICE_NUMBER = (
    NO_DIGIT_BEFORE
    + r"[48]00(?:[ -]?\d{3}[ -]?\d{4}|[ -]?\d{4}[ -]?\d{3}|\d[ -]\d{3}[ -]\d{3})"
    + NO_DIGIT_AFTER
)
# "订单号13361890954", "order no. 4008208820": a number introduced as an order, a tracking or
# an invoice number is not a phone.
PHONE_NEGATIVE_BEFORE = (
    r"(?:订单|单号|流水号|编号|工单|运单|发票|order|invoice|tracking)"
    r"(?:[ \t]*(?:no\.?|number|id|#))?[ \t]*[:：#=]?[ \t]*[a-z]{0,3}$"
)


_DIGIT_GROUPS = re.compile(r"\d+")


def is_phone(value: str, text: str, start: int, end: int) -> bool:
    """Not a slice of a longer digit-group run laid out like a card (`6258 0720 4090 1236`),
    nor a 400/800 "number" whose last seven digits are one digit repeated (`4000000000`)."""
    digits = checks.digits_of(value)
    if digits[:3] in ("400", "800") and len(set(digits[3:])) == 1:
        return False
    if start and IBAN_SHAPED_BEFORE.search(text, max(0, start - 40), start):
        return False  # `FR45 0947 5035 2674 …`, `NL16SNSB0236373445`: an account number
    if start and "A" <= text[start - 1] <= "Z" and code_prefix(text, start):
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
