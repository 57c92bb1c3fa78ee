"""A second, independent labelled corpus built with Faker: `bench/data/masking_faker.jsonl`.

Values come from Faker's own providers (zh_CN phones and resident IDs, en_US cards of every
brand Faker knows — Maestro, JCB 15, Visa 13 included — SSNs, passports, IPv4/IPv6, IBANs of
eight countries), so the engine is checked against formats it was not written alongside.
Negative lines mix addresses, postcodes, EAN-13 barcodes, dates, times and version strings.

    .venv/bin/python bench/data/make_faker_corpus.py     (Faker comes with factory-boy)
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from faker import Faker

SEED = 99
OUT = Path(__file__).with_name("masking_faker.jsonl")
IBAN_LOCALES = ["de_DE", "fr_FR", "en_GB", "nl_NL", "es_ES", "it_IT", "pl_PL", "pt_PT"]


def build(parts: list) -> dict:
    text, entities = "", []
    for part in parts:
        if isinstance(part, tuple):
            entity_type, value = part
            entities.append(
                {"start": len(text), "end": len(text) + len(value), "type": entity_type}
            )
            text += value
        else:
            text += part
    return {"text": text, "entities": entities}


def generate(count: int = 600) -> list[dict]:
    zh, en = Faker("zh_CN"), Faker("en_US")
    zh.seed_instance(SEED)
    en.seed_instance(SEED)
    ibans = [Faker(locale) for locale in IBAN_LOCALES]
    for faker in ibans:
        faker.seed_instance(5)
    rng = random.Random(SEED)
    rows = []
    for index in range(count):
        kind, name = index % 12, zh.name()
        if kind == 0:
            parts = [f"{name}的电话", ("CN_PHONE", zh.phone_number()), "，请回电"]
        elif kind == 1:
            parts = [f"{name}身份证", ("CN_ID", zh.ssn()), "已登记"]
        elif kind == 2:
            parts = ["付款卡", ("PAYMENT_CARD", en.credit_card_number()), f"，持卡人{name}"]
        elif kind == 3:
            parts = [f"{en.name()} <", ("EMAIL", en.email()), "> wrote:"]
        elif kind == 4:
            parts = ["邮箱", ("EMAIL", zh.email()), "，电话", ("CN_PHONE", zh.phone_number())]
        elif kind == 5:
            parts = ["Client IP ", ("IP_ADDRESS", en.ipv4()), " blocked at ", en.time()]
        elif kind == 6:
            parts = ["IPv6: ", ("IP_ADDRESS", en.ipv6()), "."]
        elif kind == 7:
            parts = [f"{en.name()}'s passport number is ", ("PASSPORT", en.passport_number()), "."]
        elif kind == 8:
            parts = ["SSN ", ("US_SSN", en.ssn()), f" for {en.name()}"]
        elif kind == 9:
            iban = rng.choice(ibans).iban()
            parts = ["Transfer to ", ("IBAN", iban), f" ref {en.bothify('INV-####')}"]
        elif kind == 10:
            parts = [
                f"{zh.company()}地址{zh.address()}，邮编{zh.postcode()}，"
                f"订单{en.numerify('##########')}"
            ]
        else:
            parts = [
                f"{en.date()} {en.time()} order {en.ean13()} total {en.pricetag()} "
                f"version {en.numerify('#.#.#.#')}"
            ]
        rows.append(build(parts))
    return rows


def main() -> None:
    rows = generate()
    OUT.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    print(f"wrote {len(rows)} lines to {OUT}")


if __name__ == "__main__":
    main()
