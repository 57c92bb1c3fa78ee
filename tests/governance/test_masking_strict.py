"""Masking that leaks nothing (issue 29, finding 13): every character of a value is inside a
detection. Each case below leaked part or all of its value before the fix: a fixed-length token
glued to the next word, a token or e-mail in markdown underscores, a password ending with a
symbol, a password that looked like a function call, a Chinese passport glued to a word — and
the near-misses that must stay as they are."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.governance.test_masking_engine import found

ROOT = Path(__file__).resolve().parents[2]

GHP = "ghp_5KjHkR7LbWyruZKgC8HKO68VzY49VDN0y8wY"  # 36 characters after the prefix
AIZA = "AIzaXUFw4AECQcrYnByLFvd6mHk7JII6CjAQ5bK"  # 35 after the prefix
PAT = (
    "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"
)

EXACT = [
    # A fixed-length token glued to the next word: the issuer's length says where it ends.
    ("AKIAIOSFODNN7EXAMPLEContact: ops", [("SECRET", "AKIAIOSFODNN7EXAMPLE")]),
    ("key toASIAIJZVFAQD6S62ZNWTNote 请查收", [("SECRET", "ASIAIJZVFAQD6S62ZNWT")]),
    (f"用户{AIZA}Contact: 别外传", [("SECRET", AIZA)]),
    (f"token {GHP}Thanks", [("SECRET", GHP)]),
    # Google keys glued to the word before them (`AIza` ends no word) and after them.
    (f"keyAIza{AIZA[4:]}Thanks", [("SECRET", AIZA)]),
    (f"Ref{AIZA}ok 明天到期", [("SECRET", AIZA)]),
    # Markdown emphasis around a token or an address: `_…_` is no part of a longer token.
    (f"请用 _{GHP}_ 已发", [("SECRET", GHP)]),
    ("客户_ASIAZW4NVDBWOATP73BC_；", [("SECRET", "ASIAZW4NVDBWOATP73BC")]),
    (f"新的 _{PAT}_ 已发", [("SECRET", PAT + "_")]),
    (
        "_xoxb-929870233259-0699703701536-ja2URyHapdYTWelGbLKib1T8_。",
        [("SECRET", "xoxb-929870233259-0699703701536-ja2URyHapdYTWelGbLKib1T8")],
    ),
    ("Hi, _sk_live_h6SmXj1YsvoLILsuHdTOsTLc_。", [("SECRET", "sk_live_h6SmXj1YsvoLILsuHdTOsTLc")]),
    # A password ending with a symbol keeps it (`.` or `)` may be its last character).
    ("password=T85Gp8q2S%3I)&user=admin", [("SECRET", "T85Gp8q2S%3I)")]),
    ("?user=bob&pwd=4r13Nop8_H!Vm. 已改", [("SECRET", "4r13Nop8_H!Vm.")]),
    ("密码:#f9ORCw%.；谢谢", [("SECRET", "#f9ORCw%.")]),
    ("mysql -h db1 -u root -p#LYjE)eHj1*LA. prod", [("SECRET", "#LYjE)eHj1*LA.")]),
    # … but a bracket that closes one opened before the label is not the password's.
    ("(password: Qw3rty!9x)", [("SECRET", "Qw3rty!9x")]),
    ("（密码：Qw3rty!9x）", [("SECRET", "Qw3rty!9x")]),
    # A password with a parenthesis is no function call.
    ('password="s(X%1I0g))" ok', [("SECRET", "s(X%1I0g))")]),
    ("password='Fj6djM(v%' ok", [("SECRET", "Fj6djM(v%")]),
    ("password=g8aBPUtI2(45Up。", [("SECRET", "g8aBPUtI2(45Up")]),
    ("DB_PASSWORD=_NT(96Wxg8yt 已改", [("SECRET", "_NT(96Wxg8yt")]),
    # A Chinese passport glued to a word on the right, no keyword before it.
    ("E67767117Ticket", [("PASSPORT", "E67767117")]),
    # Glued to an upper-case run, the id's end cannot be told: all of it is masked.
    ("AKIAIOSFODNN7EXAMPLEUSER", [("SECRET", "AKIAIOSFODNN7EXAMPLEUSER")]),
    # A hyphenated continuation is a code, unless a passport keyword introduces the number.
    ("护照 E12345678-B", [("PASSPORT", "E12345678")]),
    # An e-mail in markdown underscores (the span may keep the opening one).
    ("FYI _sean91@holder-thompson.com_；", [("EMAIL", "_sean91@holder-thompson.com")]),
]


@pytest.mark.parametrize(("text", "expected"), EXACT)
def test_values_glued_to_their_neighbours_are_masked_whole(text, expected):
    assert found(text) == expected


NEAR_MISSES = [
    "password=os.getenv(",  # code, cut by the quote that follows in the source
    'password=os.getenv("DB_PASSWORD")',
    "password=get_password()",
    "api_key=settings.API_KEY",
    "E12345678AB",  # a code: a capital run glued to the number, no passport keyword
    "AKIA",
    "ghp_short",
    "my_AKIA_value",
    # Placeholders and prose inside markdown emphasis: the closing mark is no part of them.
    "_the password is required_ 已发",
    "_password: ******_ 已发",
    # A hyphenated code shaped like a passport, with no passport keyword.
    "E12345678-B",
    "`E27078328-B`。",
    # Words sharing a token's prefix, now that tokens run on over glued characters.
    "FYI xoxb-your-token-hereThanks",
    "ASIAPACIFICHEADQUARTERSReport",
]


@pytest.mark.parametrize("text", NEAR_MISSES)
def test_near_misses_stay_unmasked(text):
    assert found(text) == []


def test_bench_strict_measure_counts_a_half_masked_value_as_a_leak():
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import masking as bench
    finally:
        sys.path.remove(str(ROOT / "bench"))
    gold = [{"start": 0, "end": 20, "type": "SECRET"}, {"start": 30, "end": 40, "type": "EMAIL"}]
    half = [{"start": 0, "end": 12, "type": "SECRET"}, {"start": 30, "end": 40, "type": "IBAN"}]
    counts = bench.strict_match(gold, half)
    # IoU 0.6 is a hit by the old rule; strictly the secret leaks 8 characters.
    assert bench.match(gold, half)[0]["SECRET"] == 1
    assert counts["safe"]["SECRET"] == 0
    assert counts["safe"]["EMAIL"] == 0 and counts["safe_any"]["EMAIL"] == 1
    assert counts["pred_ok"]["SECRET"] == 0
    # Two adjacent detections of the type cover a value together.
    split = [{"start": 0, "end": 12, "type": "SECRET"}, {"start": 12, "end": 20, "type": "SECRET"}]
    assert bench.strict_match(gold[:1], split)["safe"]["SECRET"] == 1


def test_bench_strict_output_has_the_strict_fields(tmp_path):
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import masking as bench
    finally:
        sys.path.remove(str(ROOT / "bench"))
    text = "AKIAIOSFODNN7EXAMPLEContact: ops"
    data = tmp_path / "one.jsonl"
    data.write_text(json.dumps({"text": text, "gold": [{"start": 0, "end": 20, "type": "SECRET"}]}))
    result = bench.evaluate([data], strict=True)
    assert result["SECRET"]["leak_free"] == 1.0
    assert result["SECRET"]["strict_precision"] == 1.0
    assert result["ALL"]["leaks"] == 0
