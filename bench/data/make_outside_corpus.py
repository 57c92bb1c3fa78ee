"""An outside evaluator's labelled masking corpus, written from docs/masking.md only.

    .venv/bin/python bench/data/make_outside_corpus.py --seed 101 --lines 3000 --out /tmp/o.jsonl

Written without looking at the engine's other corpora, their generators or the tests: the
types, what they cover and the span conventions come from docs/masking.md. IM-style lines in
Chinese, English and mixed script, one to three clauses each: values glued to CJK or Latin
neighbours on either side, in lists, parentheses and quotes, after ASCII and full-width colons,
at the start and end of the line, full-width digits; and near-misses that must stay unmasked
(versions, build numbers, order/ticket/invoice/tracking numbers, timestamps, dates, amounts,
percentages, hashes, UUIDs, file names, MAC addresses, short service numbers, numbers failing
their checksum, placeholders).

Output: JSONL, `{"text": ..., "gold": [{"start", "end", "type"}]}`, offsets in code points.
Checksums (resident ID, Luhn, IBAN mod-97) are computed here, independently of the engine.
Development seeds: 101, 102. The final seed is recorded in docs/masking.md and was run once.
"""

# ruff: noqa: RUF001, E501 - Chinese text and full-width punctuation are the point

from __future__ import annotations

import argparse
import base64
import json
import random
import string
from pathlib import Path

FW_DIGITS = str.maketrans("0123456789-", "０１２３４５６７８９－")


class Line:
    def __init__(self) -> None:
        self.text = ""
        self.gold: list[dict] = []

    def t(self, s: str) -> Line:
        self.text += s
        return self

    def v(self, s: str, kind: str) -> Line:
        start = len(self.text)
        self.text += s
        self.gold.append({"start": start, "end": len(self.text), "type": kind})
        return self


# ---------------------------------------------------------------- values with checksums


def luhn_digit(body: str) -> str:
    total = 0
    for i, ch in enumerate(reversed(body)):
        d = int(ch)
        if i % 2 == 0:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return str((10 - total % 10) % 10)


AREAS = [
    "110101", "110105", "110108", "310104", "310115", "440305", "440106", "330106",
    "320102", "510107", "420106", "610113", "370202", "500103", "120101", "210102",
    "350203", "430104", "410105", "530102", "450103", "230103", "220102", "340104",
]  # fmt: skip
ID_WEIGHTS = [7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2]


def id_check(body: str) -> str:
    return "10X98765432"[sum(int(c) * w for c, w in zip(body, ID_WEIGHTS, strict=True)) % 11]


def cn_id(rng: random.Random, want_x: bool | None = None) -> str:
    for _ in range(200):
        y = rng.randint(1950, 2005)
        m = rng.randint(1, 12)
        d = rng.randint(1, 28)
        body = f"{rng.choice(AREAS)}{y}{m:02d}{d:02d}{rng.randint(0, 999):03d}"
        check = id_check(body)
        if want_x is None or (check == "X") == want_x:
            return body + check
    return body + check


def bad_cn_id(rng: random.Random) -> str:
    good = cn_id(rng)
    wrong = [c for c in "0123456789X" if c != good[-1]]
    return good[:-1] + rng.choice(wrong)


MOBILE_PREFIXES = [
    "130", "131", "132", "133", "135", "136", "137", "138", "139", "147", "150", "151",
    "152", "153", "155", "156", "157", "158", "159", "166", "176", "177", "178", "180",
    "181", "182", "183", "185", "186", "187", "188", "189", "191", "193", "195", "198", "199",
]  # fmt: skip


def digits(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(string.digits) for _ in range(n))


def mobile(rng: random.Random) -> str:
    return rng.choice(MOBILE_PREFIXES) + digits(rng, 8)


def phone_value(rng: random.Random) -> str:
    m = mobile(rng)
    r = rng.random()
    if r < 0.30:
        return m
    if r < 0.40:
        return f"{m[:3]} {m[3:7]} {m[7:]}"
    if r < 0.50:
        return f"{m[:3]}-{m[3:7]}-{m[7:]}"
    if r < 0.58:
        return f"+86 {m}"
    if r < 0.63:
        return f"+86-{m}"
    if r < 0.66:
        return f"+86{m}"
    if r < 0.69:
        return f"+86 {m[:3]} {m[3:7]} {m[7:]}"
    if r < 0.71:
        return f"0086 {m}"
    if r < 0.76:
        return m.translate(FW_DIGITS)
    # landlines
    area, rest = rng.choice(
        [("010", 8), ("021", 8), ("020", 8), ("0755", 8), ("0571", 8), ("028", 8), ("0512", 8)]
    )
    local = str(rng.randint(2, 8)) + digits(rng, rest - 1)
    r = rng.random()
    if r < 0.35:
        return f"{area}-{local}"
    if r < 0.50:
        return f"({area}){local}"
    if r < 0.62:
        return f"（{area}）{local}"
    if r < 0.74:
        return f"{area}-{local[:4]} {local[4:]}"
    if r < 0.86:
        return f"+86 {area[1:]} {local[:4]} {local[4:]}"
    return rng.choice([f"400-{digits(rng, 3)}-{digits(rng, 4)}", f"400{digits(rng, 7)}"])


CARD_ISSUERS = [
    ("4", 16), ("4", 16), ("51", 16), ("53", 16), ("55", 16), ("2221", 16), ("2720", 16),
    ("62", 16), ("62", 19), ("6222", 19), ("34", 15), ("37", 15), ("6011", 16), ("3530", 16),
]  # fmt: skip


def card_number(rng: random.Random, valid: bool = True) -> str:
    prefix, length = rng.choice(CARD_ISSUERS)
    body = prefix + digits(rng, length - len(prefix) - 1)
    check = luhn_digit(body)
    if not valid:
        check = str((int(check) + rng.randint(1, 9)) % 10)
    return body + check


def group_card(n: str, rng: random.Random) -> str:
    r = rng.random()
    if r < 0.4:
        return n
    sep = " " if r < 0.8 else "-"
    if len(n) == 15:
        return sep.join([n[:4], n[4:10], n[10:]])
    return sep.join(n[i : i + 4] for i in range(0, len(n), 4))


IBAN_FORMATS = {
    "DE": lambda r: digits(r, 8) + digits(r, 10),
    "GB": lambda r: r.choice(["NWBK", "BARC", "HBUK", "LOYD", "MIDL"]) + digits(r, 14),
    "FR": lambda r: digits(r, 10) + digits(r, 11) + digits(r, 2),
    "NL": lambda r: r.choice(["ABNA", "INGB", "RABO", "SNSB", "TRIO"]) + digits(r, 10),
    "ES": lambda r: digits(r, 20),
    "IT": lambda r: r.choice("ABCDEFGHIJKLMNOPRSTUVWXYZ") + digits(r, 10) + digits(r, 12),
    "CH": lambda r: digits(r, 5) + digits(r, 12),
    "BE": lambda r: digits(r, 12),
    "AT": lambda r: digits(r, 16),
    "PL": lambda r: digits(r, 24),
}


def iban_check(country: str, bban: str) -> str:
    moved = bban + country + "00"
    number = "".join(str(int(c, 36)) for c in moved)
    return f"{98 - int(number) % 97:02d}"


def iban(rng: random.Random, valid: bool = True, grouped: bool | None = None) -> str:
    country = rng.choice(list(IBAN_FORMATS))
    bban = IBAN_FORMATS[country](rng)
    check = iban_check(country, bban)
    if not valid:
        check = f"{(int(check) + rng.randint(1, 50)) % 97 + 2:02d}"
        if check == iban_check(country, bban):
            check = f"{(int(check) + 1) % 97 + 2:02d}"
    value = country + check + bban
    if grouped is None:
        grouped = rng.random() < 0.45
    if grouped:
        value = " ".join(value[i : i + 4] for i in range(0, len(value), 4))
    return value


def ssn(rng: random.Random) -> str:
    while True:
        area = rng.randint(1, 899)
        if area != 666:
            break
    return f"{area:03d}-{rng.randint(1, 99):02d}-{rng.randint(1, 9999):04d}"


def passport_cn(rng: random.Random) -> str:
    if rng.random() < 0.8:
        return rng.choice("EG") + digits(rng, 8)
    return "E" + rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ") + digits(rng, 7)


def ipv4(rng: random.Random) -> str:
    first = rng.choice([10, 172, 192, 8, 47, 101, 114, 203, 58, 121, 223])
    if first == 192:
        return f"192.168.{rng.randint(0, 255)}.{rng.randint(1, 254)}"
    if first == 172:
        return f"172.{rng.randint(16, 31)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}"
    return f"{first}.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}"


def hexgroup(rng: random.Random, full: bool = False) -> str:
    n = rng.randint(1, 0xFFFF)
    return f"{n:04x}" if full else f"{n:x}"


def ipv6(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.25:
        return ":".join(hexgroup(rng, full=rng.random() < 0.5) for _ in range(8))
    if r < 0.50:
        return (
            "2001:db8:"
            + ":".join(hexgroup(rng) for _ in range(rng.randint(1, 3)))
            + "::"
            + (f"{rng.randint(1, 255)}")
        )
    if r < 0.65:
        return "fe80::" + ":".join(hexgroup(rng) for _ in range(rng.randint(2, 4)))
    if r < 0.80:
        return f"240e:{hexgroup(rng)}:{hexgroup(rng)}::{rng.randint(1, 99)}"
    if r < 0.90:
        return f"::ffff:{ipv4(rng)}"
    return rng.choice(["::1", f"2408:{hexgroup(rng)}::{hexgroup(rng)}"])


def email(rng: random.Random) -> str:
    user = rng.choice(
        ["zhang.wei", "li_na", "wang.fang88", "chen.jie", "liu-yang", "sarah.k", "j.smith",
         "ops", "hr.recruit", "zhaolei2026", "mike.chen", "anna_w", "dev+alerts", "x.liu"]
    )  # fmt: skip
    domain = rng.choice(
        ["example.com", "corp.example.cn", "qq.com", "163.com", "acme.io", "mail.acme.com.cn",
         "foxmail.com", "outlook.com", "bytecorp.local", "sina.cn", "gmail.com", "partner.co.uk"]
    )  # fmt: skip
    return f"{user}@{domain}"


ALNUM = string.ascii_letters + string.digits


def rand(rng: random.Random, n: int, alphabet: str = ALNUM) -> str:
    while True:
        s = "".join(rng.choice(alphabet) for _ in range(n))
        if any(c.isdigit() for c in s) or alphabet == string.ascii_uppercase:
            return s


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jwt(rng: random.Random) -> str:
    header = b64url(json.dumps({"alg": rng.choice(["HS256", "RS256"]), "typ": "JWT"}).encode())
    payload = b64url(json.dumps({"sub": digits(rng, 6), "name": "svc", "iat": 1764489600}).encode())
    return f"{header}.{payload}.{rand(rng, 43, ALNUM + '-_')}"


def provider_token(rng: random.Random) -> str:
    r = rng.randrange(11)
    if r == 0:
        return "ghp_" + rand(rng, 36)
    if r == 1:
        return "sk-proj-" + rand(rng, 48, ALNUM + "-_")
    if r == 2:
        return "AKIA" + rand(rng, 16, string.ascii_uppercase + "234567")
    if r == 3:
        return f"xoxb-{digits(rng, 12)}-{digits(rng, 13)}-{rand(rng, 24)}"
    if r == 4:
        return "glpat-" + rand(rng, 20, ALNUM + "-_")
    if r == 5:
        return "AIza" + rand(rng, 35, ALNUM + "-_")
    if r == 6:
        return "sk_live_" + rand(rng, 24)
    if r == 7:
        return "hf_" + rand(rng, 34)
    if r == 8:
        return "sk-ant-api03-" + rand(rng, 60, ALNUM + "-_")
    if r == 9:
        return "github_pat_" + rand(rng, 22) + "_" + rand(rng, 59)
    return jwt(rng)


def password(rng: random.Random) -> str:
    words = ["Qw3rty", "Summer", "Passw0rd", "Zx", "Lm", "Tiger", "Dragon", "Sun", "Kx"]
    r = rng.random()
    if r < 0.5:
        return (
            rng.choice(words)
            + rng.choice("!#$%*@_-+")
            + digits(rng, rng.randint(2, 4))
            + rng.choice(["", "!", "x", "Ab"])
        )
    return rand(rng, rng.randint(10, 16), ALNUM + "!#$%*_-+")


def cred_url(rng: random.Random) -> str:
    scheme = rng.choice(
        ["postgres", "postgresql", "mysql", "mongodb+srv", "redis", "amqp", "https"]
    )
    user = rng.choice(["app", "admin", "svc_report", "root", "deploy"])
    pw = rand(rng, rng.randint(8, 14))
    host = rng.choice(["db.internal", "10.0.3.7", "prod-db.acme.io", "mq.corp.local", "cache01"])
    port = rng.choice(["", ":5432", ":3306", ":6379", ":5672", ":27017"])
    path = rng.choice(["/prod", "/orders", "", "/0", "/app?sslmode=require"])
    if scheme == "redis" and rng.random() < 0.5:
        return f"redis://:{pw}@{host}{port}{path}"
    return f"{scheme}://{user}:{pw}@{host}{port}{path}"


# ---------------------------------------------------------------- contexts

CJK_AFTER = ["，谢谢", "，麻烦尽快", "宕机了", "，请核对", "已经更新", "。", "，收到请回复", "哈",
             "有问题", "打不通", "，周五前", "对吧？", "吗", "不对", "【急】"]  # fmt: skip
LATIN_AFTER_WORDS = ["Ticket", "Supplier", "pls", "thx", "ok", "Urgent", "Now", "Thanks", "ASAP"]


def tail(rng: random.Random, latin_glue_ok: bool = True) -> str:
    r = rng.random()
    if r < 0.35:
        return rng.choice(CJK_AFTER)
    if r < 0.55 and latin_glue_ok:
        return rng.choice(LATIN_AFTER_WORDS)
    if r < 0.75:
        return rng.choice([" thanks", " pls check", " 谢谢", ", ok?", "."])
    return ""


def wrap(rng: random.Random, line: Line, value: str, kind: str, labels: list[str],
         latin_glue_ok: bool = True) -> None:  # fmt: skip
    """label + (optional bracket/quote) + value + closing + tail."""
    label = rng.choice(labels)
    r = rng.random()
    opener, closer = "", ""
    if r < 0.12:
        opener, closer = "（", "）"
    elif r < 0.2:
        opener, closer = "(", ")"
    elif r < 0.28:
        opener, closer = "“", "”"
    elif r < 0.33:
        opener, closer = '"', '"'
    elif r < 0.38:
        opener, closer = "「", "」"
    line.t(label + opener).v(value, kind).t(closer)
    line.t(tail(rng, latin_glue_ok and not closer))


PHONE_LABELS = ["手机", "手机：", "电话:", "电话 ", "联系方式：", "Tel", "tel:", "mobile ", "Mobile:",
                "call ", "打", "座机", "TEL", "客户电话", "微信同号", "号码是", "联系人王工 ", ""]  # fmt: skip
ID_LABELS = ["身份证", "身份证号：", "身份证号码:", "ID ", "ID:", "证件号码：", "证件号", "ID card ",
             "id no. ", "居民身份证 ", ""]  # fmt: skip
CARD_LABELS = ["卡号", "卡号：", "银行卡:", "card ", "Card no. ", "Visa ", "信用卡", "打款到",
               "card number: ", "储蓄卡 ", ""]  # fmt: skip
EMAIL_LABELS = ["邮箱", "邮箱：", "email: ", "Email ", "发到", "mail to ", "抄送", "联系", "<", ""]
IP_LABELS = ["IP", "ip:", "IP：", "服务器", "host ", "主机 ", "来源IP", "源地址", "ping ", "连不上",
             "server ", "address: ", "内网", ""]  # fmt: skip
PASSPORT_LABELS = ["护照", "护照号：", "护照号码:", "passport ", "Passport No. ", "passport#",
                   "护照 ", "Passport:"]  # fmt: skip
SSN_LABELS = ["SSN ", "SSN:", "SSN：", "social security number ", "ssn#", "美国社保号 "]
IBAN_LABELS = ["IBAN", "IBAN：", "IBAN: ", "收款账户IBAN：", "account ", "汇到", "beneficiary IBAN ",
               "账号 ", ""]  # fmt: skip


def c_phone(rng, line):
    value = phone_value(rng)
    wrap(rng, line, value, "CN_PHONE", PHONE_LABELS)


def c_id(rng, line):
    value = cn_id(rng, want_x=rng.random() < 0.2)
    r = rng.random()
    if r < 0.1:
        value = f"{value[:6]} {value[6:14]} {value[14:]}"
    elif r < 0.2:
        value = value.translate(FW_DIGITS)
    elif r < 0.25:
        value = value[:-1] + value[-1].lower()
    wrap(rng, line, value, "CN_ID", ID_LABELS)


def c_card(rng, line):
    value = group_card(card_number(rng), rng)
    if rng.random() < 0.08:
        value = value.translate(FW_DIGITS)
    wrap(rng, line, value, "PAYMENT_CARD", CARD_LABELS)


def c_email(rng, line):
    value = email(rng)
    label = rng.choice(EMAIL_LABELS)
    if label == "<":
        line.t(rng.choice(["王芳 <", "Sarah <", "HR <"])).v(value, "EMAIL").t(">")
        line.t(rng.choice([*CJK_AFTER, " cc me", ""]))
        return
    wrap(rng, line, value, "EMAIL", [label], latin_glue_ok=False)


def c_ip(rng, line):
    r = rng.random()
    if r < 0.45:
        wrap(rng, line, ipv4(rng), "IP_ADDRESS", IP_LABELS)
    elif r < 0.6:
        line.t(rng.choice(IP_LABELS)).v(ipv4(rng), "IP_ADDRESS").t(
            f":{rng.choice([22, 80, 443, 8080, 3306, 6443])}"
        )
        line.t(tail(rng, latin_glue_ok=False))
    elif r < 0.7:
        line.t(rng.choice(["访问 ", "open ", "curl ", "打开", "see "])).t(
            rng.choice(["http://", "https://"])
        ).v(ipv4(rng), "IP_ADDRESS").t(
            rng.choice([":8080/health", "/admin", ":9000/api/v1/jobs", "/"])
        )
        line.t(rng.choice([" 看看", " 打不开", "，404了", " pls", ""]))
    elif r < 0.92:
        value = ipv6(rng)
        label = rng.choice([*IP_LABELS, "IPv6 ", "v6地址："])
        after = rng.choice([*CJK_AFTER, " 不通", " unreachable", "", "，"])
        line.t(label).v(value, "IP_ADDRESS").t(after)
    else:
        line.t(rng.choice(["访问 http://[", "curl https://["])).v(ipv6(rng), "IP_ADDRESS").t(
            rng.choice(["]:8080/", "]/status", "]:443"])
        )
        line.t(rng.choice([" 超时", " timeout", ""]))


def c_passport(rng, line):
    if rng.random() < 0.75:
        value = passport_cn(rng)
    else:
        value = rng.choice(
            [digits(rng, 9), rng.choice(string.ascii_uppercase) + digits(rng, 8),
             rng.choice(string.ascii_uppercase) + digits(rng, 7) + rng.choice(string.ascii_uppercase)]
        )  # fmt: skip
    wrap(rng, line, value, "PASSPORT", PASSPORT_LABELS, latin_glue_ok=value[0] in "EG")


def c_ssn(rng, line):
    value = ssn(rng)
    r = rng.random()
    if r < 0.55:
        wrap(rng, line, value, "US_SSN", [*SSN_LABELS, "", "员工 ", "W-2上的 "])
    else:
        bare = value.replace("-", rng.choice(["", " "]))
        wrap(rng, line, bare, "US_SSN", SSN_LABELS)


def c_iban(rng, line):
    wrap(rng, line, iban(rng), "IBAN", IBAN_LABELS)


SECRET_KEYS_EQ = ["password=", "passwd=", "pwd=", "api_key=", "token=", "secret=", "DB_PASSWORD=",
                  "client_secret=", "access_token=", "REDIS_PASSWORD="]  # fmt: skip
SECRET_KEYS_COLON = ["password: ", "Password: ", "token: ", "密码：", "密码:", "口令：", "密钥：",
                     "token：", "secret: ", "api key: ", "passwd: "]  # fmt: skip


def c_secret(rng, line):
    r = rng.random()
    if r < 0.25:
        line.t(
            rng.choice(
                ["token ", "key: ", "用这个key：", "新的token：", "GitHub token ", "", "key="]
            )
        )
        line.v(provider_token(rng), "SECRET")
        line.t(rng.choice([*CJK_AFTER, " 别外传", " (rotate later)", "", " 今天过期"]))
    elif r < 0.37:
        line.t(rng.choice(["连接串 ", "DSN: ", "数据库：", "conn=", "用", "url: "]))
        line.v(cred_url(rng), "SECRET")
        line.t(rng.choice(["连不上", " 跑一下", "，密码改过了", " ", ""]))
    elif r < 0.55:
        line.t(rng.choice(SECRET_KEYS_EQ)).v(password(rng), "SECRET")
        line.t(rng.choice(["", " ", "&user=admin", "；", " 记得改", "，别发群里"]))
    elif r < 0.72:
        line.t(rng.choice(SECRET_KEYS_COLON)).v(password(rng), "SECRET")
        line.t(rng.choice(["", " ", "，用完删", " thanks", "；"]))
    elif r < 0.80:
        key = rng.choice(["password", "api_key", "token", "secret"])
        q = rng.choice(['"', "'"])
        line.t(f"{q}{key}{q}: {q}").v(password(rng), "SECRET").t(q)
        line.t(rng.choice(["", ",", " }"]))
    elif r < 0.86:
        line.t(rng.choice(["Authorization: Bearer ", "header加上 Authorization: Bearer "]))
        line.v(rng.choice([jwt(rng), rand(rng, 40)]), "SECRET")
    elif r < 0.93:
        line.t(
            rng.choice(["my password is ", "the password is ", "密码是", "VPN密码是", "wifi密码是"])
        )
        line.v(password(rng), "SECRET")
        line.t(rng.choice(["", " btw", "，别告诉别人", "。"]))
    else:
        line.t(rng.choice(["mysql -u root -p", "psql --password ", "login --password "]))
        line.v(password(rng), "SECRET")
        line.t(rng.choice(["", " -h db01"]))


POSITIVES = [c_phone, c_id, c_card, c_email, c_ip, c_passport, c_ssn, c_iban, c_secret]

# ---------------------------------------------------------------- near-misses (no gold)


def near_miss(rng: random.Random) -> str:
    r = rng.randrange(30)
    d = lambda n: digits(rng, n)  # noqa: E731
    if r == 0:
        return rng.choice(["版本 ", "version ", "升级到v", "固件 ", "release "]) + ".".join(
            str(rng.randint(0, 12)) for _ in range(4)
        )
    if r == 1:
        return ".".join(str(rng.randint(0, 12)) for _ in range(4)) + rng.choice(
            ["版本已发布", " 版本上线了"]
        )
    if r == 2:
        return rng.choice(["build ", "Build #", "构建号"]) + d(rng.randint(4, 8))
    if r == 3:
        return rng.choice(["订单号", "订单号：", "order #", "Order No. ", "单号"]) + rng.choice(
            MOBILE_PREFIXES) + d(8)  # fmt: skip
    if r == 4:
        return rng.choice(["订单号", "order id ", "流水号："]) + "2026" + d(rng.randint(12, 16))
    if r == 5:
        return rng.choice(["工单", "ticket ", "JIRA-", "INC", "工单号："]) + d(rng.randint(4, 7))
    if r == 6:
        return (
            rng.choice(["发票号码", "invoice ", "Invoice No. "])
            + rng.choice(["", "INV-2026-"])
            + d(8)
        )
    if r == 7:
        return (
            rng.choice(["运单号", "快递单号 ", "tracking "])
            + rng.choice(["SF", "YT", "JD", ""])
            + d(13)
        )
    if r == 8:
        return f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d} {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}"
    if r == 9:
        return rng.choice(["ts=", "timestamp ", "时间戳"]) + "17" + d(rng.choice([8, 11]))
    if r == 10:
        return (
            rng.choice(["金额", "amount ", "合计：", "报销"])
            + rng.choice(["¥", "$", "￥", ""])
            + (f"{rng.randint(1, 999)},{rng.randint(0, 999):03d}.{rng.randint(0, 99):02d}")
        )
    if r == 11:
        return f"{rng.randint(1, 99)}.{rng.randint(0, 99):02d}%" + rng.choice(
            ["的增长", " uptime", "完成率"]
        )
    if r == 12:
        return rng.choice(["commit ", "sha256:", "md5 ", "hash="]) + "".join(
            rng.choice("0123456789abcdef") for _ in range(rng.choice([7, 32, 40, 64]))
        )
    if r == 13:
        h = "".join(rng.choice("0123456789abcdef") for _ in range(32))
        return f"request_id {h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
    if r == 14:
        return rng.choice(["icon@2x.png", "banner@3x.jpg", "report_2026.11.30.pdf", "logo@2x.svg",
                           "backup-10.1.2.tar.gz", "jquery@3.6.0.min.js"])  # fmt: skip
    if r == 15:
        mac = [f"{rng.randint(0, 255):02x}" for _ in range(6)]
        return "MAC " + rng.choice([":", "-"]).join(mac).upper()
    if r == 16:
        return rng.choice(["客服95588", "工号 10086", "分机 8021", "QQ群 " + d(9), "QQ " + d(10)])
    if r == 17:
        return (
            rng.choice(["卡号", "card "])
            + group_card(card_number(rng, valid=False), rng)
            + "（校验失败）"
        )
    if r == 18:
        return "身份证" + bad_cn_id(rng) + "（这个号不对）"
    if r == 19:
        return "IBAN " + iban(rng, valid=False) + " 校验不过"
    if r == 20:
        return rng.choice(["password: <your_password>", "token=${API_TOKEN}", "密码错误", "密码重置了吗",
                           "password: please reset it", "max_tokens=4096", "pwd: /home/deploy",
                           "api_key=xxx", "密码长度8-16位", "the password is required"])  # fmt: skip
    if r == 21:
        return "pk_live_" + rand(rng, 24) + " 是公开的key"
    if r == 22:
        return rng.choice(["std::vector<int>", "a::b::c", "Foo::bar()", "10:30-11:45 开会"])
    if r == 23:
        return (
            f"{rng.randint(2019, 2026)}年{rng.randint(1, 12)}月{rng.randint(1, 28)}日"
            + rng.choice(["开会", "上线", ""])
        )
    if r == 24:
        return (
            rng.choice(["chrome ", "Windows ", "内核 "])
            + f"{rng.randint(100, 130)}.0.{rng.randint(1000, 9999)}.{rng.randint(10, 300)}"
        )
    if r == 25:
        return rng.choice(["IMEI ", "设备号", "SN:"]) + "86" + d(13)
    if r == 26:
        return (
            rng.choice(["房间号", "门牌", "room "]) + d(rng.randint(3, 4)) + rng.choice(["", "室"])
        )
    if r == 27:
        return (
            rng.choice(["共", "total ", "库存"])
            + d(rng.randint(5, 9))
            + rng.choice(["件", " pcs", "个"])
        )
    if r == 28:
        return rng.choice(["料号", "part no. ", "型号 "]) + f"{d(3)}-{d(2)}-{d(4)}"
    return (
        rng.choice(["v", "ver "]) + f"{rng.randint(1, 9)}.{rng.randint(0, 30)}.{rng.randint(0, 99)}"
    )


# ---------------------------------------------------------------- lines

OPENERS = [
    "",
    "",
    "",
    "@王经理 ",
    "hi，",
    "Hi team, ",
    "麻烦",
    "FYI ",
    "老板，",
    "急！",
    "pls note: ",
    "【通知】",
]
JOINERS = ["，", "；", "。", " ", ", ", "; ", " / ", "、", " and ", "，还有", "\t", " | "]
CLOSERS = ["", "", "", "", "，谢谢！", " thx", "。", "～", " 🙏", "！"]


def make_line(rng: random.Random) -> Line:
    line = Line()
    line.t(rng.choice(OPENERS))
    n = rng.choice([1, 1, 2, 2, 2, 3, 3])
    near_only = rng.random() < 0.2
    for i in range(n):
        if i:
            line.t(rng.choice(JOINERS))
        if near_only or rng.random() < 0.3:
            line.t(near_miss(rng))
        else:
            rng.choice(POSITIVES)(rng, line)
    line.t(rng.choice(CLOSERS))
    return line


def list_line(rng: random.Random) -> Line:
    """Several values of one kind in a list: 、 / , / ; / 和."""
    line = Line()
    kind = rng.choice(["CN_PHONE", "EMAIL", "IP_ADDRESS", "PAYMENT_CARD", "CN_ID"])
    makers = {
        "CN_PHONE": lambda: mobile(rng),
        "EMAIL": lambda: email(rng),
        "IP_ADDRESS": lambda: ipv4(rng),
        "PAYMENT_CARD": lambda: card_number(rng),
        "CN_ID": lambda: cn_id(rng),
    }
    heads = {
        "CN_PHONE": ["值班手机：", "On-call: ", "紧急联系人"],
        "EMAIL": ["收件人：", "cc: ", "邮件发给"],
        "IP_ADDRESS": ["白名单：", "whitelist ", "节点IP"],
        "PAYMENT_CARD": ["退款卡号：", "cards: "],
        "CN_ID": ["入住人身份证：", "IDs: "],
    }
    line.t(rng.choice(heads[kind]))
    sep = rng.choice(["、", ", ", "，", "; ", " / ", "和"])
    for i in range(rng.randint(2, 4)):
        if i:
            line.t(sep)
        line.v(makers[kind](), kind)
    line.t(rng.choice(["", "。", " 都通知到", "，谢谢"]))
    return line


def generate(seed: int, count: int) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        line = list_line(rng) if rng.random() < 0.08 else make_line(rng)
        out.append({"text": line.text, "gold": line.gold})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--lines", type=int, default=3000)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    rows = generate(args.seed, args.lines)
    with args.out.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
