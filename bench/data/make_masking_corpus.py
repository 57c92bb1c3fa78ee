"""Generate the labelled masking corpus `bench/data/masking_corpus.jsonl` (deterministic seed).

One JSON object per line: {"text": ..., "entities": [{"start", "end", "type"}]}. Values are
made here with their own checksum code (Luhn, ISO 7064 MOD 11-2, mod-97), independent of the
engine's, and placed in Chinese, English and mixed sentences — often glued to Chinese text —
next to near-misses that must not be detected (bad checksums, impossible birth dates, order
numbers, timestamps, versions, hashes, UUIDs, placeholders).

Span conventions (docs/masking.md): the whole value for personal data; for SECRET the whole
token (provider keys, JWTs, PEM/PGP blocks, connection strings) or only the value of a
`key=value` / `"key": "value"` / `密码：value` pair.

After the shuffled main corpus come the "formats" lines (`format_lines`, own random stream so
the lines before them do not change): full-width digits and separators, 400/800 numbers
without separators, `86` + mobile, dotted mobiles, 15-digit first-generation IDs, cards in
double-space and 6-12 groups, lower-case and dash-grouped IBANs, French/German passports,
passport vs SSN numbers side by side, PGP private keys, `密码是：…` / `密码 …` / `密码…`,
"the password for X is …", Hugging Face tokens, `client_secret: <random letters>`, short
symbol passwords, `mysql -p…`, letter-only SMTP 授权码, unsigned (`alg: none`) JWTs — and their
near-misses (密码错误/重置/找回, `icon@2x.png`, order and part numbers, 港澳通行证, IMEIs).

    .venv/bin/python bench/data/make_masking_corpus.py [--out FILE] [--seed N]
"""

# ruff: noqa: RUF001 - Chinese text and its full-width punctuation are the point

from __future__ import annotations

import argparse
import base64
import ipaddress
import json
import random
import string
from collections.abc import Callable
from pathlib import Path

SEED = 20261130
OUT = Path(__file__).with_name("masking_corpus.jsonl")


def words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


# --- checksums (independent of the engine) ---------------------------------------------------


def luhn_check_digit(body: str) -> str:
    total = 0
    for index, ch in enumerate(reversed(body)):
        digit = int(ch)
        if index % 2 == 0:
            digit *= 2
            if digit > 9:
                digit -= 9
        total += digit
    return str((10 - total % 10) % 10)


def luhn_ok(number: str) -> bool:
    return luhn_check_digit(number[:-1]) == number[-1]


ID_WEIGHTS = [2 ** (17 - i) % 11 for i in range(17)]  # 7 9 10 5 8 4 2 1 6 3 7 9 10 5 8 4 2


def id_check(first17: str) -> str:
    return "10X98765432"[sum(int(c) * w for c, w in zip(first17, ID_WEIGHTS, strict=True)) % 11]


def iban_check(country: str, bban: str) -> str:
    numeric = "".join(str(int(ch, 36)) for ch in bban + country + "00")
    return f"{98 - int(numeric) % 97:02d}"


# --- value makers ------------------------------------------------------------------------------


class Maker:
    def __init__(self, rng: random.Random):
        self.r = rng

    def digits(self, n: int, first: str = "0123456789") -> str:
        return self.r.choice(first) + "".join(self.r.choice(string.digits) for _ in range(n - 1))

    def alnum(self, n: int, alphabet: str = string.ascii_letters + string.digits) -> str:
        while True:
            value = "".join(self.r.choice(alphabet) for _ in range(n))
            if any(c.isdigit() for c in value) and any(c.isalpha() for c in value):
                return value

    # phones
    MOBILE_PREFIXES = words(
        "130 131 132 133 134 135 136 137 138 139 145 147 150 151 152 153 155 156 157 158 "
        "159 166 170 171 172 173 175 176 177 178 180 181 182 183 184 185 186 187 188 189 "
        "191 193 195 196 197 198 199"
    )
    AREA_CODES = words(
        "010 020 021 022 023 024 025 027 028 029 0755 0571 0512 0731 0532 0591 0871 0431 "
        "0451 0371 0574 0769 0898"
    )

    def cn_mobile(self) -> str:
        prefix = self.r.choice(self.MOBILE_PREFIXES)
        a, b = self.digits(4), self.digits(4)
        style = self.r.random()
        if style < 0.55:
            return f"{prefix}{a}{b}"
        if style < 0.68:
            return f"{prefix} {a} {b}"
        if style < 0.78:
            return f"{prefix}-{a}-{b}"
        if style < 0.9:
            return f"+86 {prefix}{a}{b}"
        if style < 0.95:
            return f"+86-{prefix}-{a}-{b}"
        return f"+86{prefix}{a}{b}"

    def cn_landline(self) -> str:
        area = self.r.choice(self.AREA_CODES)
        local = self.digits(8 if len(area) == 3 else self.r.choice((7, 8)), "2345678")
        style = self.r.random()
        if style < 0.45:
            return f"{area}-{local}"
        if style < 0.6:
            return f"({area}){local}"
        if style < 0.72 and len(local) == 8:
            return f"{area}-{local[:4]} {local[4:]}"
        if style < 0.8 and len(local) == 8:
            return f"+86 {area[1:]} {local[:4]} {local[4:]}"
        if style < 0.9:
            return f"{area} {local}"
        return f"400-{self.digits(3)}-{self.digits(4)}"

    def cn_phone(self) -> str:
        return self.cn_mobile() if self.r.random() < 0.7 else self.cn_landline()

    # resident ID
    DIVISIONS = words(
        "110101 110105 110108 120101 130102 140105 210102 220102 230103 310101 310104 "
        "310115 320102 320506 330106 330212 340104 350203 360102 370102 370203 410105 "
        "420106 430104 440103 440305 440306 450103 460106 500103 510107 520102 530102 "
        "610113 620102 630104 640104 650102"
    )

    def _birth(self) -> str:
        year = self.r.randint(1950, 2006)
        month = self.r.randint(1, 12)
        day = self.r.randint(1, 28)
        return f"{year}{month:02d}{day:02d}"

    def cn_id(self) -> str:
        first17 = self.r.choice(self.DIVISIONS) + self._birth() + self.digits(3)
        check = id_check(first17)
        if check == "X" and self.r.random() < 0.2:
            check = "x"
        return first17 + check

    def cn_id_bad_check(self) -> str:
        first17 = self.r.choice(self.DIVISIONS) + self._birth() + self.digits(3)
        good = id_check(first17)
        return first17 + self.r.choice([c for c in "0123456789X" if c != good])

    def cn_id_bad_date(self) -> str:
        year = self.r.choice(["2099", "2100", "1850", str(self.r.randint(1960, 2000))])
        month, day = self.r.choice(
            [("02", "30"), ("13", "05"), ("00", "12"), ("04", "31"), ("06", "00"), ("11", "31")]
        )
        if year in ("2099", "2100", "1850"):
            month, day = "05", "17"
        first17 = self.r.choice(self.DIVISIONS) + year + month + day + self.digits(3)
        return first17 + id_check(first17)

    # cards
    def _card_number(self) -> str:
        kind = self.r.random()
        if kind < 0.3:
            body = "4" + self.digits(14)
        elif kind < 0.5:
            body = self.r.choice(["51", "52", "53", "54", "55"]) + self.digits(13)
        elif kind < 0.6:
            body = str(self.r.randint(2221, 2720)) + self.digits(11)
        elif kind < 0.75:
            body = self.r.choice(["622202", "622848", "621700", "622588", "623058"]) + self.digits(
                12
            )  # UnionPay, 19 digits
        elif kind < 0.85:
            body = self.r.choice(["622202", "622848", "625807"]) + self.digits(9)  # 16
        elif kind < 0.92:
            body = self.r.choice(["34", "37"]) + self.digits(12)  # Amex 15
        else:
            body = str(self.r.randint(3528, 3589)) + self.digits(11)  # JCB 16
        return body + luhn_check_digit(body)

    def _format_card(self, number: str) -> str:
        style = self.r.random()
        if style < 0.45:
            return number
        if len(number) == 15 and style < 0.8:
            return f"{number[:4]} {number[4:10]} {number[10:]}"
        separator = " " if style < 0.85 else "-"
        return separator.join(number[i : i + 4] for i in range(0, len(number), 4))

    def card(self) -> str:
        return self._format_card(self._card_number())

    def card_bad_luhn(self) -> str:
        number = self._card_number()
        wrong = str((int(number[-1]) + self.r.randint(1, 9)) % 10)
        return self._format_card(number[:-1] + wrong)

    # email
    GIVEN = words("san si wu liu wei fang na min jing li qiang lei jun yang yong yan jie tao")
    FAMILY = words("zhang wang li zhao chen liu yang huang zhou wu xu sun ma zhu hu guo he lin")
    EN_NAMES = words("alice bob carol dave erin frank grace heidi ivan judy mallory olivia")
    DOMAINS = words(
        "example.com acme-corp.cn globex.co.uk qq.com 163.com 126.com corp.example.org "
        "mail.initech.com.cn hooli.io partner.example.net sina.com stark-industries.com "
        "wayne.enterprises umbrella.com.hk gmail.com outlook.com"
    )

    def email(self) -> str:
        style = self.r.random()
        family, given = self.r.choice(self.FAMILY), self.r.choice(self.GIVEN)
        if style < 0.35:
            local = f"{family}.{given}"
        elif style < 0.55:
            local = f"{given}{family}{self.r.randint(1, 99)}"
        elif style < 0.7:
            local = f"{family}_{given}"
        elif style < 0.85:
            local = self.r.choice(self.EN_NAMES) + self.r.choice(["", ".smith", "+billing", "99"])
        else:
            local = self.digits(self.r.randint(6, 10), "123456789")  # QQ-number mailbox
        domain = self.r.choice(self.DOMAINS)
        if local.isdigit():
            domain = "qq.com"
        value = f"{local}@{domain}"
        return value.capitalize() if self.r.random() < 0.05 else value

    # IP
    def ipv4(self) -> str:
        kind = self.r.random()
        if kind < 0.3:
            return f"10.{self.r.randint(0, 255)}.{self.r.randint(0, 255)}.{self.r.randint(1, 254)}"
        if kind < 0.55:
            return f"192.168.{self.r.randint(0, 255)}.{self.r.randint(1, 254)}"
        if kind < 0.65:
            return f"172.{self.r.randint(16, 31)}.{self.r.randint(0, 255)}.{self.r.randint(1, 254)}"
        return ".".join(str(self.r.randint(1, 223)) for _ in range(4))

    def ipv6(self) -> str:
        groups = [self.r.randint(0, 0xFFFF) for _ in range(8)]
        if self.r.random() < 0.5:
            groups[0] = 0x2001
            groups[1] = 0x0DB8
            for i in range(2, self.r.randint(3, 6)):
                groups[i] = 0
        if self.r.random() < 0.2:
            groups = [65152, 0, 0, 0, *groups[4:]]
        address = ipaddress.IPv6Address(":".join(f"{g:x}" for g in groups))
        return address.exploded if self.r.random() < 0.15 else address.compressed

    def ip(self) -> str:
        return self.ipv4() if self.r.random() < 0.75 else self.ipv6()

    # passport
    def cn_passport(self) -> str:
        style = self.r.random()
        if style < 0.5:
            return "E" + self.digits(8)
        if style < 0.75:
            return "G" + self.digits(8)
        return "E" + self.r.choice("ABCDEFGHJKLMNPQRSTUVWXYZ") + self.digits(7)

    def foreign_passport(self) -> str:
        style = self.r.random()
        if style < 0.5:
            return self.digits(9, "123456789")  # US (book), UK
        if style < 0.8:
            return self.r.choice("CDEFGHJKLMNPRSTXZ") + self.digits(8)  # US next generation
        return "".join(self.r.choice("ABCDEFGHJKLMNPRSTUVWXYZ") for _ in range(2)) + self.digits(7)

    # SSN
    def ssn_parts(self) -> tuple[str, str, str]:
        while True:
            area = self.r.randint(1, 899)
            if area != 666:
                break
        return f"{area:03d}", f"{self.r.randint(1, 99):02d}", f"{self.r.randint(1, 9999):04d}"

    def ssn(self) -> str:
        return "-".join(self.ssn_parts())

    # IBAN
    IBAN_FORMATS = {
        "DE": "nnnnnnnnnnnnnnnnnn",
        "GB": "aaaannnnnnnnnnnnnn",
        "FR": "nnnnnnnnnnnnnnnnnnnnnnn",
        "NL": "aaaannnnnnnnnn",
        "ES": "nnnnnnnnnnnnnnnnnnnn",
        "IT": "annnnnnnnnnnnnnnnnnnnnn",
        "CH": "nnnnnnnnnnnnnnnnn",
        "BE": "nnnnnnnnnnnn",
        "AT": "nnnnnnnnnnnnnnnn",
        "PL": "nnnnnnnnnnnnnnnnnnnnnnnn",
        "SE": "nnnnnnnnnnnnnnnnnnnn",
        "IE": "aaaannnnnnnnnnnnnn",
    }

    def _iban_compact(self) -> str:
        country = self.r.choice(sorted(self.IBAN_FORMATS))
        bban = "".join(
            self.r.choice(string.ascii_uppercase) if kind == "a" else self.r.choice(string.digits)
            for kind in self.IBAN_FORMATS[country]
        )
        return country + iban_check(country, bban) + bban

    def _format_iban(self, compact: str) -> str:
        if self.r.random() < 0.55:
            return " ".join(compact[i : i + 4] for i in range(0, len(compact), 4))
        return compact

    def iban(self) -> str:
        return self._format_iban(self._iban_compact())

    def iban_bad(self) -> str:
        compact = self._iban_compact()
        check = int(compact[2:4])
        wrong = f"{(check + self.r.randint(1, 50)) % 97 + 2:02d}"
        if wrong == compact[2:4]:
            wrong = f"{(check + 51) % 97 + 2:02d}"
        return self._format_iban(compact[:2] + wrong + compact[4:])

    # secrets
    URLSAFE = string.ascii_letters + string.digits + "-_"

    def _b64url(self, obj: dict) -> str:
        raw = json.dumps(obj, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    def jwt(self) -> str:
        header = {"alg": self.r.choice(["HS256", "RS256", "ES256"]), "typ": "JWT"}
        payload = {"sub": str(self.r.randint(1000, 999999)), "iat": self.r.randint(1.6e9, 1.8e9)}
        if self.r.random() < 0.5:
            payload["name"] = self.r.choice(self.EN_NAMES)
        signature = self.alnum(43, self.URLSAFE)
        return f"{self._b64url(header)}.{self._b64url(payload)}.{signature}"

    def pem(self) -> str:
        kind = self.r.choice(["RSA ", "EC ", "", "OPENSSH "])
        lines = [self.alnum(64, string.ascii_letters + string.digits + "+/") for _ in range(3)]
        body = "\n".join(lines) + "\n" + self.alnum(20, string.ascii_letters + string.digits) + "=="
        return f"-----BEGIN {kind}PRIVATE KEY-----\n{body}\n-----END {kind}PRIVATE KEY-----"

    def password(self) -> str:
        symbols = "!@#$%^&*_-+"
        core = self.alnum(self.r.randint(8, 16))
        return core[:3] + self.r.choice(symbols) + core[3:] + self.r.choice(string.digits)

    def provider_key(self) -> str:
        kind = self.r.randrange(10)
        if kind == 0:
            return "sk-proj-" + self.alnum(48, self.URLSAFE)
        if kind == 1:
            return "sk-" + self.alnum(48)
        if kind == 2:
            return "sk-ant-api03-" + self.alnum(93, self.URLSAFE) + "AA"
        if kind == 3:
            return "AKIA" + self.alnum(16, string.ascii_uppercase + string.digits)
        if kind == 4:
            return "ghp_" + self.alnum(36)
        if kind == 5:
            return "github_pat_" + self.alnum(22) + "_" + self.alnum(59)
        if kind == 6:
            return f"xoxb-{self.digits(12)}-{self.digits(13)}-{self.alnum(24)}"
        if kind == 7:
            return "AIza" + self.alnum(35, self.URLSAFE)
        if kind == 8:
            return "sk_live_" + self.alnum(24)
        return "xoxp-" + f"{self.digits(11)}-{self.digits(12)}-{self.alnum(32)}"

    def connection_string(self) -> str:
        user = self.r.choice(["app", "admin", "etl_user", "report", "cadre", "svc_order"])
        password = self.alnum(self.r.randint(10, 18))
        host = self.r.choice(
            [
                "db.internal",
                "10.2.3.4",
                "pg-primary.acme.local",
                "cluster0.ab1cd.mongodb.net",
                "redis.prod.svc",
                "mq.acme.cn",
            ]
        )
        kind = self.r.randrange(6)
        if kind == 0:
            return f"postgres://{user}:{password}@{host}:5432/orders"
        if kind == 1:
            return f"postgresql://{user}:{password}@{host}/analytics?sslmode=require"
        if kind == 2:
            return f"mysql://{user}:{password}@{host}:3306/crm"
        if kind == 3:
            return f"mongodb+srv://{user}:{password}@{host}/prod?retryWrites=true"
        if kind == 4:
            return f"redis://:{password}@{host}:6379/0"
        return f"amqp://{user}:{password}@{host}:5672/vhost"


# --- sentences ------------------------------------------------------------------------------

Piece = tuple[str, str | None]  # (text, entity type or None)


class Line:
    def __init__(self):
        self.text = ""
        self.entities: list[dict] = []

    def add(
        self, text: str, entity_type: str | None = None, value_span: tuple[int, int] | None = None
    ):
        start = len(self.text)
        self.text += text
        if entity_type:
            if value_span is None:
                value_span = (0, len(text))
            self.entities.append(
                {"start": start + value_span[0], "end": start + value_span[1], "type": entity_type}
            )
        return self

    def as_json(self) -> str:
        return json.dumps({"text": self.text, "entities": self.entities}, ensure_ascii=False)


def fill(template: str, slots: dict[str, Callable[[], tuple[str, str | None]]]) -> Line:
    """`template` with [[SLOT]] markers; each slot gives (value, type-or-None)."""
    line = Line()
    rest = template
    while "[[" in rest:
        before, _, after = rest.partition("[[")
        name, _, rest = after.partition("]]")
        line.add(before)
        value, entity_type = slots[name]()
        line.add(value, entity_type)
    line.add(rest)
    return line


POSITIVE_TEMPLATES = {
    "CN_PHONE": [
        "手机[[V]]，有事随时联系",
        "请拨打[[V]]找王经理",
        "客户联系电话：[[V]]",
        "我的电话是[[V]]，晚上也可以打",
        "联系人：张三 [[V]]",
        "Call me at [[V]] after 3pm.",
        "Customer hotline: [[V]]",
        "麻烦把合同寄给李女士，电话[[V]]。",
        "新号码[[V]]，旧号停用了",
        "Tel [[V]] / Fax none",
        "紧急联系人电话[[V]]（母亲）",
        "座机[[V]]转人事部",
        "[[V]]是供应商对接人的号码",
        "Please update the CRM: phone=[[V]]",
    ],
    "CN_ID": [
        "身份证号[[V]]",
        "身份证：[[V]]，请核对",
        "Applicant ID card [[V]] verified.",
        "员工张伟的身份证号码是[[V]]。",
        "请帮我查一下[[V]]这个身份证的社保记录",
        "证件号码 [[V]]",
        "ID: [[V]] (PRC resident)",
        "居民身份证[[V]]已过期，需要更新",
    ],
    "PAYMENT_CARD": [
        "卡号[[V]]，请尽快转账",
        "银行卡：[[V]]",
        "Please charge card [[V]] for the renewal.",
        "报销打到我的招商银行卡[[V]]",
        "Card number: [[V]] exp 09/28",
        "信用卡[[V]]的账单有问题",
        "客户用[[V]]付的款",
        "payment method: [[V]]",
    ],
    "EMAIL": [
        "邮箱[[V]]",
        "请发邮件到[[V]]确认",
        "Send the deck to [[V]] by Friday.",
        "联系邮箱：[[V]]。",
        "cc [[V]] on the thread",
        "我的工作邮箱是[[V]]，私人邮箱不常看",
        "Reply-To: [[V]]",
        "把发票发给[[V]]就行",
    ],
    "IP_ADDRESS": [
        "服务器[[V]]宕机了",
        "请把[[V]]加入白名单",
        "ssh root@[[V]] 登录不上",
        "The gateway at [[V]] is dropping packets.",
        "登录IP：[[V]]，异地登录告警",
        "ping [[V]] times out from the office VPN",
        "DNS resolves to [[V]]",
        "源地址[[V]]访问频繁",
    ],
    "PASSPORT": [
        "护照号[[V]]",
        "护照号码：[[V]]，有效期至2030年",
        "出差人员护照[[V]]，请订机票",
        "Passport No. [[V]]",
        "passport number [[V]], expires 2029",
        "他的护照是[[V]]吗？",
    ],
    "US_SSN": [
        "SSN [[V]]",
        "Employee SSN: [[V]] for the W-2.",
        "social security number [[V]]",
        "美国同事的SSN是[[V]]",
        "Please verify [[V]] against the payroll file.",
    ],
    "IBAN": [
        "IBAN [[V]]",
        "请汇款到IBAN：[[V]]",
        "Beneficiary IBAN: [[V]], BIC DEUTDEFF",
        "Wire the deposit to [[V]] before Monday.",
        "欧洲供应商账户[[V]]",
    ],
}

SECRET_TEMPLATES: list[tuple[str, str]] = [
    # (template, how the SECRET is made: "token" whole / "kv" value only)
    ("OPENAI_API_KEY=[[V]]", "token"),
    ("我把key发你：[[V]]", "token"),
    ("用这个 key 调一下接口 [[V]] 测完就删", "token"),
    ("export ANTHROPIC_API_KEY=[[V]]", "token"),
    ("token是[[V]]，别外传", "token"),
    ("Authorization: Bearer [[JWT]]", "jwt"),
    ("这个JWT解一下：[[JWT]]", "jwt"),
    ("cookie session=[[JWT]]; path=/", "jwt"),
    ("[[PEM]]", "pem"),
    ("私钥如下：\n[[PEM]]\n用完删掉", "pem"),
    ("DATABASE_URL=[[CONN]]", "conn"),
    ("连接串：[[CONN]]", "conn"),
    ("the ETL job uses [[CONN]] right now", "conn"),
    ("password=[[PW]]", "kv"),
    ("passwd: [[PW]]", "kv"),
    ('{"username": "admin", "password": "[[PW]]"}', "kv"),
    ('"secret": "[[PW]]"', "kv"),
    ("api_key=[[PW]]", "kv"),
    ("DB_PASSWORD='[[PW]]'", "kv"),
    ("数据库密码：[[PW]]，请勿外传", "kv"),
    ("测试环境的密码是[[PW]] 记得改", "kv"),
    ("mysql --password=[[PW]] -h db.internal", "kv"),
    ("client_secret: [[PW]]", "kv"),
    ("aws_secret_access_key = [[AWS]]", "kv_aws"),
]

NEGATIVE_TEMPLATES = [
    "订单号[[ORDER]]已发货",
    "Order #[[ORDER]] shipped yesterday.",
    "时间戳[[TS]]对应的日志找不到",
    "created_at=[[TS]]",
    "版本号 [[VERSION]] 已发布",
    "Upgrade to version [[VERSION]] before Friday.",
    "固件版本：[[VERSION]]",
    "commit [[HASH]] fixes the bug",
    "文件sha256：[[SHA]]",
    "request_id=[[UUID]]",
    "trace [[UUID]] 超时",
    "卡号[[BADCARD]]校验失败",
    "Card [[BADCARD]] was declined (invalid number).",
    "身份证号[[BADID]]格式不对",
    "这个身份证[[BADDATE]]出生日期不存在",
    "工号[[EMPNO]]，部门研发二部",
    "快递单号[[TRACK]]",
    "发票号码[[INVOICE]]",
    "会议号 [[MEETING]]",
    "IBAN [[BADIBAN]] was rejected by the bank",
    "SSN [[BADSSN]] is not a valid number",
    "password=<your_password>",
    "api_key=${OPENAI_API_KEY}",
    "token: xxx",
    "Forgot my password: what should I do?",
    "max_tokens=1024, temperature=0.2",
    "请重置密码后登录",
    "the secret to good sales is listening",
    "pk_live_[[PK]] is the publishable key (safe to share)",
    "用 sk-learn 训练的模型",
    "MAC 地址 [[MAC]]",
    "会议 [[TIME]] 开始",
    "金额 [[AMOUNT]] 元",
    "邮编[[ZIP]]",
    "user@localhost cannot receive mail",
    "@[[HANDLE]] 帮忙看一下",
    "电话号码 [[SHORTPHONE]] 少了一位",
    "编号[[LONGNUM]]",
    "日期 [[DATE]]",
    "see section 1.2.3 of the contract",
    "PR #[[PR]] merged",
    "坐标 [[COORD]]",
]


def negative_slots(m: Maker) -> dict[str, Callable[[], tuple[str, str | None]]]:
    r = m.r

    def none(make):
        return lambda: (make(), None)

    return {
        "ORDER": none(lambda: "20" + str(r.randint(20, 26)) + m.digits(r.choice((12, 14, 16)))),
        "TS": none(
            lambda: (
                str(r.randint(1_600_000_000, 1_800_000_000))
                + ("" if r.random() < 0.5 else m.digits(3))
            )
        ),
        "VERSION": none(lambda: ".".join(str(r.randint(0, 20)) for _ in range(4))),
        "HASH": none(lambda: "".join(r.choice("0123456789abcdef") for _ in range(40))),
        "SHA": none(lambda: "".join(r.choice("0123456789abcdef") for _ in range(64))),
        "UUID": none(
            lambda: "-".join(
                "".join(r.choice("0123456789abcdef") for _ in range(n)) for n in (8, 4, 4, 4, 12)
            )
        ),
        "BADCARD": none(m.card_bad_luhn),
        "BADID": none(m.cn_id_bad_check),
        "BADDATE": none(m.cn_id_bad_date),
        "EMPNO": none(lambda: m.digits(r.choice((6, 7, 8)), "123456789")),
        "TRACK": none(lambda: r.choice(["SF", "YT", "JD"]) + m.digits(12)),
        "INVOICE": none(lambda: m.digits(r.choice((8, 10)), "123456789")),
        "MEETING": none(lambda: f"{m.digits(3, '123456789')} {m.digits(3)} {m.digits(3)}"),
        "BADIBAN": none(m.iban_bad),
        "BADSSN": none(
            lambda: (
                r.choice(["000", "666", "9" + m.digits(2)])
                + "-"
                + f"{r.randint(1, 99):02d}-{r.randint(1, 9999):04d}"
            )
        ),
        "PK": none(lambda: m.alnum(24)),
        "MAC": none(lambda: ":".join(f"{r.randint(0, 255):02x}" for _ in range(6))),
        "TIME": none(lambda: f"{r.randint(8, 20)}:{r.randint(0, 59):02d}:{r.randint(0, 59):02d}"),
        "AMOUNT": none(lambda: f"{r.randint(1, 999_999):,}.{r.randint(0, 99):02d}"),
        "ZIP": none(lambda: m.digits(6, "123456789")),
        "HANDLE": none(lambda: r.choice(m.EN_NAMES)),
        "SHORTPHONE": none(lambda: r.choice(m.MOBILE_PREFIXES) + m.digits(7)),
        "LONGNUM": none(lambda: "12" + m.digits(9)),
        "DATE": none(
            lambda: f"{r.randint(2000, 2030)}-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}"
        ),
        "PR": none(lambda: str(r.randint(10, 99999))),
        "COORD": none(lambda: f"{r.uniform(20, 50):.6f}, {r.uniform(80, 130):.6f}"),
    }


def secret_line(m: Maker, template: str, kind: str) -> Line:
    def token():
        return m.provider_key(), "SECRET"

    slots = {
        "V": token,
        "JWT": lambda: (m.jwt(), "SECRET"),
        "PEM": lambda: (m.pem(), "SECRET"),
        "CONN": lambda: (m.connection_string(), "SECRET"),
        "PW": lambda: (m.password(), "SECRET"),
        "AWS": lambda: (m.alnum(40, string.ascii_letters + string.digits + "/+"), "SECRET"),
    }
    return fill(template, slots)


def positive_line(m: Maker, entity_type: str) -> Line:
    makers = {
        "CN_PHONE": m.cn_phone,
        "CN_ID": m.cn_id,
        "PAYMENT_CARD": m.card,
        "EMAIL": m.email,
        "IP_ADDRESS": m.ip,
        "US_SSN": m.ssn,
        "IBAN": m.iban,
    }
    template = m.r.choice(POSITIVE_TEMPLATES[entity_type])
    if entity_type == "PASSPORT":
        use_cn = "护照" in template or m.r.random() < 0.4
        make = m.cn_passport if use_cn else m.foreign_passport
        return fill(template, {"V": lambda: (make(), "PASSPORT")})
    return fill(template, {"V": lambda: (makers[entity_type](), entity_type)})


MIXED_TEMPLATES = [
    "客户王磊，手机[[CN_PHONE]]，邮箱[[EMAIL]]，身份证[[CN_ID]]，请录入CRM。",
    "Contact: [[EMAIL]] / [[CN_PHONE]]; card on file [[PAYMENT_CARD]].",
    "出差申请：护照[[PASSPORT]]，联系电话[[CN_PHONE]]，报销卡[[PAYMENT_CARD]]",
    "登录异常：IP [[IP_ADDRESS]]，账号[[EMAIL]]，已锁定",
    "Vendor onboarding — IBAN [[IBAN]], contact [[EMAIL]], phone [[CN_PHONE]].",
    "US hire paperwork: SSN [[US_SSN]], email [[EMAIL]]",
    "把[[CN_PHONE]]和[[EMAIL]]都加到通讯录里",
    "身份证[[CN_ID]]和银行卡[[PAYMENT_CARD]]已经提交给财务",
    "从[[IP_ADDRESS]]连过来的请求带着[[EMAIL]]的session",
    "订单号[[ORDER]]的收货人电话[[CN_PHONE]]，请尽快发货",
    "版本 [[VERSION]] 部署在 [[IP_ADDRESS]] 上",
    "交易流水[[ORDER]]，卡号[[PAYMENT_CARD]]，金额[[AMOUNT]]元",
    "身份证[[BADID]]不对，正确的是[[CN_ID]]",
    "卡号[[BADCARD]]输错了，应该是[[PAYMENT_CARD]]",
    "request_id=[[UUID]] user=[[EMAIL]] ip=[[IP_ADDRESS]]",
    "电话[[CN_PHONE]]邮箱[[EMAIL]]地址[[IP_ADDRESS]]",
]


def mixed_line(m: Maker) -> Line:
    template = m.r.choice(MIXED_TEMPLATES)
    slots = dict(negative_slots(m))
    for entity_type in POSITIVE_TEMPLATES:
        make = {
            "CN_PHONE": m.cn_phone,
            "CN_ID": m.cn_id,
            "PAYMENT_CARD": m.card,
            "EMAIL": m.email,
            "IP_ADDRESS": m.ip,
            "US_SSN": m.ssn,
            "IBAN": m.iban,
            "PASSPORT": m.cn_passport,
        }[entity_type]
        slots[entity_type] = lambda make=make, t=entity_type: (make(), t)
    return fill(template, slots)


def negative_line(m: Maker) -> Line:
    return fill(m.r.choice(NEGATIVE_TEMPLATES), negative_slots(m))


def generate(seed: int = SEED) -> list[Line]:
    m = Maker(random.Random(seed))
    lines: list[Line] = []
    for entity_type in POSITIVE_TEMPLATES:
        count = 320 if entity_type in ("CN_PHONE", "EMAIL", "CN_ID", "PAYMENT_CARD") else 220
        lines.extend(positive_line(m, entity_type) for _ in range(count))
    for _ in range(420):
        template, kind = m.r.choice(SECRET_TEMPLATES)
        lines.append(secret_line(m, template, kind))
    lines.extend(mixed_line(m) for _ in range(450))
    lines.extend(negative_line(m) for _ in range(700))
    m.r.shuffle(lines)
    return lines + format_lines()


# --- formats (own random stream, appended after the main corpus) ------------------------------

FULL_WIDTH = str.maketrans("0123456789-+X", "０１２３４５６７８９－＋Ｘ")
PW_SYMBOLS = "!@#$%^&*_-+"
AREAS_IN_BRACKETS = ("010", "021", "0755", "0571")
LETTER_PAIRS = tuple(a + b for a in string.ascii_uppercase for b in string.ascii_uppercase)


def id15(m: Maker) -> str:
    """First-generation 15-digit ID: area code, YYMMDD (19YY), 3-digit sequence; no check."""
    birth = m._birth()
    while not birth.startswith("19"):
        birth = m._birth()
    return m.r.choice(m.DIVISIONS) + birth[2:] + m.digits(3)


def imei(m: Maker) -> str:
    body = m.r.choice(["35", "86", "01"]) + m.digits(12)
    return body + luhn_check_digit(body)


def pgp_block(m: Maker) -> str:
    alphabet = string.ascii_letters + string.digits + "+/"
    lines = [m.alnum(64, alphabet) for _ in range(m.r.randint(2, 5))]
    checksum = "=" + m.alnum(4, alphabet)
    body = "\n".join(lines)
    return (
        f"-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n{body}\n{checksum}\n"
        "-----END PGP PRIVATE KEY BLOCK-----"
    )


def short_password(m: Maker) -> str:
    """5-7 characters, at least three classes (upper, lower, symbol, digit): `Ms@#1`."""
    core = m.r.choice(string.ascii_uppercase) + m.r.choice(string.ascii_lowercase)
    tail = "".join(m.r.choice(PW_SYMBOLS + string.digits) for _ in range(m.r.randint(2, 4)))
    return core + m.r.choice(PW_SYMBOLS) + tail + m.r.choice(string.digits)


def random_letters(m: Maker, n: int) -> str:
    """Mixed-case letters, at least a third upper case (a generated client secret)."""
    while True:
        value = "".join(m.r.choice(string.ascii_letters) for _ in range(n))
        if sum(c.isupper() for c in value) * 3 >= n and sum(c.islower() for c in value) >= 2:
            return value


def hf_token(m: Maker) -> str:
    return "hf_" + random_letters(m, 34)


def unsigned_jwt(m: Maker) -> str:
    header = m._b64url({"alg": "none"})
    payload = m._b64url({"sub": str(m.r.randint(1, 99999)), "iat": m.r.randint(1.6e9, 1.8e9)})
    return f"{header}.{payload}."


def iban_dashes(m: Maker) -> str:
    compact = m._iban_compact()
    return "-".join(compact[i : i + 4] for i in range(0, len(compact), 4))


def service_number(m: Maker) -> str:
    body = m.r.choice(["400", "800"]) + m.digits(7, "123456789")
    style = m.r.random()
    if style < 0.5:
        return body
    if style < 0.75:
        return f"{body[:3]}-{body[3:7]}-{body[7:]}"
    return f"{body[:4]}-{body[4:7]}-{body[7:]}"


def mobile_digits(m: Maker) -> str:
    return m.r.choice(m.MOBILE_PREFIXES) + m.digits(8)


def card_double_space(m: Maker) -> str:
    number = m._card_number()
    while len(number) != 16:
        number = m._card_number()
    return "  ".join(number[i : i + 4] for i in range(0, 16, 4))


def card_6_rest(m: Maker) -> str:
    """A 19-digit UnionPay card as BIN + account (6-13), or an 18-digit one (6-12)."""
    if m.r.random() < 0.5:
        number = m._card_number()
        while len(number) != 19:
            number = m._card_number()
    else:
        body = m.r.choice(["622202", "622848", "621700"]) + m.digits(11)
        number = body + luhn_check_digit(body)
    return f"{number[:6]} {number[6:]}"


FORMAT_TEMPLATES: list[tuple[str, dict[str, Callable[[Maker], str]], str | None]] = [
    # (template with [[V]], {slot: maker}, entity type of V or None for a near-miss)
    ("客服热线[[V]]，工作日9点到18点", {"V": service_number}, "CN_PHONE"),
    ("Hotline: [[V]]", {"V": service_number}, "CN_PHONE"),
    ("手机[[V]]（带国家码）", {"V": lambda m: "86" + mobile_digits(m)}, "CN_PHONE"),
    (
        "手机 [[V]]",
        {"V": lambda m: (lambda d: f"{d[:3]}.{d[3:7]}.{d[7:]}")(mobile_digits(m))},
        "CN_PHONE",
    ),
    ("电话[[V]]，请回电", {"V": lambda m: mobile_digits(m).translate(FULL_WIDTH)}, "CN_PHONE"),
    (
        "电话：[[V]]",
        {"V": lambda m: (lambda d: f"{d[:3]}－{d[3:7]}－{d[7:]}")(mobile_digits(m))},
        "CN_PHONE",
    ),
    (
        "电话：[[V]]",
        {"V": lambda m: (lambda d: f"{d[:3]}\u3000{d[3:7]}\u3000{d[7:]}")(mobile_digits(m))},
        "CN_PHONE",
    ),
    (
        "前台[[V]]转总机",
        {"V": lambda m: f"（{m.r.choice(AREAS_IN_BRACKETS)}）{m.digits(8, '2345678')}"},
        "CN_PHONE",
    ),
    ("身份证号：[[V]]。", {"V": lambda m: m.cn_id().upper().translate(FULL_WIDTH)}, "CN_ID"),
    ("老身份证号[[V]]（15位）", {"V": id15}, "CN_ID"),
    ("ID card (old format) [[V]]", {"V": id15}, "CN_ID"),
    (
        "银行卡号：[[V]]",
        {"V": lambda m: m._card_number().translate(FULL_WIDTH)},
        "PAYMENT_CARD",
    ),
    ("card [[V]]", {"V": card_double_space}, "PAYMENT_CARD"),
    ("银行卡[[V]]", {"V": card_6_rest}, "PAYMENT_CARD"),
    ("iban: [[V]]", {"V": lambda m: m._iban_compact().lower()}, "IBAN"),
    ("IBAN [[V]]", {"V": iban_dashes}, "IBAN"),
    (
        "Numéro de passeport : [[V]]",
        {"V": lambda m: m.digits(2) + m.r.choice(LETTER_PAIRS) + m.digits(5)},
        "PASSPORT",
    ),
    (
        "Reisepass Nr. [[V]]",
        {"V": lambda m: m.r.choice("CFGHJK") + m.alnum(8, "CFGHJKLMNPRTVWXYZ0123456789")},
        "PASSPORT",
    ),
    ("gpg导出的私钥：\n[[V]]", {"V": pgp_block}, "SECRET"),
    ("登录密码是：[[V]]", {"V": lambda m: m.password()}, "SECRET"),
    ("账号 root 密码 [[V]]", {"V": lambda m: m.password()}, "SECRET"),
    ("服务器[[IP]]，账号admin，密码[[V]]", {"V": lambda m: m.password()}, "SECRET"),
    ("The password for the VPN is [[V]]", {"V": lambda m: m.password()}, "SECRET"),
    ("the password to the guest wifi is [[V]]", {"V": lambda m: m.password()}, "SECRET"),
    ("我把key先贴这里：[[V]]", {"V": hf_token}, "SECRET"),
    ("client_secret: [[V]]", {"V": lambda m: random_letters(m, m.r.randint(20, 32))}, "SECRET"),
    ("passwd: [[V]]", {"V": short_password}, "SECRET"),
    ("mysql -h db.internal -u root -p[[V]] crm", {"V": lambda m: m.password()}, "SECRET"),
    (
        "QQ邮箱SMTP授权码：[[V]]",
        {"V": lambda m: "".join(m.r.choice(string.ascii_lowercase) for _ in range(16))},
        "SECRET",
    ),
    ("unsigned jwt [[V]]", {"V": unsigned_jwt}, "SECRET"),
    # near-misses
    ("密码错误，请重试", {}, None),
    ("密码重置链接已发送到您的邮箱", {}, None),
    ("请通过密码找回功能重新设置", {}, None),
    ("密码长度8-16位，需包含字母和数字", {}, None),
    ("密码使用SHA256加密存储", {}, None),
    ("The password for this account is required", {}, None),
    ("图标文件 icon-home@2x.png 和 banner@2x.jpg 已上传", {}, None),
    ("订单号：[[N]]（系统生成）", {"N": mobile_digits}, None),
    ("零件编号 [[N]] 缺货", {"N": lambda m: m.ssn()}, None),
    (
        "港澳通行证[[N]]，不是护照",
        {"N": lambda m: m.r.choice("CHM") + m.digits(8)},
        None,
    ),
    ("设备IMEI [[N]] 已登记", {"N": imei}, None),
]


def passport_and_ssn(m: Maker) -> Line:
    """The nearest keyword before a bare 9-digit number decides its type."""
    passport = m.digits(9, "123456789")
    ssn_digits = "".join(m.ssn_parts())
    if m.r.random() < 0.5:
        template = "SSN [[S]], passport [[P]], email [[E]]"
        slots = {"S": lambda: (m.ssn(), "US_SSN")}
    else:
        template = "passport [[P]], SSN [[S]]"
        slots = {"S": lambda: (ssn_digits, "US_SSN")}
    slots["P"] = lambda: (passport, "PASSPORT")
    slots["E"] = lambda: (m.email(), "EMAIL")
    return fill(template, slots)


def format_lines(seed: int = SEED + 1, count: int = 440) -> list[Line]:
    m = Maker(random.Random(seed))
    lines: list[Line] = []
    for index in range(count):
        if index % 12 == 11:
            lines.append(passport_and_ssn(m))
            continue
        template, makers, entity_type = m.r.choice(FORMAT_TEMPLATES)
        slots = {name: (lambda make=make: (make(m), None)) for name, make in makers.items()}
        if "V" in makers:
            slots["V"] = lambda make=makers["V"], t=entity_type: (make(m), t)
        slots["IP"] = lambda: (m.ipv4(), "IP_ADDRESS")
        lines.append(fill(template, slots))
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args()
    lines = generate(args.seed)
    args.out.write_text("".join(line.as_json() + "\n" for line in lines), encoding="utf-8")
    print(f"wrote {len(lines)} lines to {args.out}")


if __name__ == "__main__":
    main()
