"""Built-in recognizers: compiled regex recognizers that plug into Presidio on demand.

Cadre's engine calls each recognizer's `scan()` directly: patterns are compiled once with the
standard library `re`, validators see the match and its surroundings, and no result or
explanation objects are built. The same recognizers keep Presidio's recognizer interface
(`supported_entities`, `validate_result`, `analyze`) and become real `PatternRecognizer`s with
`cadre.governance.masking.presidio.as_presidio()` — lazily, because importing
`presidio_analyzer` pulls in `transformers` and costs seconds per process.
docs/masking.md has the measurements behind this design.

Boundaries are lookarounds on ASCII letters and digits, never `\\b`: CJK characters are `\\w`,
so `\\b` would miss `手机13812345678`; these patterns find the number and leave the Chinese out.

Full-width characters (`１３８１２３４５６７８`, `133－1779－9444`, `152　8024　0883`) are folded to
ASCII before scanning (`fold_width`): each is one code point and so is its ASCII twin, so the
offsets found on the folded text are the offsets in the original, and the span keeps the
original characters.

Modules: `base` (Detection, CadreRecognizer, overlap resolution), `text` (folding and boundary
helpers), one module per family — `phones`, `documents` (resident IDs, passports, SSNs),
`network` (email, IP), `finance` (cards, IBANs), `credentials` (secrets) — and here the list of
built-in recognizers, in the order the engine runs them.
"""

# ruff: noqa: RUF002 - Chinese text and its full-width punctuation are the point

from __future__ import annotations

import re

from cadre.governance.masking.recognizers.base import (
    CUSTOM_PRIORITY,
    ENTITY_TYPES,
    TYPE_PRIORITY,
    CadreRecognizer,
    Detection,
    TrailingPunctuationRecognizer,
    Validator,
    resolve_overlaps,
)
from cadre.governance.masking.recognizers.credentials import (
    AWS_SECRET,
    BEARER,
    CHINESE_KEY_VALUE,
    CLI_FLAG,
    CONNECTION_STRING,
    JWT,
    KEY_VALUE,
    MYSQL_PASSWORD,
    PASSWORD_IS,
    PEM,
    PROVIDER_KEYS,
    ProviderKeyRecognizer,
    SecretValueRecognizer,
    is_bearer,
    is_chinese_secret_value,
    is_jwt,
    is_mixed_key,
    is_mysql_password,
    is_provider_key,
    is_secret_value,
)
from cadre.governance.masking.recognizers.documents import (
    CN_ID,
    CN_ID15,
    CN_PASSPORT,
    GENERIC_PASSPORT,
    OTHER_DOCUMENT_WORDS,
    PASSPORT_WORDS,
    SSN,
    SSN_CONTEXT,
    SSN_NEGATIVE_BEFORE,
    SSN_WORDS,
    is_cn_id,
    is_cn_id15,
    is_cn_passport,
    is_ssn,
)
from cadre.governance.masking.recognizers.finance import CARD, IBAN, CadreIbanRecognizer, is_card
from cadre.governance.masking.recognizers.network import (
    EMAIL,
    IPV4,
    IPV6,
    IPV6_HINT,
    VERSION_BEFORE,
    is_email,
    is_ipv4,
    is_ipv6,
)
from cadre.governance.masking.recognizers.phones import (
    CN_LANDLINE,
    CN_MOBILE,
    CN_SERVICE_NUMBER,
    PHONE_NEGATIVE_BEFORE,
    is_phone,
)
from cadre.governance.masking.recognizers.text import fold_width, glued_ok

__all__ = [
    "CUSTOM_PRIORITY",
    "ENTITY_TYPES",
    "TYPE_PRIORITY",
    "CadreIbanRecognizer",
    "CadreRecognizer",
    "Detection",
    "ProviderKeyRecognizer",
    "SecretValueRecognizer",
    "TrailingPunctuationRecognizer",
    "Validator",
    "builtin_recognizers",
    "fold_width",
    "glued_ok",
    "resolve_overlaps",
]


def builtin_recognizers() -> list[CadreRecognizer]:
    """Fresh instances of every built-in recognizer (the engine builds them once)."""
    return [
        CadreRecognizer(name="cn_mobile", entity="CN_PHONE", patterns=[("mobile", CN_MOBILE)],
                        score=0.85, validator=is_phone, negative_context=PHONE_NEGATIVE_BEFORE,
                        glue=True),
        CadreRecognizer(name="cn_landline", entity="CN_PHONE",
                        patterns=[("landline", CN_LANDLINE), ("service", CN_SERVICE_NUMBER)],
                        score=0.75, validator=is_phone, negative_context=PHONE_NEGATIVE_BEFORE,
                        glue=True),
        CadreRecognizer(name="cn_resident_id", entity="CN_ID", patterns=[("id18", CN_ID)],
                        score=1.0, validator=is_cn_id, glue=True),
        CadreRecognizer(name="cn_resident_id15", entity="CN_ID", patterns=[("id15", CN_ID15)],
                        score=1.0, validator=is_cn_id15,
                        context=("身份证", "证件", "id card", "identity card", "resident id"),
                        context_required=True, glue=True, keyword_claims=True),
        CadreRecognizer(name="payment_card", entity="PAYMENT_CARD", patterns=[("card", CARD)],
                        score=1.0, validator=is_card, glue=True,
                        negative_context=PHONE_NEGATIVE_BEFORE),
        CadreRecognizer(name="email", entity="EMAIL", patterns=[("email", EMAIL)], score=0.9,
                        literals=("@",), validator=is_email),
        CadreRecognizer(name="ipv4", entity="IP_ADDRESS", patterns=[("ipv4", IPV4)], score=0.8,
                        validator=is_ipv4,
                        literals=(".",), negative_context=VERSION_BEFORE, glue=True),
        CadreRecognizer(name="ipv6", entity="IP_ADDRESS", patterns=[("ipv6", IPV6)], score=0.8,
                        literals=(":",), validator=is_ipv6, glue=True, precheck=IPV6_HINT),
        CadreRecognizer(name="cn_passport", entity="PASSPORT", patterns=[("cn", CN_PASSPORT)],
                        score=0.75, validator=is_cn_passport, glue=True),
        CadreRecognizer(name="passport_in_context", entity="PASSPORT",
                        patterns=[("generic", GENERIC_PASSPORT)], score=0.7,
                        context=PASSPORT_WORDS, context_required=True,
                        rival_context=SSN_WORDS + OTHER_DOCUMENT_WORDS, glue=True,
                        keyword_claims=True),
        CadreRecognizer(name="us_ssn", entity="US_SSN", patterns=[("ssn", SSN)], score=0.85,
                        literals=("-",), validator=is_ssn, negative_context=SSN_NEGATIVE_BEFORE,
                        glue=True),
        CadreRecognizer(name="us_ssn_in_context", entity="US_SSN",
                        patterns=[("ssn_bare", SSN_CONTEXT)], score=0.7, validator=is_ssn,
                        context=SSN_WORDS, context_required=True, rival_context=PASSPORT_WORDS,
                        glue=True, keyword_claims=True),
        CadreIbanRecognizer(name="iban", entity="IBAN", patterns=[("iban", IBAN)], score=1.0),
        ProviderKeyRecognizer(name="provider_key", entity="SECRET",
                              patterns=[("provider", PROVIDER_KEYS)], score=1.0,
                              validator=is_provider_key),
        CadreRecognizer(name="jwt", entity="SECRET", patterns=[("jwt", JWT)], score=1.0,
                        literals=("eyJ",), validator=is_jwt),
        # "PRIVATE KEY", not "PRIVATE KEY-----": a PGP header ends "PRIVATE KEY BLOCK-----".
        CadreRecognizer(name="pem_private_key", entity="SECRET", patterns=[("pem", PEM)],
                        score=1.0, literals=("PRIVATE KEY",)),
        TrailingPunctuationRecognizer(name="connection_string", entity="SECRET",
                                      patterns=[("uri", CONNECTION_STRING)], score=1.0,
                                      flags=re.I, literals=("://",)),
        SecretValueRecognizer(name="secret_key_value", entity="SECRET",
                              patterns=[("key_value", KEY_VALUE), ("cli_flag", CLI_FLAG),
                                        ("password_is", PASSWORD_IS)],
                              score=1.0, validator=is_secret_value,
                              literals=("pass", "pwd", "secret", "token", "key", "credential")),
        SecretValueRecognizer(name="secret_key_value_zh", entity="SECRET",
                              patterns=[("key_value_zh", CHINESE_KEY_VALUE)], score=1.0,
                              validator=is_chinese_secret_value,
                              literals=("密码", "口令", "密钥", "秘钥", "令牌", "授权码")),
        SecretValueRecognizer(name="mysql_cli_password", entity="SECRET",
                              patterns=[("mysql_p", MYSQL_PASSWORD)], score=1.0,
                              validator=is_mysql_password, literals=("mysql",)),
        SecretValueRecognizer(name="bearer_token", entity="SECRET",
                              patterns=[("bearer", BEARER)], score=1.0, validator=is_bearer,
                              literals=("bearer", "authorization")),
        CadreRecognizer(name="aws_secret_key", entity="SECRET",
                        patterns=[("aws_secret", AWS_SECRET)], score=0.9, validator=is_mixed_key,
                        context=("aws", "secret"), context_required=True),
    ]  # fmt: skip
