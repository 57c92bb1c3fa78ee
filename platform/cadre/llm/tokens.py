"""The platform's one token estimator: context budgets, memory budgets, offline usage."""

from __future__ import annotations

import math
import re

_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af]")
# A word is a run of Latin letters, digits and underscores; every other non-space, non-CJK
# character is a symbol. The two are counted separately (in C, not per word).
_LATIN_WORD = re.compile(r"[A-Za-z0-9_]+")
_SYMBOL = re.compile(r"[^\sA-Za-z0-9_\u3400-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af]")


def estimate_tokens(text: str) -> int:
    """Deterministic token estimate: one per CJK character, 4/3 per Latin word, one per symbol.

    Close to cl100k counts for English prose and on the safe (high) side for Chinese; it needs
    no tokenizer download and gives the same number on every machine.
    """
    if not text:
        return 0
    cjk = len(_CJK.findall(text))
    # (a symbol that is a letter or digit of another script counts as a word)
    others = _SYMBOL.findall(text)
    lettered = sum(1 for char in others if char.isalnum()) if not text.isascii() else 0
    latin = len(_LATIN_WORD.findall(text)) + lettered
    symbols = len(others) - lettered
    return cjk + math.ceil(latin * 4 / 3) + symbols
