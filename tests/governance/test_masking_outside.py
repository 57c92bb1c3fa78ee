"""Classes found by an outside evaluator's corpus (bench/data/make_outside_corpus.py, written
from docs/masking.md only): two-word key names, a trailing check letter on a passport, a
keyword that already introduced its own value, digits inside an IBAN that fails its checksum,
a resident ID failing its check read as a card, `mysql -p` values running into full-width
punctuation, `$`-prefixed passwords, `IP::1`, eight-digit local numbers after 010/02x, and a
percentage after "版本" — each with exact spans and the near-misses around it."""

# ruff: noqa: RUF001 - Chinese text and its full-width characters are the point

from __future__ import annotations

import pytest

from cadre.governance.masking.engine import get_engine


def spans(text: str) -> list[tuple[str, int, int, str]]:
    return [(d.type, d.start, d.end, text[d.start : d.end]) for d in get_engine().analyze(text)]


def exactly(text: str, *expected: tuple[str, str]) -> None:
    """The detections are exactly these (type, value), each at the value's first offset."""
    wanted = []
    for kind, value in expected:
        start = text.index(value)
        wanted.append((kind, start, start + len(value), value))
    assert spans(text) == sorted(wanted, key=lambda item: item[1])


POSITIVES = [
    # Key names written as two words ("api key", "secret key", "access key", "app key").
    ("api key: Tiger*503x，谢谢！", [("SECRET", "Tiger*503x")]),
    ("FYI api key: Tiger!84； and 2026-07-03 11:01:32", [("SECRET", "Tiger!84")]),
    ("API Key = U2ExYajQdFOUp", [("SECRET", "U2ExYajQdFOUp")]),
    ("secret key: bQQw*pR#HZo8qc thanks", [("SECRET", "bQQw*pR#HZo8qc")]),
    ("access key id: Xh80*33HEGgTFSC", [("SECRET", "Xh80*33HEGgTFSC")]),
    ("微信的 app key：Dragon+5804x，别外传", [("SECRET", "Dragon+5804x")]),
    # Letter, seven digits, letter: the check letter belongs to the number.
    ("Passport:「N0197942G」、谢谢", [("PASSPORT", "N0197942G")]),
    ("护照号码:W9191597O", [("PASSPORT", "W9191597O")]),
    ("Passport No. I4342033B 🙏", [("PASSPORT", "I4342033B")]),
    # ... but a glued word after letter + seven digits is not the check letter.
    ("passport E1234567Ticket", [("PASSPORT", "E1234567")]),
    # A keyword introduces a list of values.
    ("SSN: 123456789, 234567891", [("US_SSN", "123456789"), ("US_SSN", "234567891")]),
    ("passport 779080417、880191528", [("PASSPORT", "779080417"), ("PASSPORT", "880191528")]),
    (
        "美国社保号 730 11 9557 和 731 12 9558",
        [("US_SSN", "730 11 9557"), ("US_SSN", "731 12 9558")],
    ),
    # mysql -p: the value ends at full-width punctuation, the e-mail after it is an e-mail.
    (
        "mysql -u root -pEk!cVG$77tQ6Cuo，mike.chen@partner.co.uk 谢谢",
        [("SECRET", "Ek!cVG$77tQ6Cuo"), ("EMAIL", "mike.chen@partner.co.uk")],
    ),
    # A password starting with `$` is no variable reference when it is mixed-case random.
    ('"password": "$imuM6h2UewGI" }', [("SECRET", "$imuM6h2UewGI")]),
    ("密码是$jAVicm_tcE5WyL btw", [("SECRET", "$jAVicm_tcE5WyL")]),
    # IPv6 starting with `::` right after the label IP, and after `ip:`.
    ("来源IP::1，请核对", [("IP_ADDRESS", "::1")]),
    ("ip:::1【急】", [("IP_ADDRESS", "::1")]),
    # Landlines: 010/02x with eight digits, three-digit area codes with seven or eight.
    ("座机010-62345678", [("CN_PHONE", "010-62345678")]),
    ("电话0571-8765432转8021", [("CN_PHONE", "0571-8765432")]),
    ("tel:（025）83325497", [("CN_PHONE", "（025）83325497")]),
    # A valid IBAN still wins over the digits in it; a valid ID with X stays an ID.
    (
        "IBAN FR76 3000 6000 0112 3456 7890 189 谢谢",
        [("IBAN", "FR76 3000 6000 0112 3456 7890 189")],
    ),
    ("身份证11010519491231002X宕机了", [("CN_ID", "11010519491231002X")]),
    # A version word followed by a percentage still makes the dotted quad a version; a real
    # address before "release 2.3.4" stays an address.
    ("10.1.2.3 release 2.3.4 已发布", [("IP_ADDRESS", "10.1.2.3")]),
]


@pytest.mark.parametrize(("text", "expected"), POSITIVES)
def test_outside_positives_have_exact_spans(text, expected):
    exactly(text, *expected)


# Lines whose near-misses must stay unmasked, with the values that are real (if any).
NEAR_MISSES = [
    # A keyword that introduced its own value does not make a later number one.
    ("hi，Passport:「EF6226130」\t共749268682 pcs，谢谢！", [("PASSPORT", "EF6226130")]),
    (
        "急！total 249570180件 and social security number 119694519 谢谢",
        [("US_SSN", "119694519")],
    ),
    ("@王经理 QQ群 734204995。SSN:821-38-0302宕机了！", [("US_SSN", "821-38-0302")]),
    ("护照E34382504 pls check，QQ群 030205157", [("PASSPORT", "E34382504")]),
    ("美国社保号 730 11 9557；QQ群 776863770、门牌167室", [("US_SSN", "730 11 9557")]),
    # Digits inside an IBAN failing its checksum: no phone, no card.
    ("pls note: IBAN FR45 0947 5035 2674 9511 2576 647 校验不过", []),
    ("IBAN NL16SNSB0236373445 校验不过", []),
    ("IBAN DE82 0715 0299 0723 4927 84 校验不过", []),
    ("急！IBAN GB31BARC63910959085352 校验不过～", []),
    # 17 digits and X failing the ID check: neither an ID nor a card.
    ("身份证42010619930520165X（这个号不对） pls check。", []),
    # Ten digits after 0 + a two-digit area code: no Chinese number.
    ("@王经理 内核 101.0.5804.32\tQQ 0253325497！", []),
    ("工号0213325497", []),
    # Variables after a password key.
    ("password=$DB_PASSWORD", []),
    ("密码是$db_pass", []),
    # C++ scopes; a label with no address after it.
    ("Foo::bar() 和 std::vector<int>", []),
    ("IP:: 不是地址", []),
    # A percentage after 版本 is no version of its own: the dotted quad stays a version.
    ("@张伟 固件升级到 7.6.6.7 版本 41.32%；辛苦了", []),
]


@pytest.mark.parametrize(("text", "expected"), NEAR_MISSES)
def test_outside_near_misses_stay_unmasked(text, expected):
    exactly(text, *expected)


def test_keyword_before_still_counts_without_a_value_between():
    exactly("social security number 655725588 pls check", ("US_SSN", "655725588"))
    exactly("护照号码：（E47120386），麻烦尽快", ("PASSPORT", "E47120386"))
    exactly("passport number is 123456789", ("PASSPORT", "123456789"))


def test_keyword_after_counts_when_it_has_no_value_of_its_own():
    exactly("123456789 is my SSN", ("US_SSN", "123456789"))
    exactly("Ticket: 779080417 (passport)", ("PASSPORT", "779080417"))
