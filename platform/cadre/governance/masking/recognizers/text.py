"""Text helpers the recognizers share: full-width folding, digit boundaries, letters glued to
a value, and shapes that rule a number out (an IBAN before it, a file extension)."""

# ruff: noqa: RUF003 - Chinese text and its full-width punctuation are the point

from __future__ import annotations

import re

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


# Values whose own format is unambiguous (phones, IDs, cards, IPv4, SSNs, IBANs) may be glued
# to Latin letters as well (`服务器IP10.1.2.3宕机了`, `…1234SSN`): the pattern only refuses a
# digit next to them, and `glued_ok` refuses a glued run that has digits in it (a hash, a code).
NO_DIGIT_BEFORE = r"(?<![0-9])"
NO_DIGIT_AFTER = r"(?![0-9])"


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


def code_prefix(text: str, start: int) -> bool:
    """Glued right after 1-3 capital letters that are no phone label (`SF040891304371`,
    `JD…`): a tracking number or a code, not a phone."""
    index = start
    while index > 0 and "A" <= text[index - 1] <= "Z":
        index -= 1
    run = text[index:start]
    if not 1 <= len(run) <= 3 or run in ("TEL", "MOB", "PH"):
        return False
    return index == 0 or not (text[index - 1].isascii() and text[index - 1].isalpha())


# A country code and two check digits, then groups of four (`FR45 `, `NL16SNSB`, `ES60-4623-`):
# what follows is the rest of an IBAN (one that fails its checksum is still no phone).
IBAN_SHAPED_BEFORE = re.compile(r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?:[ -]?[A-Z0-9]{4})*[ -]?$")


# Never top-level domains (checked against the IANA root zone): `icon@2x.png` is an image.
# Not listed because they ARE TLDs: zip, mov, app, dev, md, py, rs, sh, so, java, mobi.
FILE_EXTENSIONS = frozenset({
    "png", "jpg", "jpeg", "gif", "svg", "webp", "bmp", "ico", "tif", "tiff", "heic", "avif",
    "psd", "pdf", "doc", "docx", "xls", "xlsx", "ppt", "pptx", "txt", "csv", "json", "xml",
    "yml", "yaml", "htm", "html", "css", "js", "ts", "jsx", "tsx", "vue", "log", "bak", "tmp",
    "exe", "dll", "apk", "dmg", "iso", "rar", "gz", "tgz", "tar", "wav", "avi", "mkv", "webm",
    "flv", "ogg",
})  # fmt: skip
