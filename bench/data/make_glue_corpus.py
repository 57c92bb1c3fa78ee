"""A second, independent labelled masking corpus: values glued to their neighbours.

    .venv/bin/python bench/data/make_glue_corpus.py --seed N [--lines 3000] [--out FILE]

Written apart from `make_masking_corpus.py` (own templates, own value code, own checksums) to
measure how the engine generalizes. Every line mixes IM-style Chinese and English and places
values the way people type them without spaces: glued to Latin letters (`服务器IP10.1.2.3`,
`…1234SSN`, `电话021-85209136Supplier`) or to CJK on either side, after full-width colons, in
full-width digits, one value directly after another (`prod银行卡6222…`, two secrets in a row),
IPv6 in compressed forms, labelled credentials (`password=…`, `token：…`, `密码：…`), and
near-misses that stay unlabelled: versions (`v1.2.6.9`, `1.2.6.9版本`), order/ticket/invoice
numbers, timestamps, amounts, dates and file names (`icon@2x.png`).

Labels follow docs/masking.md: the whole value for personal data (separators inside it
included, `+86` included); SECRET is the whole token or URI with credentials, and for a
labelled credential only the value (the label stays readable, quotes are not part of it).

Development used seeds 1-3. Held-out seeds, never used while developing: 20261201 (measured
once, then one fix followed from its two misses, so it is no longer held out) and 20261202
(`bench/data/masking_glue_heldout.jsonl`, measured once after that fix).
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import string
import sys
from pathlib import Path

HELDOUT_SEED = 20261202

# --- value makers (own checksum code) ---------------------------------------------------------


def _luhn_complete(body: str) -> str:
    digits = [int(c) for c in body]
    total = 0
    for i, d in enumerate(reversed(digits)):
        if i % 2 == 0:
            d = d * 2 - 9 if d * 2 > 9 else d * 2
        total += d
    return body + str(-total % 10)


def _digits(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(string.digits) for _ in range(n))


def _fullwidth(value: str) -> str:
    return "".join(
        chr(ord(c) + 0xFEE0) if ("0" <= c <= "9" or c == "-" or "A" <= c <= "Z") else c
        for c in value
    )


def mobile(rng):
    number = "1" + rng.choice("3456789") + _digits(rng, 9)
    style = rng.random()
    if style < 0.55:
        return number
    if style < 0.7:
        return f"{number[:3]} {number[3:7]} {number[7:]}"
    if style < 0.8:
        return f"{number[:3]}-{number[3:7]}-{number[7:]}"
    if style < 0.9:
        return "+86" + rng.choice(["", " "]) + number
    return _fullwidth(number)


def landline(rng):
    area = rng.choice(["010", "021", "020", "0755", "0571", "028", "027", "0512"])
    body = _digits(rng, 8 if len(area) == 3 else rng.choice([7, 8]))
    if body[0] == "0":
        body = "6" + body[1:]
    return rng.choice([f"{area}-{body}", f"{area}{body}", f"({area}){body}"])


_AREAS = ["110101", "110105", "310104", "310115", "440305", "440106", "330106", "510107",
          "420111", "320583", "370202", "500103", "610113", "210102", "350203"]  # fmt: skip


def cn_id(rng):
    year = rng.randint(1955, 2006)
    month, day = rng.randint(1, 12), rng.randint(1, 28)
    first17 = f"{rng.choice(_AREAS)}{year:04d}{month:02d}{day:02d}{_digits(rng, 3)}"
    weights = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
    check = "10X98765432"[sum(int(c) * w for c, w in zip(first17, weights, strict=True)) % 11]
    value = first17 + check
    return _fullwidth(value) if rng.random() < 0.1 else value


def card(rng):
    kind = rng.random()
    if kind < 0.4:
        number = _luhn_complete(
            "62" + rng.choice(["2202", "2848", "1700", "5886"]) + _digits(rng, 12)
        )
    elif kind < 0.7:
        number = _luhn_complete("4" + _digits(rng, 14))
    else:
        number = _luhn_complete(str(rng.randint(51, 55)) + _digits(rng, 13))
    if rng.random() < 0.25 and len(number) == 16:
        sep = rng.choice([" ", "-"])
        return sep.join(number[i : i + 4] for i in range(0, 16, 4))
    return number


_IBAN_SHAPES = {"DE": "n18", "FR": "n10a11n2", "NL": "a4n10", "GB": "a4n14", "ES": "n20",
                "IT": "a1n10n12", "CH": "n17"}  # fmt: skip


def iban(rng):
    country = rng.choice(list(_IBAN_SHAPES))
    shape, bban = _IBAN_SHAPES[country], ""
    i = 0
    while i < len(shape):
        kind = shape[i]
        j = i + 1
        while j < len(shape) and shape[j].isdigit():
            j += 1
        count = int(shape[i + 1 : j])
        alphabet = string.digits if kind == "n" else string.ascii_uppercase
        if kind == "a" and country == "FR":
            alphabet = string.digits + string.ascii_uppercase
        bban += "".join(rng.choice(alphabet) for _ in range(count))
        i = j
    numeric = "".join(str(int(c, 36)) for c in bban + country + "00")
    value = f"{country}{98 - int(numeric) % 97:02d}{bban}"
    if rng.random() < 0.3:
        return " ".join(value[k : k + 4] for k in range(0, len(value), 4))
    return value


def ipv4(rng):
    first = rng.choice([10, 172, 192, 47, 101, 120, 8, 223])
    return ".".join(
        str(x) for x in (first, rng.randint(0, 255), rng.randint(0, 255), rng.randint(1, 254))
    )


def ipv6(rng):
    groups = [f"{rng.randint(0, 0xFFFF):x}" for _ in range(8)]
    style = rng.random()
    if style < 0.3:
        head = rng.randint(1, 4)  # 2001:db8: + head groups + :: + one group (at most 7 written)
        return "2001:db8:" + ":".join(groups[:head]) + "::" + groups[7]
    if style < 0.5:
        return "fe80::" + ":".join(groups[:4])
    if style < 0.65:
        return "2408:" + ":".join(groups[:3]) + "::" + f"{rng.randint(1, 255)}"
    if style < 0.8:
        return "::ffff:" + ipv4(rng)
    return ":".join(groups)


def email(rng):
    name = rng.choice(["wang.lei", "zhangmin", "li_na", "chen.yu88", "ops-team", "hr", "finance",
                       "tom.h", "alice", "j.smith", "support2", "liuyang"])  # fmt: skip
    domain = rng.choice(["example.com", "corp.example.cn", "mail.acme.io", "163.com",
                         "qq.com", "foxmail.com", "huaxin-tech.com.cn"])  # fmt: skip
    return f"{name}@{domain}"


def passport(rng):
    style = rng.random()
    if style < 0.45:
        return rng.choice("EG") + _digits(rng, 8)
    if style < 0.6:
        return "E" + rng.choice("ABCDEFHJKLMNPQRSTUVWXYZ") + _digits(rng, 7)
    return rng.choice("EG") + _digits(rng, 8)


def ssn(rng):
    area = rng.randint(1, 665)
    return f"{area:03d}-{rng.randint(1, 99):02d}-{rng.randint(1, 9999):04d}"


_ALNUM = string.ascii_letters + string.digits


def _rand(rng, n, alphabet=_ALNUM):
    while True:
        value = "".join(rng.choice(alphabet) for _ in range(n))
        if any(c.isdigit() for c in value) and any(c.isupper() for c in value):
            return value


def provider_token(rng):
    kind = rng.randrange(6)
    if kind == 0:
        return "sk-proj-" + _rand(rng, 40)
    if kind == 1:
        return "ghp_" + _rand(rng, 36)
    if kind == 2:
        return "AKIA" + "".join(
            rng.choice(string.ascii_uppercase + string.digits) for _ in range(16)
        )
    if kind == 3:
        return "xoxb-" + _digits(rng, 11) + "-" + _digits(rng, 12) + "-" + _rand(rng, 24)
    if kind == 4:
        return "glpat-" + _rand(rng, 20)
    header = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').decode().rstrip("=")
    body = (
        base64.urlsafe_b64encode(
            json.dumps(
                {"sub": _digits(rng, 6), "exp": rng.randint(1_700_000_000, 1_800_000_000)}
            ).encode()
        )
        .decode()
        .rstrip("=")
    )
    return f"{header}.{body}.{_rand(rng, 43, _ALNUM + '-_')}"


def connection_uri(rng):
    scheme = rng.choice(["postgres", "mysql", "redis", "mongodb", "amqp"])
    user = rng.choice(["app", "admin", "svc_ro", "root"])
    password = _rand(rng, rng.randint(8, 14))
    host = rng.choice(["db", "10.2.3.4", "pg.internal", "cache-01.corp"])
    port = {"postgres": 5432, "mysql": 3306, "redis": 6379, "mongodb": 27017, "amqp": 5672}[scheme]
    return f"{scheme}://{user}:{password}@{host}:{port}/" + rng.choice(
        ["prod", "orders", "0", "app"]
    )


def password_value(rng):
    core = _rand(rng, rng.randint(6, 12))
    return core + rng.choice(["!", "@", "#", "$", "", "%", "&", "*"])


# --- line builder ----------------------------------------------------------------------------


class Line:
    def __init__(self):
        self.parts: list[str] = []
        self.gold: list[dict] = []
        self.size = 0

    def add(self, text: str, kind: str | None = None) -> Line:
        if kind:
            self.gold.append({"start": self.size, "end": self.size + len(text), "type": kind})
        self.parts.append(text)
        self.size += len(text)
        return self

    def record(self) -> dict:
        return {"text": "".join(self.parts), "gold": self.gold}


# What a value is introduced by (glued or not), and what follows it.
_LABELS = {
    "CN_PHONE": [
        "手机",
        "电话",
        "Tel",
        "tel:",
        "联系方式：",
        "手机号",
        "Mobile",
        "call ",
        "打",
        "座机",
        "phone",
        "联系人电话",
    ],
    "CN_ID": [
        "身份证",
        "身份证号：",
        "证件号码",
        "ID",
        "id no.",
        "身份证号码是",
        "证件：",
        "IDcard",
    ],
    "PAYMENT_CARD": ["卡号", "银行卡", "card", "Card:", "工资卡", "信用卡号：", "尾号之外完整卡号"],
    "IBAN": ["IBAN", "IBAN：", "账户IBAN", "iban: ", "收款账户", "Account ", "转到"],
    "EMAIL": ["邮箱", "email:", "发到", "mail ", "联系", "抄送"],
    "IP_ADDRESS": [
        "IP",
        "服务器IP",
        "ip:",
        "地址",
        "host ",
        "访问",
        "ping ",
        "节点",
        "IPv6地址",
        "来源IP",
    ],
    "PASSPORT": ["护照：", "护照号", "passport ", "Passport No.", "护照号码"],
    "US_SSN": ["SSN", "SSN: ", "社保号", "social security "],
}
_AFTER_LATIN = ["Ticket", "Supplier", "SSN", "OK", "Thanks", "ASAP", "pls", "done", "Team"]
_AFTER_CJK = ["宕机了", "，谢谢", "明天到", "联系一下", "已经确认", "帮忙核对", "的那个", "吗？",
              "。", "，尽快处理", "打不通", "没问题"]  # fmt: skip
_OPENERS = ["", "", "麻烦", "@张伟 ", "老王，", "FYI ", "客户说", "刚才", "hi all, ", "补充：",
            "【工单】", "紧急："]  # fmt: skip
_MAKERS = {"CN_PHONE": lambda r: mobile(r) if r.random() < 0.7 else landline(r), "CN_ID": cn_id,
           "PAYMENT_CARD": card, "IBAN": iban, "EMAIL": email,
           "IP_ADDRESS": lambda r: ipv4(r) if r.random() < 0.55 else ipv6(r),
           "PASSPORT": passport, "US_SSN": ssn}  # fmt: skip


def _value_piece(rng, line: Line, kind: str) -> None:
    value = _MAKERS[kind](rng)
    label = rng.choice(_LABELS[kind])
    if kind == "EMAIL" and label[-1].isalpha() and label.isascii():
        label += " "
    line.add(label).add(value, kind)
    last = value[-1]
    roll = rng.random()
    if roll < 0.3 and last.isdigit() and kind != "EMAIL":
        words = _AFTER_LATIN
        if kind == "IP_ADDRESS":  # `::12done` would be hex: an IPv6 is not glued to a-f
            words = [w for w in words if w[0].lower() not in "abcdef"]
        line.add(rng.choice(words))
    elif roll < 0.85:
        line.add(rng.choice(_AFTER_CJK))
    else:
        line.add(" ")


def _secret_piece(rng, line: Line) -> None:
    kind = rng.random()
    if kind < 0.3:
        label = rng.choice(["token：", "key ", "用这个", "密钥是 ", "", "Authorization 里用 "])
        line.add(label).add(provider_token(rng), "SECRET")
    elif kind < 0.5:
        line.add(rng.choice(["连接串", "DSN: ", "db url ", "配置里是", "DATABASE_URL="]))
        line.add(connection_uri(rng), "SECRET")
    else:
        style = rng.randrange(7)
        value = password_value(rng)
        if style == 0:
            line.add(rng.choice(["password=", "passwd=", "pwd=", "PASSWORD="])).add(value, "SECRET")
        elif style == 1:
            line.add(rng.choice(["token：", "Token: ", "api_key=", "secret: "]))
            line.add(_rand(rng, rng.randint(16, 32)), "SECRET")
        elif style == 2:
            line.add(rng.choice(["密码：", "密码是", "口令：", "密码为 "])).add(value, "SECRET")
        elif style == 3:
            line.add('"password": "').add(value, "SECRET").add('"')
        elif style == 4:
            line.add("API_KEY='").add(_rand(rng, 24), "SECRET").add("'")
        elif style == 5:
            line.add("--password ").add(value, "SECRET")
        else:
            line.add("client_secret=").add(_rand(rng, 28), "SECRET")
    # What follows a secret: CJK directly, whitespace, or another value glued on.
    roll = rng.random()
    if roll < 0.45:
        line.add(rng.choice(["，别外传", "记得改", "明天过期", "用完删掉", "在群里别发", "。"]))
    elif roll < 0.65:
        line.add(" ")
    elif roll < 0.8:
        kind = rng.choice(["PAYMENT_CARD", "CN_PHONE", "EMAIL"])
        line.add(rng.choice({"PAYMENT_CARD": ["银行卡", "卡号"], "CN_PHONE": ["手机", "电话"],
                             "EMAIL": ["邮箱 ", "，邮箱"]}[kind]))  # fmt: skip
        value = _MAKERS[kind](rng)
        line.add(value, kind).add(rng.choice(_AFTER_CJK))
    else:
        # Two secrets in a row, separated only by a space or a CJK word.
        line.add(rng.choice([" ", "和", " / ", "，备用"]))
        line.add(provider_token(rng), "SECRET").add(rng.choice(["。", " ", "，收到回复"]))


# Near-misses: nothing in them is sensitive.
def near_miss(rng) -> str:
    version = ".".join(str(rng.randint(0, 12)) for _ in range(4))
    choices = [
        f"v{version}",
        f"版本{version}",
        f"{version}版本",
        f"release {version}",
        f"固件升级到 {version} 版本",
        f"build {version}",
        f"订单号{_digits(rng, 4)}{rng.randint(1, 12):02d}{rng.randint(1, 28):02d}{_digits(rng, 8)}",
        f"订单{_digits(rng, 18)}",
        f"工单#INC{_digits(rng, 7)}",
        f"TKT-2026{rng.randint(1, 12):02d}{rng.randint(1, 28):02d}-{_digits(rng, 4)}",
        f"发票号码{_digits(rng, 8)}",
        f"invoice INV-{_digits(rng, 6)}",
        f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d} {rng.randint(0, 23):02d}:"
        f"{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}",
        f"时间戳{rng.randint(1_700_000_000_000, 1_799_999_999_999)}",
        f"金额¥{rng.randint(1, 999)},{_digits(rng, 3)}.{_digits(rng, 2)}",
        f"合计{rng.randint(10000, 99999)}.{_digits(rng, 2)}元",
        f"{rng.choice(['icon', 'logo', 'banner', 'avatar'])}@{rng.choice([2, 3])}x.png",
        f"report_{rng.randint(2020, 2026)}.{rng.randint(1, 12):02d}.{rng.randint(1, 28):02d}.pdf",
        f"工号{_digits(rng, 6)}",
        f"会议室{rng.randint(1, 30)}0{rng.randint(1, 9)}",
        f"{rng.randint(1, 99)}.{rng.randint(1, 99)}%",
        f"sha256 {''.join(rng.choice('0123456789abcdef') for _ in range(64))}",
        f"快递单号SF{_digits(rng, 12)}",
        f"端口{rng.randint(1000, 65000)}",
        f"第{rng.randint(1, 9)}.{rng.randint(1, 9)}.{rng.randint(1, 9)}节",
        f"密码错误{rng.randint(2, 5)}次",
        "password: 请找IT重置",
        f"max_tokens={rng.randint(100, 4000)}",
    ]
    return rng.choice(choices)


def make_line(rng: random.Random) -> dict:
    line = Line()
    line.add(rng.choice(_OPENERS))
    pieces = rng.choice([1, 1, 2, 2, 3])
    kinds = [*_MAKERS, "SECRET", "SECRET", "NEAR", "NEAR", "NEAR"]
    for _ in range(pieces):
        kind = rng.choice(kinds)
        if kind == "SECRET":
            _secret_piece(rng, line)
        elif kind == "NEAR":
            line.add(near_miss(rng)).add(rng.choice(["，", " ", "。", "；"]))
        else:
            _value_piece(rng, line, kind)
    if rng.random() < 0.3:
        line.add(rng.choice(["辛苦了", "thx", "🙏", "收到请回复", ""]))
    return line.record()


def generate(seed: int, lines: int) -> list[dict]:
    rng = random.Random(seed)
    return [make_line(rng) for _ in range(lines)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--lines", type=int, default=3000)
    parser.add_argument("--out", type=Path, default=None, help="default: stdout")
    args = parser.parse_args(argv)
    records = generate(args.seed, args.lines)
    out = args.out.open("w", encoding="utf-8") if args.out else sys.stdout
    for record in records:
        out.write(json.dumps(record, ensure_ascii=False) + "\n")
    if args.out:
        out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
