"""Values glued to their neighbours (issue 15): Latin letters or CJK on either side, compressed
IPv6 after a label, secrets that stop at CJK text or at the next value, two secrets in a row,
labelled credentials (value only) — and the near-misses that must stay unmasked."""

from __future__ import annotations

import pytest

from cadre.governance.masking.engine import get_engine
from cadre.governance.masking.recognizers import glued_ok
from tests.governance.test_masking_engine import found

CARD = "6222282010276161249"  # UnionPay, Luhn-valid
ID = "320583198007072330"  # resident ID with a valid check character

GLUED = [
    # Values glued to Latin letters on the left and/or right.
    ("服务器IP10.1.2.3宕机了", [("IP_ADDRESS", "10.1.2.3")]),
    ("ping192.168.10.24不通", [("IP_ADDRESS", "192.168.10.24")]),
    ("host172.16.0.5:8080 起不来", [("IP_ADDRESS", "172.16.0.5")]),
    ("收款账户IBAN：DE86900645899431662475Ticket", [("IBAN", "DE86900645899431662475")]),
    ("账户IBANDE04509840956422906005SSN", [("IBAN", "DE04509840956422906005")]),
    ("证件号码：320583198007072330SSN那栏", [("CN_ID", ID)]),
    (f"ID{ID}的客户", [("CN_ID", ID)]),
    ("手机021-85209136Supplier那边", [("CN_PHONE", "021-85209136")]),
    ("客户电话Tel13811112222，下午回电", [("CN_PHONE", "13811112222")]),
    ("手机13500002222Team群里有", [("CN_PHONE", "13500002222")]),
    ("Mobile+86 17515626834已经确认", [("CN_PHONE", "+86 17515626834")]),
    ("护照：G12345678Ticket号晚点发", [("PASSPORT", "G12345678")]),
    ("信用卡号：5264717641845788Visa不行", [("PAYMENT_CARD", "5264717641845788")]),
    (f"银行卡{CARD}OK", [("PAYMENT_CARD", CARD)]),
    ("SSN123-45-6701是美国同事的", [("US_SSN", "123-45-6701")]),
    # The glued word is followed by the next value: the word still ends there.
    ("转到DE64258778569374656936ASAPID510107195607190713。",
     [("IBAN", "DE64258778569374656936"), ("CN_ID", "510107195607190713")]),
    # An IBAN that is not one gives its characters back (`ID11…` swallowed the real IBAN).
    (f"ID{ID[:-1]}7 IBANNL54 XMTO 9731 2885 02OK", [("IBAN", "NL54 XMTO 9731 2885 02")]),
    # Two IBANs glued together through a word.
    ("ES7118107752474609447810TeamIBANDE05364177826158056080，尽快处理",
     [("IBAN", "ES7118107752474609447810"), ("IBAN", "DE05364177826158056080")]),
    # Compressed IPv6 after IP, a label's colon, CJK or a space.
    ("新机器IPv6是2001:db8:5eff:7cef:a1e1::1，老的下线了",
     [("IP_ADDRESS", "2001:db8:5eff:7cef:a1e1::1")]),
    ("来源IPfe80::a5ba:6e:3f6f:e277打不通", [("IP_ADDRESS", "fe80::a5ba:6e:3f6f:e277")]),
    ("IP2001:db8::1Ticket", [("IP_ADDRESS", "2001:db8::1")]),
    ("ip:2408:6c08:a406:38d4::105。", [("IP_ADDRESS", "2408:6c08:a406:38d4::105")]),
    ("ip:::ffff:101.35.8.9超时", [("IP_ADDRESS", "::ffff:101.35.8.9")]),
    ("host 2408:8207:2471::1 测试通过", [("IP_ADDRESS", "2408:8207:2471::1")]),
    # A version word after an address that introduces the next version string.
    ("来源IP192.213.190.113 release 2.1.0.3；", [("IP_ADDRESS", "192.213.190.113")]),
    ("访问101.75.82.193 版本7.10.12.1", [("IP_ADDRESS", "101.75.82.193")]),
]  # fmt: skip


@pytest.mark.parametrize(("text", "expected"), GLUED)
def test_glued_values_are_found_with_exact_spans(text, expected):
    assert found(text) == expected


SECRETS = [
    # A URI with credentials stops at CJK text; the card after it is its own value.
    (f"配置里写的是postgres://app:Pw8xQz2m@db:5432/prod银行卡{CARD}是报销用的",
     [("SECRET", "postgres://app:Pw8xQz2m@db:5432/prod"), ("PAYMENT_CARD", CARD)]),
    ("DSN: mongodb://app:9w7OTIEwAp5N9@10.2.3.4:27017/orders银行卡4238-0427-8412-3943的那个",
     [("SECRET", "mongodb://app:9w7OTIEwAp5N9@10.2.3.4:27017/orders"),
      ("PAYMENT_CARD", "4238-0427-8412-3943")]),
    # Labelled credentials: the value only, up to CJK text or the next value.
    ("password=Qw3rty!2026明天会改", [("SECRET", "Qw3rty!2026")]),
    ("api_key=ByTPGVlN4CC0ICx1ndf卡号5109305122339080",
     [("SECRET", "ByTPGVlN4CC0ICx1ndf"), ("PAYMENT_CARD", "5109305122339080")]),
    ("Token: QVpincGvZpzDTq2Tlhcfcs手机14254550132吗？",
     [("SECRET", "QVpincGvZpzDTq2Tlhcfcs"), ("CN_PHONE", "14254550132")]),
    ("token：a8F3kLm2Qz9Xw1Rt", [("SECRET", "a8F3kLm2Qz9Xw1Rt")]),  # full-width colon
    ("Thanks--password W8lBj9jbp8!手机13977631234",
     [("SECRET", "W8lBj9jbp8!"), ("CN_PHONE", "13977631234")]),
    # Two secrets in a row, split.
    ("两个key：sk-proj-BNm5ZliEV5pl1RqkPHRZG632IeppHoRTAzHJepqu glpat-vFmgYOb8cBdum7dQslr5都作废",
     [("SECRET", "sk-proj-BNm5ZliEV5pl1RqkPHRZG632IeppHoRTAzHJepqu"),
      ("SECRET", "glpat-vFmgYOb8cBdum7dQslr5")]),
    ("token：ghp_nQOgaB184sl1i0XSslTAgt1lWAyOger8Htq2和AKIA9SSH51ECWKUVUCYR",
     [("SECRET", "ghp_nQOgaB184sl1i0XSslTAgt1lWAyOger8Htq2"), ("SECRET", "AKIA9SSH51ECWKUVUCYR")]),
    # Distinctive provider prefixes glued to a word.
    ("plsghp_nQOgaB184sl1i0XSslTAgt1lWAyOger8Htq2",
     [("SECRET", "ghp_nQOgaB184sl1i0XSslTAgt1lWAyOger8Htq2")]),
    ("SSNAKIA9SSH51ECWKUVUCYR ", [("SECRET", "AKIA9SSH51ECWKUVUCYR")]),
]  # fmt: skip


@pytest.mark.parametrize(("text", "expected"), SECRETS)
def test_secrets_stop_at_cjk_and_at_the_next_value(text, expected):
    assert found(text) == expected


def test_a_masked_labelled_credential_keeps_the_label_and_hides_the_value():
    masked = get_engine().mask("password=Qw3rty!2026明天会改，token：a8F3kLm2Qz9Xw1Rt").text
    assert masked == "password=[SECRET]明天会改，token：[SECRET]"


NEAR_MISSES = [
    "升级到v1.2.6.9之后就好了",
    "固件1.2.6.9版本有bug",
    "固件升级到 7.4.12.2 版本",
    "固件升级到 7.6.6.7 版本 2026-01-05 发布",
    "release 4.10.2.1 已发布",
    "SNbuild 11.2.9.11，",
    "Teamv2.3.9.9 ",
    "快递单号SF040891304371到了吗",
    "快递单号SF507246596435；",
    "订单620500447781607125。",
    "订单号5125100635243212。",
    "工单#INC0012345处理完了",
    "发票号码04403190，金额¥12,345.67",
    "2026-11-30 14:23:05 之后的日志都丢了",
    "时间戳1764512345123对不上",
    "icon@2x.png和banner@3x.png替换一下",
    "合计13812.50元",
    "sha256 9fa13812345678e9ab0c4d2f",
    "std::vector 和 Base::Add",
    "密码错误5次会锁定",
    "password: 请找IT重置",
    "task-proj-onboarding-2024-checklist",
]


@pytest.mark.parametrize("text", NEAR_MISSES)
def test_near_misses_stay_unmasked(text):
    assert found(text) == []


@pytest.mark.parametrize(
    ("text", "start", "end", "ok"),
    [
        ("IP10.1.2.3", 2, 10, True),
        ("13812345678Supplier", 0, 11, True),
        ("9fa13812345678", 3, 14, False),  # hex letters between digits
        ("13812345678e9", 0, 11, False),
        ("ASAPID510107", 6, 12, True),
    ],
)
def test_glued_ok_accepts_words_and_refuses_hex(text, start, end, ok):
    assert glued_ok(text, start, end) is ok
