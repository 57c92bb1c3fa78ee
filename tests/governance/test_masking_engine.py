"""The masking engine: what each recognizer finds and refuses, spans at CJK boundaries, modes,
overlap resolution, and precision/recall on the committed corpora."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from cadre.errors import InvalidInput
from cadre.governance.masking import checks
from cadre.governance.masking.engine import MaskingEngine, get_engine
from cadre.governance.masking.policy import DEFAULT_POLICY, MaskingPolicy, partial
from cadre.governance.masking.recognizers import Detection, resolve_overlaps
from cadre.governance.masking.vault import EphemeralVault

ROOT = Path(__file__).resolve().parents[2]


def found(text: str) -> list[tuple[str, str]]:
    return [(d.type, text[d.start : d.end]) for d in get_engine().analyze(text)]


POSITIVES = [
    ("SECRET", "my password is Hunter2!", "Hunter2!"),
    ("SECRET", "pass=Abc12345&user=x", "Abc12345"),
    ("SECRET", "Server=sql01;User Id=sa;Password=Sa!2024crm;", "Sa!2024crm"),
    (
        "SECRET",
        "git clone https://deploy:Gh0st9@git.acme.cn/app.git",
        "https://deploy:Gh0st9@git.acme.cn/app.git",
    ),
    ("PAYMENT_CARD", "Diners 3056 9309 0259 04", "3056 9309 0259 04"),
    ("PAYMENT_CARD", "Maestro 502088308429", "502088308429"),
    ("CN_PHONE", "手机13812345678", "13812345678"),
    ("CN_PHONE", "call +86 138 1234 5678 now", "+86 138 1234 5678"),
    ("CN_PHONE", "座机010-12345678转8001", "010-12345678"),
    ("CN_PHONE", "深圳0755-8888 6666", "0755-8888 6666"),
    ("CN_PHONE", "前台(021)62345678", "(021)62345678"),
    ("CN_PHONE", "热线400-820-8820", "400-820-8820"),
    ("CN_ID", "身份证11010519491231002X", "11010519491231002X"),
    ("CN_ID", "ID 370203195907210185.", "370203195907210185"),
    ("PAYMENT_CARD", "卡号6222023962459571178请转账", "6222023962459571178"),
    ("PAYMENT_CARD", "visa 4111 1111 1111 1111 exp", "4111 1111 1111 1111"),
    ("PAYMENT_CARD", "银联6228-4800-1234-5671", "6228-4800-1234-5671"),
    ("PAYMENT_CARD", "Amex 3782 822463 10005", "3782 822463 10005"),
    ("EMAIL", "邮箱zhang.san@example.com，谢谢", "zhang.san@example.com"),
    ("EMAIL", "cc <j.doe+vendors@initech.io>", "j.doe+vendors@initech.io"),
    ("IP_ADDRESS", "服务器10.0.0.12宕机", "10.0.0.12"),
    ("IP_ADDRESS", "ssh root@172.16.8.21 -p 22", "172.16.8.21"),
    ("IP_ADDRESS", "地址2001:db8:85a3::8a2e:370:7334已封禁", "2001:db8:85a3::8a2e:370:7334"),
    ("PASSPORT", "护照号E12345678", "E12345678"),
    ("PASSPORT", "护照EA1234567请核对", "EA1234567"),
    ("PASSPORT", "passport number 123456789, expires 2029", "123456789"),
    ("US_SSN", "SSN 521-69-7833 on file", "521-69-7833"),
    ("US_SSN", "social security number 521 69 7833", "521 69 7833"),
    ("IBAN", "IBAN GB82 WEST 1234 5698 7654 32 EUR", "GB82 WEST 1234 5698 7654 32"),
    ("IBAN", "账户DE89370400440532013000", "DE89370400440532013000"),
    (
        "SECRET",
        "key sk-proj-YcMMDktXP_tKsf2rcDkdfrUnW5gcF-Ha6ili8G end",
        "sk-proj-YcMMDktXP_tKsf2rcDkdfrUnW5gcF-Ha6ili8G",
    ),
    ("SECRET", "AKIAIOSFODNN7EXAMPLE leaked", "AKIAIOSFODNN7EXAMPLE"),
    (
        "SECRET",
        "token ghp_Xh5Jmtf7EbsDe0G9Cryn687neLfjVHq8xiM0",
        "ghp_Xh5Jmtf7EbsDe0G9Cryn687neLfjVHq8xiM0",
    ),
    (
        "SECRET",
        "xoxb-515055613044-5166915640410-1QsO7jprBGum",
        "xoxb-515055613044-5166915640410-1QsO7jprBGum",
    ),
    (
        "SECRET",
        "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY",
        "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY",
    ),
    ("SECRET", "sk_live_r4hTxoF54Fzbka8FRCztUjAw", "sk_live_r4hTxoF54Fzbka8FRCztUjAw"),
    ("SECRET", "password=S3cr3t!", "S3cr3t!"),
    ("SECRET", "passwd: hunter22x", "hunter22x"),
    ("SECRET", '{"secret": "abc123xyz"}', "abc123xyz"),
    ("SECRET", "数据库密码：Abc@12345，请勿外传", "Abc@12345"),
    (
        "SECRET",
        "DATABASE_URL=postgres://app:pw123@db.internal:5432/app.",
        "postgres://app:pw123@db.internal:5432/app",
    ),
    ("SECRET", "redis://:Zr7pK2wQx9@10.0.3.15:6379/2", "redis://:Zr7pK2wQx9@10.0.3.15:6379/2"),
    (
        "SECRET",
        "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N",
    ),
    (
        "SECRET",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM\n"
        "-----END RSA PRIVATE KEY-----",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM\n"
        "-----END RSA PRIVATE KEY-----",
    ),
]


@pytest.mark.parametrize(("entity_type", "text", "value"), POSITIVES)
def test_positive_is_found_with_exact_span(entity_type, text, value):
    assert (entity_type, value) in found(text)


NEAR_MISSES = [
    ("PAYMENT_CARD", "卡号4111 1111 1111 1112校验失败"),  # Luhn fails
    ("PAYMENT_CARD", "订单号2024061500012345已发货"),  # no issuer uses this prefix
    ("CN_ID", "身份证110105194912310021格式不对"),  # wrong check digit
    ("CN_ID", "身份证110105202302300029"),  # 30 February
    ("CN_ID", "身份证110105209905170023"),  # born in the future
    ("CN_PHONE", "编号12345678901"),  # no mobile prefix 12x
    ("CN_PHONE", "时间戳1718438400"),
    ("CN_PHONE", "Card 6258 0720 4090 1236 was declined"),  # a slice of a card, not a landline
    ("IP_ADDRESS", "版本号 1.2.3.4 已发布"),
    ("IP_ADDRESS", "upgrade to version 10.2.0.1"),
    ("IP_ADDRESS", "MAC 3c:22:fb:8e:11:0a at 10:30:45"),
    ("IP_ADDRESS", "OID 1.3.6.1.4.1"),
    ("PASSPORT", "工号123456789"),  # 9 digits with no passport keyword
    ("US_SSN", "SSN 000-12-3456"),
    ("US_SSN", "SSN 666-12-3456"),
    ("IBAN", "IBAN DE89 3704 0044 0532 0130 01"),  # mod-97 fails
    ("SECRET", "commit 9f2c3a1b7d4e5f60718293a4b5c6d7e8f9012345"),
    ("SECRET", "request_id=7d3f1c2e-8a9b-4c5d-9e0f-112233445566"),
    ("SECRET", "password=<your_password>"),
    ("SECRET", "api_key=${OPENAI_API_KEY}"),
    ("SECRET", "Forgot my password: what should I do?"),
    ("SECRET", "max_tokens=4096"),
    ("SECRET", "pk_live_r4hTxoF54Fzbka8FRCztUjAw is publishable"),
    ("SECRET", "password = os.environ['DB_PASSWORD']"),
    ("EMAIL", "user@localhost has no domain"),
    ("PAYMENT_CARD", "条码 4907770350686"),  # an EAN-13 barcode that also passes Luhn
    ("SECRET", "the password is required"),
    ("SECRET", "bypass=true"),
    ("SECRET", "see https://example.com:8080/a@b"),
]


@pytest.mark.parametrize(("entity_type", "text"), NEAR_MISSES)
def test_near_miss_is_not_detected(entity_type, text):
    # A real email next to the near-miss is the control: only it may be found, as any type.
    assert found(text + "，联系 a.b@example.com") == [("EMAIL", "a.b@example.com")]


def test_spans_glued_to_chinese_exclude_the_chinese_text():
    text = "手机13812345678邮箱zhang.san@example.com身份证11010519491231002X地址10.1.2.3结束"
    results = get_engine().analyze(text)
    assert [(d.type, text[d.start : d.end]) for d in results] == [
        ("CN_PHONE", "13812345678"),
        ("EMAIL", "zhang.san@example.com"),
        ("CN_ID", "11010519491231002X"),
        ("IP_ADDRESS", "10.1.2.3"),
    ]
    for detection in results:
        assert all(ord(ch) < 0x3000 for ch in text[detection.start : detection.end])


def test_digits_glued_to_ascii_are_not_split_out():
    # An 11-digit run inside a longer token is not a phone (no ASCII boundary).
    assert found("ref A13812345678B") == []
    assert found("13812345678901") == []


def test_checksums():
    assert checks.cn_id_valid("11010519491231002X")
    assert not checks.cn_id_valid("110105194912310021")
    assert checks.luhn_valid("4111111111111111")
    assert not checks.luhn_valid("4111111111111112")
    assert checks.iban_valid("GB82WEST12345698765432")
    assert not checks.iban_valid("GB83WEST12345698765432")
    assert checks.us_ssn_valid("521-69-7833")
    assert not checks.us_ssn_valid("921-69-7833")


def test_partial_mask_formats():
    assert partial("CN_PHONE", "13812345678") == "138****5678"
    assert partial("CN_PHONE", "+86 138 1234 5678") == "+86 138 **** 5678"
    assert partial("CN_PHONE", "010-12345678") == "010-****5678"
    assert partial("EMAIL", "zhang.san@example.com") == "z***@example.com"
    assert partial("PAYMENT_CARD", "6222 0239 6245 9571") == "6222 **** **** 9571"
    assert partial("PAYMENT_CARD", "4111111111111111") == "4111********1111"
    assert partial("CN_ID", "11010519491231002X") == "110105********002X"
    assert partial("US_SSN", "521-69-7833") == "***-**-7833"
    assert partial("IP_ADDRESS", "10.12.3.45") == "10.12.*.*"


def test_modes_per_type_and_secrets_always_redacted():
    policy = MaskingPolicy(
        modes={"CN_PHONE": "partial", "EMAIL": "redact", "SECRET": "pseudonymize"},
        default="pseudonymize",
    )
    text = "电话13812345678 邮箱a.b@example.com 身份证11010519491231002X password=S3cr3t!"
    result = get_engine().mask(text, policy=policy)
    assert result.text == "电话138****5678 邮箱[EMAIL] 身份证<ID_1> password=[SECRET]"
    assert result.mapping_used == {"<ID_1>": "11010519491231002X"}


def test_default_policy_pseudonymizes_personal_data_and_redacts_secrets():
    text = "a@example.com b@example.com a@example.com AKIAIOSFODNN7EXAMPLE"
    result = get_engine().mask(text, policy=DEFAULT_POLICY)
    assert result.text == "<EMAIL_1> <EMAIL_2> <EMAIL_1> [SECRET]"


def test_ephemeral_vault_reidentifies_and_leaves_unknown_placeholders():
    vault = EphemeralVault()
    masked = get_engine().mask("电话13812345678", conversation=vault).text
    assert masked == "电话<PHONE_1>"
    assert vault.reidentify("已拨打<PHONE_1>，<PHONE_9>未知") == "已拨打13812345678，<PHONE_9>未知"


def test_unknown_mode_is_invalid_input():
    with pytest.raises(InvalidInput):
        MaskingPolicy(modes={"EMAIL": "shred"})


def test_overlaps_resolve_by_score_then_length_then_priority_in_any_order():
    a = Detection(0, 10, "EMAIL", 0.9, "x")
    b = Detection(5, 30, "SECRET", 1.0, "y")
    c = Detection(0, 4, "CN_PHONE", 0.85, "z")
    d = Detection(0, 4, "CN_ID", 0.85, "w")
    from cadre.governance.masking.recognizers import TYPE_PRIORITY

    for order in ([a, b, c, d], [d, c, b, a], [b, d, a, c]):
        assert resolve_overlaps(order, TYPE_PRIORITY) == [d, b]


def test_connection_string_wins_over_the_email_like_part_inside_it():
    assert found("postgres://app:pw123@db.example.com/app") == [
        ("SECRET", "postgres://app:pw123@db.example.com/app")
    ]


def test_entities_filter_limits_types():
    text = "13812345678 a@example.com"
    assert [d.type for d in get_engine().analyze(text, entities=["EMAIL"])] == ["EMAIL"]


def test_recognizers_work_inside_a_presidio_analyzer_engine():
    analyzer = MaskingEngine().presidio_analyzer()
    results = analyzer.analyze("手机13812345678，卡号4111111111111112", language="en")
    assert [(r.entity_type, r.start, r.end) for r in results] == [("CN_PHONE", 2, 13)]


def test_presidio_default_registry_still_loads_its_own_recognizers():
    from cadre.governance.masking.presidio import presidio_default_analyzer

    get_engine()  # our PatternRecognizer subclasses are loaded
    for _ in range(3):  # Presidio looks classes up by name in a set: order varies
        analyzer = presidio_default_analyzer()
        names = {r.__class__.__module__ for r in analyzer.registry.recognizers}
        assert all(name.startswith("presidio_analyzer") for name in names)


def _load_bench():
    spec = importlib.util.spec_from_file_location("bench_masking", ROOT / "bench" / "masking.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_masking"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("corpus", "every_type"),
    [
        ("masking_corpus.jsonl", True),
        ("masking_handwritten.jsonl", True),
        ("masking_faker.jsonl", False),  # independent values from Faker; no secrets in it
    ],
)
def test_corpus_precision_and_recall_meet_targets(corpus, every_type):
    result = _load_bench().evaluate(ROOT / "bench" / "data" / corpus)
    assert result["ALL"]["tp"] > 50
    for entity_type in (*get_engine().entity_types, "ALL"):
        row = result[entity_type]
        if every_type:
            assert row["tp"] > 0, entity_type
        assert row["precision"] >= 0.98, (entity_type, row)
        assert row["recall"] >= 0.99, (entity_type, row)


def test_bench_matching_rule_uses_iou():
    bench = _load_bench()
    gold = [{"start": 0, "end": 10, "type": "EMAIL"}]
    tp, fp, fn = bench.match(gold, [{"start": 0, "end": 6, "type": "EMAIL"}])  # IoU 0.6
    assert (tp["EMAIL"], fp["EMAIL"], fn["EMAIL"]) == (1, 0, 0)
    tp, fp, fn = bench.match(gold, [{"start": 0, "end": 4, "type": "EMAIL"}])  # IoU 0.4
    assert (tp["EMAIL"], fp["EMAIL"], fn["EMAIL"]) == (0, 1, 1)


def test_bench_prints_the_exact_format(capsys):
    import re

    _load_bench().main(["--data", str(ROOT / "bench" / "data" / "masking_handwritten.jsonl")])
    lines = capsys.readouterr().out.splitlines()
    types = [*get_engine().entity_types, "ALL"]
    assert len(lines) == len(types) + 1
    for entity_type, line in zip(types, lines, strict=False):
        assert re.fullmatch(rf"{entity_type} precision=[01]\.\d{{3}} recall=[01]\.\d{{3}}", line)
    assert re.fullmatch(r"latency p50_ms=\d+\.\d{3} p95_ms=\d+\.\d{3}", lines[-1])
