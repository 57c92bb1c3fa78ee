"""Network identifiers: email addresses, IPv4 and IPv6 addresses."""

from __future__ import annotations

import re

from cadre.governance.masking import checks
from cadre.governance.masking.recognizers.text import FILE_EXTENSIONS

# A local part may start with `_`, which is also how markdown emphasis opens (`_li@x.com_`):
# the span then keeps that underscore rather than leaving the address unmasked.
EMAIL = (
    r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9_][A-Za-z0-9._%+-]{0,63}@"
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


def is_ipv4(value: str, text: str, start: int, end: int) -> bool:
    """Octets 0-255 without leading zeros; not followed by a version word (`1.2.6.9版本`)."""
    if not all(
        len(octet) == 1 or (octet[0] != "0" and int(octet) <= 255) for octet in value.split(".")
    ):
        return False
    return VERSION_AFTER.match(text, end) is None


def is_ipv6(value: str, text: str, start: int, end: int) -> bool:
    return checks.ipv6_valid(value)


def is_email(value: str, text: str, start: int, end: int) -> bool:
    """Not a file name (`banner@2x.jpg`, `jquery@3.6.0.min.js`): the TLD is no file extension."""
    return value.rsplit(".", 1)[1].lower() not in FILE_EXTENSIONS
