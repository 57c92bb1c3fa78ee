"""Formats found by an independent evaluator's corpus: PGP keys, Chinese and English password
phrasings, per-provider token checks, 400/800 numbers, full-width text, passport vs SSN by the
nearest keyword, image file names that look like emails — and the near-misses around each."""

# ruff: noqa: RUF001 - Chinese text and its full-width characters are the point

from __future__ import annotations

import pytest

from cadre.governance.masking import checks
from cadre.governance.masking.engine import get_engine
from cadre.governance.masking.policy import normalize, partial
from cadre.governance.masking.recognizers import builtin_recognizers, fold_width
from cadre.governance.masking.vault import EphemeralVault
from tests.governance.test_masking_engine import found

PGP_BLOCK = (
    "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n"
    "lQOYBFvy4Zr9moEHZhNX2xGqc/fQ7ZvqsP3CCT/nKEBJMhw5k62rOjlqnFCraP/c0YsHh4\n"
    "7lft6zNHIA33NbEI3p85cRbGIEV45gO+V/RrwlIM5dcJjWpwIqulpwIKak99neEC\n"
    "=0EA6\n"
    "-----END PGP PRIVATE KEY BLOCK-----"
)


POSITIVES = [
    # 1. PGP private key blocks (the pre-check looked for "PRIVATE KEY-----").
    ("SECRET", f"gpg导出的私钥：\n{PGP_BLOCK}\n用完删掉", PGP_BLOCK),
    # 2. 密码是：value, 密码 value, 密码value.
    ("SECRET", "登录密码是：SJI*35$KZ8tElDU", "SJI*35$KZ8tElDU"),
    ("SECRET", "登录密码是：Abc@#1", "Abc@#1"),
    ("SECRET", "账号 root 密码 Passw0rd@88", "Passw0rd@88"),
    ("SECRET", "服务器10.57.177.234，账号admin，密码Spring@2024", "Spring@2024"),
    ("SECRET", "账号 root 密码 AbcXy7 记得改", "AbcXy7"),
    ("SECRET", "账号 zhangsan 密码 *X$tQaA%G%YkdA", "*X$tQaA%G%YkdA"),
    ("SECRET", "QQ邮箱SMTP授权码：wsoldpggifkomdum", "wsoldpggifkomdum"),
    # 3. password … is, a few words between.
    ("SECRET", "The password for the VPN is Qwer@88", "Qwer@88"),
    # The full stop may be the password's last character: it is masked with it (issue 29).
    ("SECRET", "the password to the wifi is QgFBPzdlf6P#.", "QgFBPzdlf6P#."),
    # 4. Hugging Face tokens are hf_ + 34 letters: no digit needed.
    (
        "SECRET",
        "key先贴这里：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",
        "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",
    ),
    ("SECRET", "sk_live_abcDEFghiJKLmnoPQRstuVWX", "sk_live_abcDEFghiJKLmnoPQRstuVWX"),
    # 5. Colon form as credential-like as `=`; short values with symbols.
    ("SECRET", "client_secret: apLxcADpNjEcTEKpJTdjjune", "apLxcADpNjEcTEKpJTdjjune"),
    ("SECRET", "client_secret=apLxcADpNjEcTEKpJTdjjune", "apLxcADpNjEcTEKpJTdjjune"),
    ("SECRET", "passwd: Ms@#1", "Ms@#1"),
    ("SECRET", "mysql -h 10.0.0.5 -u root -p0KaIR5lY6qJ crm", "0KaIR5lY6qJ"),
    (
        "SECRET",
        "unsigned jwt eyJhbGciOiJub25lIn0.eyJzdWIiOiIxIiwiaWF0IjoxNzAwMDAwMDAwfQ.",
        "eyJhbGciOiJub25lIn0.eyJzdWIiOiIxIiwiaWF0IjoxNzAwMDAwMDAwfQ.",
    ),
    # 6. Phones: unseparated and 4-3 grouped 400/800, bare 86, dots, full-width brackets.
    ("CN_PHONE", "有问题打客服热线4009822359，或者找顾洋。", "4009822359"),
    ("CN_PHONE", "Hotline: 8009133076", "8009133076"),
    ("CN_PHONE", "全国服务热线400-6818-978", "400-6818-978"),
    ("CN_PHONE", "热线4006-818-978", "4006-818-978"),
    ("CN_PHONE", "手机8613812345678（带国家码）", "8613812345678"),
    ("CN_PHONE", "手机 155.6436.2518", "155.6436.2518"),
    ("CN_PHONE", "前台（021）62345678", "（021）62345678"),
    # 7. Passport formats with a keyword: France, Germany.
    ("PASSPORT", "Numéro de passeport : 49WX32218", "49WX32218"),
    ("PASSPORT", "Reisepass Nr. CKZGH75XW", "CKZGH75XW"),
    # IBAN in lower case after "IBAN", grouped with dashes.
    ("IBAN", "iban: fr1223466386555vwg669277437", "fr1223466386555vwg669277437"),
    ("IBAN", "IBAN DE13-1170-3805-7252-0364-99", "DE13-1170-3805-7252-0364-99"),
    # 15-digit first-generation ID next to an ID keyword.
    ("CN_ID", "老身份证号310104520702058（15位）", "310104520702058"),
    # Cards grouped with two spaces, or 6 + 12.
    ("PAYMENT_CARD", "card 4115  0691  0280  8622", "4115  0691  0280  8622"),
    ("PAYMENT_CARD", "银行卡622824 120228158888", "622824 120228158888"),
]


@pytest.mark.parametrize(("entity_type", "text", "value"), POSITIVES)
def test_positive_is_found_with_exact_span(entity_type, text, value):
    assert (entity_type, value) in found(text)


NEAR_MISSES = [
    # 密码 followed by words, lengths, algorithms: no password in them.
    ("SECRET", "密码错误，请重试"),
    ("SECRET", "密码重置链接已发送到邮箱"),
    ("SECRET", "请使用密码找回功能"),
    ("SECRET", "密码MD5加密后存储"),
    ("SECRET", "密码 SHA256 加密存储"),
    ("SECRET", "密码长度8-16位"),
    ("SECRET", "密码 admin 不安全"),  # one character class: a word, not a password
    ("SECRET", "密码Abc@2024后面还有中文"),  # glued to more Chinese: not a delimited value
    ("SECRET", "附件 密码.numbers 已上传"),  # a file name
    # English prose after "password … is" and after a colon.
    ("SECRET", "The password for this account is required"),
    ("SECRET", "The password for the VPN is 8-16 characters long"),
    ("SECRET", "the password reset link is https://example.com/reset?id=42"),
    ("SECRET", "password: see the wiki"),
    ("SECRET", "password: JavaScriptDeveloper"),  # a CamelCase word, not a random token
    ("SECRET", "token: 8-16"),
    # Provider prefixes without a random body.
    ("SECRET", "sk-this-is-just-a-long-kebab-name"),
    ("SECRET", "hf_abcdefghijklmnopqrstuvwxyzabcdefgh"),  # one case, no digit
    # mysql: -p alone prompts, -P is the port.
    ("SECRET", "mysql -h db.internal -P3306 -u root -p crm"),
    # An empty JWT signature counts only with "alg": "none".
    ("SECRET", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIiwiaWF0IjoxNzAwMDAwMDAwfQ. next"),
    # Image and script file names are not emails.
    ("EMAIL", "图标 icon-home@2x.png"),
    ("EMAIL", "banner@2x.jpg"),
    ("EMAIL", "<script src=jquery@3.6.0.min.js>"),
    # Numbers introduced as something else.
    ("CN_PHONE", "订单号：13361890954（系统生成）"),
    ("CN_PHONE", "热线4000000000"),  # one digit repeated
    ("US_SSN", "零件编号 382-26-8784 缺货"),
    ("PASSPORT", "港澳通行证M58894410，不是护照"),
    # 15 digits without an ID keyword (an IMEI), lower-case IBAN-like run without "IBAN".
    ("CN_ID", "IMEI 310104520702058"),
    ("IBAN", "ref de89370400440532013000"),
    # A timestamp's fraction and the next number are not a card (6 + 13 digits, Luhn-valid).
    ("PAYMENT_CARD", "1995-06-23T17:06:12.677694 3069424905259 done"),
    # An 18-digit ID-shaped number written 6-12 is an (invalid) ID, not a card.
    ("PAYMENT_CARD", "证件 622824 199001011001"),
]


@pytest.mark.parametrize(("entity_type", "text"), NEAR_MISSES)
def test_near_miss_is_not_detected(entity_type, text):
    # A real email next to the near-miss is the control: only it may be found, as any type.
    assert found(text + "，联系 a.b@example.com") == [("EMAIL", "a.b@example.com")]


def test_mixed_separators_do_not_join_two_numbers_into_an_iban():
    # 20 characters for LT and a mod-97 pass by chance, but a space and dashes mixed.
    assert found("LT52WL10585 355-49-7646") == [("US_SSN", "355-49-7646")]


def test_real_tlds_that_look_like_file_extensions_stay_emails():
    assert found("ops@files.zip") == [("EMAIL", "ops@files.zip")]
    assert found("dev@corp.app") == [("EMAIL", "dev@corp.app")]


def test_nearest_preceding_keyword_decides_passport_or_ssn():
    assert found("SSN 290-12-6062, passport 779080417, email x@example.com") == [
        ("US_SSN", "290-12-6062"),
        ("PASSPORT", "779080417"),
        ("EMAIL", "x@example.com"),
    ]
    assert found("passport 123456789, SSN 521697833") == [
        ("PASSPORT", "123456789"),
        ("US_SSN", "521697833"),
    ]
    # "ssn" inside a longer word is no keyword.
    assert found("Passnummer 123456789") == []
    assert found("SSN 521697833") == [("US_SSN", "521697833")]


WIDE = str.maketrans("0123456789+-.@Xabcdefghijklmnopqrstuvwxyz", "０１２３４５６７８９＋－．＠Ｘ"
                     "ａｂｃｄｅｆｇｈｉｊｋｌｍｎｏｐｑｒｓｔｕｖｗｘｙｚ")  # fmt: skip
FULL_WIDTH = [  # (type, text with {} for the value, value)
    ("CN_PHONE", "电话{}，请回电", "15760153014".translate(WIDE)),
    ("CN_PHONE", "电话：{}", "133-1779-9444".translate(WIDE)),
    ("CN_PHONE", "电话：{}", "133－1779－9444"),  # ASCII digits, full-width dashes
    ("CN_PHONE", "电话：{}", "152\u30008024\u30000883"),  # ideographic spaces
    ("CN_PHONE", "{}", "+86 13812345678".translate(WIDE)),
    ("CN_ID", "身份证号：{}。", "110105197405204277".translate(WIDE)),
    ("CN_ID", "身份证{}", "11010519491231002X".translate(WIDE)),
    ("PAYMENT_CARD", "银行卡号：{}", "6225471717022702530".translate(WIDE)),
    ("EMAIL", "邮箱{}", "li.na@example.com".translate(WIDE)),
]


@pytest.mark.parametrize(("entity_type", "template", "value"), FULL_WIDTH)
def test_full_width_values_are_found_with_their_original_characters(entity_type, template, value):
    assert not value.isascii()
    assert found(template.format(value)) == [(entity_type, value)]


def test_full_width_id_is_never_a_card():
    # Before folding, `\d` matched the full-width digits and the Luhn check read garbage.
    text = "身份证号：４４０３０４１９７２０７０３５８０５"
    assert [d.type for d in get_engine().analyze(text)] == ["CN_ID"]


def test_fold_width_keeps_offsets_and_leaves_chinese_punctuation():
    text = "电话：１３８－１２３４\u3000５６７８（手机），ＯＫ"
    folded = fold_width(text)
    assert len(folded) == len(text)
    assert folded == "电话：138-1234 5678（手机），OK"
    assert fold_width("plain ascii") == "plain ascii"
    assert fold_width("中文，没有全角数字。") == "中文，没有全角数字。"


def test_presidio_interface_analyze_folds_too():
    recognizer = next(r for r in builtin_recognizers() if r.name == "cn_mobile")
    results = recognizer.analyze("电话１３８１２３４５６７８", ["CN_PHONE"])
    assert [(r.start, r.end) for r in results] == [(2, 13)]


def test_checksums_read_any_unicode_digit():
    assert checks.luhn_valid("４１１１１１１１１１１１１１１１")
    assert not checks.luhn_valid("４１１１１１１１１１１１１１１２")
    assert checks.payment_card_valid("４１１１ １１１１ １１１１ １１１１")
    assert checks.cn_id_valid("１１０１０５１９４９１２３１００２Ｘ")
    assert checks.digits_of("１３８-１２") == "13812"
    assert checks.cn_id15_valid("310104520702058")
    assert not checks.cn_id15_valid("310104521302058")  # month 13
    assert not checks.cn_id15_valid("990104520702058")  # no province 99


def test_full_width_and_ascii_forms_share_a_pseudonym():
    vault = EphemeralVault()
    text = "电话１３８１２３４５６７８，又写成13812345678"
    masked = get_engine().mask(text, conversation=vault).text
    assert masked == "电话<PHONE_1>，又写成<PHONE_1>"
    assert normalize("CN_ID", "１１０１０５１９４９１２３１００２ｘ") == "11010519491231002X"
    assert partial("CN_PHONE", "１３８１２３４５６７８") == "１３８****５６７８"
