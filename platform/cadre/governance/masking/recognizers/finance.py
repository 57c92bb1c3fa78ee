"""Financial numbers: payment cards (Luhn, issuer) and IBANs (registered length, mod-97)."""

from __future__ import annotations

import re

from cadre.governance.masking import checks
from cadre.governance.masking.recognizers.base import CadreRecognizer, Detection
from cadre.governance.masking.recognizers.text import (
    IBAN_SHAPED_BEFORE,
    code_prefix,
    glued_ok,
)

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


IBAN = r"[A-Z](?<![0-9][A-Z])[A-Z]\d{2}(?:[ -]?[A-Z0-9]){10,34}"


def is_card(value: str, text: str, start: int, end: int) -> bool:
    """Luhn and issuer; not glued to a short capital code (`SF507246596435`: a waybill)."""
    if start and "A" <= text[start - 1] <= "Z" and code_prefix(text, start):
        return False
    if end < len(text) and text[end] in "Xx" and len(value) == 17:
        return False  # 17 digits and an X: a resident ID (one failing its check), not a card
    if start and IBAN_SHAPED_BEFORE.search(text, max(0, start - 40), start):
        return False  # `GB31BARC6391…`: the rest of an IBAN, not a card
    return checks.payment_card_valid(value)


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
