"""Checksum and structure validators for identifiers (Luhn, ISO 7064 MOD 11-2, mod-97, SSN).

Pure functions on the matched text; recognizers call them so a candidate with an invalid
checksum is never reported as an ID or a card.
"""

from __future__ import annotations

import datetime
import ipaddress
import unicodedata

_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_ID_CHECK = "10X98765432"
# First two digits of a mainland resident ID: province-level division codes.
# fmt: off
CN_PROVINCES = frozenset({
    "11", "12", "13", "14", "15", "21", "22", "23", "31", "32", "33", "34", "35", "36", "37",
    "41", "42", "43", "44", "45", "46", "50", "51", "52", "53", "54", "61", "62", "63", "64",
    "65", "71", "81", "82", "83", "91",
})
# fmt: on

# IBAN length per country (ISO 13616 registry, the countries in common use).
IBAN_LENGTHS = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22,
    "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DK": 18, "DO": 28,
    "EE": 20, "EG": 29, "ES": 24, "FI": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23,
    "GL": 18, "GR": 27, "GT": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26,
    "IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20,
    "LV": 21, "LY": 25, "MC": 27, "MD": 24, "ME": 22, "MK": 19, "MR": 27, "MT": 31, "MU": 30,
    "NL": 18, "NO": 15, "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22,
    "SA": 24, "SC": 31, "SD": 18, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "ST": 25, "SV": 28,
    "TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20,
}  # fmt: skip


def digits_of(text: str) -> str:
    """The decimal digits of `text` as ASCII (full-width digits included, as 0-9)."""
    if text.isascii():
        return "".join(ch for ch in text if ch.isdigit())
    return "".join(str(unicodedata.decimal(ch)) for ch in text if ch.isdecimal())


def luhn_valid(number: str) -> bool:
    """Luhn over decimal digits of any script (`int()`, never `ord() - 48`)."""
    total = 0
    for index, ch in enumerate(reversed(number)):
        digit = int(ch)
        if index % 2:
            digit *= 2
            if digit > 9:
                digit -= 9
        total += digit
    return total % 10 == 0


def card_brand_ok(number: str) -> bool:
    """The number starts with a known issuer prefix and has a length that issuer uses.

    Luhn alone passes one random number in ten; the issuer prefix is what keeps order numbers
    and timestamps (which start with 1, 2 or 9) out.
    """
    length = len(number)
    head2, head3, head4 = int(number[:2]), int(number[:3]), int(number[:4])
    if number[0] == "4":  # Visa (13, 16 and 19 digits; Electron and Debit vary)
        return 13 <= length <= 19
    if 51 <= head2 <= 55 or 2221 <= head4 <= 2720:  # Mastercard
        return length == 16
    if head2 in (34, 37):  # American Express
        return length == 15
    if head2 in (62, 81, 82):  # UnionPay (and RuPay 81/82)
        return 16 <= length <= 19
    if head4 == 6011 or head2 == 65 or 644 <= head3 <= 649:  # Discover
        return 16 <= length <= 19
    if head2 == 35:  # JCB
        return 16 <= length <= 19
    if head4 in (1800, 2131):  # JCB, 15-digit series
        return length == 15
    if 300 <= head3 <= 305 or head3 == 309 or head2 in (36, 38, 39):  # Diners Club
        return 14 <= length <= 19
    if head2 in (50, 56, 57, 58, 60, 63, 67):  # Maestro (from 12 digits), RuPay
        return 12 <= length <= 19
    if 2200 <= head4 <= 2204:  # Mir
        return 16 <= length <= 19
    return False


def ean13_valid(number: str) -> bool:
    total = sum(int(ch) * (3 if index % 2 else 1) for index, ch in enumerate(number[:12]))
    return (10 - total % 10) % 10 == int(number[12])


def payment_card_valid(text: str) -> bool:
    number = digits_of(text)
    if not 12 <= len(number) <= 19 or not card_brand_ok(number) or not luhn_valid(number):
        return False
    # A 13-digit run that is a valid EAN-13 is a product barcode far more often than one of
    # the rare 13-digit cards (a tenth of which a barcode check would also pass).
    if len(number) == 13 and text.isdigit() and ean13_valid(number):
        return False
    # An 18-digit number laid out like a resident ID (province + birth date; contiguous or
    # split 6-12 / 6-8-4 as IDs are written) is an ID, valid or not: a mistyped ID must not
    # come back as a card.
    return not (len(number) == 18 and _id_layout(text) and cn_id_shape(number))


def _id_layout(text: str) -> bool:
    """Separators only where an ID has them: after the area code and after the birth date."""
    position, breaks = 0, set()
    for ch in text:
        if ch.isdigit():
            position += 1
        else:
            breaks.add(position)
    return breaks <= {6, 14}


def cn_id_check_char(first17: str) -> str:
    total = sum(int(ch) * weight for ch, weight in zip(first17, _ID_WEIGHTS, strict=True))
    return _ID_CHECK[total % 11]


def _birth_date_ok(value: str, today: datetime.date | None = None) -> bool:
    try:
        born = datetime.date(int(value[:4]), int(value[4:6]), int(value[6:8]))
    except ValueError:
        return False
    today = today or datetime.date.today()
    return datetime.date(1900, 1, 1) <= born <= today


def cn_id_shape(number: str) -> bool:
    return number[:2] in CN_PROVINCES and _birth_date_ok(number[6:14])


def cn_id15_valid(text: str) -> bool:
    """15-digit first-generation ID (issued until 2004, no check digit): province and a real
    birth date 19YYMMDD — too weak alone, so the recognizer also wants an ID keyword nearby."""
    value = digits_of(text)
    if len(value) != 15:
        return False
    return value[:2] in CN_PROVINCES and _birth_date_ok("19" + value[6:12])


def cn_id_valid(text: str) -> bool:
    """18-character resident ID: province, real birth date, ISO 7064 MOD 11-2 check char."""
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text)  # full-width digits and X
    value = text.replace(" ", "").upper()
    if len(value) != 18 or not value[:17].isdigit():
        return False
    return cn_id_shape(value) and cn_id_check_char(value[:17]) == value[17]


def iban_valid(compact: str) -> bool:
    compact = compact.upper()
    expected = IBAN_LENGTHS.get(compact[:2])
    if expected is None or len(compact) != expected or not compact[2:4].isdigit():
        return False
    rearranged = compact[4:] + compact[:4]
    try:
        number = int("".join(str(int(ch, 36)) for ch in rearranged))
    except ValueError:
        return False
    return number % 97 == 1


def us_ssn_valid(text: str) -> bool:
    """Area 001-899 except 666, group 01-99, serial 0001-9999; famous sample numbers refused."""
    number = digits_of(text)
    if len(number) != 9:
        return False
    area, group, serial = number[:3], number[3:5], number[5:]
    if area in ("000", "666") or area[0] == "9" or group == "00" or serial == "0000":
        return False
    # Woolworth's wallet card and the 1962 Social Security pamphlet: printed, never real.
    return number not in ("078051120", "219099999")


def ipv6_valid(text: str) -> bool:
    if text.count(":") < 2:
        return False
    try:
        address = ipaddress.IPv6Address(text)
    except ValueError:
        return False
    # "::" and "::1"-like fragments are too short to be worth masking (and appear in code).
    return len(text.replace(":", "")) >= 4 or address.is_loopback


def shannon_mix(value: str) -> bool:
    """Upper, lower and a digit all present: separates real keys from hex hashes and words."""
    return (
        any(ch.isupper() for ch in value)
        and any(ch.islower() for ch in value)
        and any(ch.isdigit() for ch in value)
    )
