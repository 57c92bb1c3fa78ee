"""Memory dedup funnel: false merges (different facts merged) and missed merges (the same fact
kept twice) in English, Chinese and mixed Chinese/English, under the default embedding model
(multilingual-e5-small) and all-MiniLM-L6-v2 side by side in one run, each in its own
organization.

    python bench/memory_dedup.py [--groups 60] [--seed 7] [--models e5,minilm] [--verbose]

English (generated): each group is one fact about one person, written four times into one
personal scope: the canonical sentence, an exact duplicate (case, spacing and punctuation
changed), a paraphrase (a true duplicate), and a near-miss (the same sentence about another
person, a different fact that must stay separate). All groups share the scope, so every write
also meets the other groups' items as candidates. Two baselines on the same items: exact hash
only, and cosine ≥ 0.92 alone (on the model's scale, as MemOS's server does).

Chinese and mixed (hand-written for this bench, not from any data set: `ZH_PAIRS`,
`MIXED_PAIRS`): pairs of statements by one person, written one after the other, each pair
alone in the scope. "same" pairs are one fact reworded or given a new value (should merge or
supersede); "different" pairs are two facts about the same person with overlapping words
(desks and employee IDs, two allergies, two phones, a manager and a mentor) that must both
stay active.

Runs in its own database (default `cadre_bench_dedup`, created and dropped).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "platform")]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cadre.settings")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LOG_LEVEL", "WARNING")

MODELS = {"e5": "multilingual-e5-small", "minilm": "all-MiniLM-L6-v2"}

PEOPLE = [
    "Li Wei",
    "Zhang San",
    "Wang Fang",
    "Chen Jie",
    "Liu Yang",
    "Zhao Min",
    "Sun Hao",
    "Zhou Lin",
    "Wu Lei",
    "Xu Ning",
    "Ma Lan",
    "Hu Bo",
]
OTHERS = [
    "Tang Yu",
    "Guo Qiang",
    "He Ping",
    "Lin Xue",
    "Luo Kai",
    "Song Jia",
    "Zheng Hua",
    "Feng Rui",
    "Cao Yi",
    "Deng Wen",
    "Peng Tao",
    "Jiang Li",
]
# (canonical, paraphrase) with {p} for the person.
TEMPLATES = [
    (
        "{p} sends the weekly report to the finance team every Monday",
        "Every Monday, {p} sends the finance team the weekly report",
    ),
    ("{p} prefers meetings after 2 pm", "{p} likes meetings to be scheduled after 2 pm"),
    ("{p} works from the Shanghai office", "{p} is based in the Shanghai office"),
    ("{p} needs invoices as PDF attachments", "Invoices for {p} must be sent as PDF attachments"),
    (
        "{p} reviews the sales pipeline on Thursday mornings",
        "On Thursday mornings {p} reviews the sales pipeline",
    ),
    ("{p}每周一把周报发给财务部", "每周一{p}都会把周报发给财务部"),
]

# Hand-written for this bench: (first statement, second statement, expected), where expected
# is "duplicate" or "update" (the same fact: should merge or supersede) or "different" (two
# facts that must both stay active). One person writes both, in that order.
ZH_PAIRS = [
    # the same fact, reworded
    ("我对花生过敏", "我花生过敏", "duplicate"),
    ("我对青霉素过敏", "我青霉素过敏", "duplicate"),
    ("我的工位在 12 楼靠窗的位置", "我的工位在12楼，靠窗", "duplicate"),
    ("我的工号是 SZ20931", "我工号是SZ20931", "duplicate"),
    ("我的直属领导是王芳", "我直属领导是王芳", "duplicate"),
    ("我不吃香菜", "我从来不吃香菜", "duplicate"),
    ("我喜欢喝美式咖啡", "我爱喝美式咖啡", "duplicate"),
    ("我住在北京朝阳区望京", "我家在朝阳区望京", "duplicate"),
    ("我的邮箱是 liwei@example.com", "我的邮箱地址是 liwei@example.com", "duplicate"),
    ("我的生日是 3 月 15 日", "我生日是3月15号", "duplicate"),
    ("我每周五下午把周报发给李伟", "周报我每周五下午发给李伟", "duplicate"),
    ("我下周一到周三在上海出差", "我下周一至周三去上海出差", "duplicate"),
    ("我的紧急联系人是张丽，电话 13700001111", "紧急联系人：张丽，电话13700001111", "duplicate"),
    ("我的办公室座机是 010-88886666", "我办公室的座机是010-88886666", "duplicate"),
    ("我坐飞机喜欢靠过道的座位", "坐飞机时我喜欢靠过道的座位", "duplicate"),
    # the same fact, a new value
    ("我的工位在12楼靠窗", "我的工位搬到了 15 楼", "update"),
    ("我的手机号是 13800138000", "我的手机号换成了 13912345678", "update"),
    ("我的经理是李伟", "我的经理换成了周敏", "update"),
    ("我每周二下午开部门例会", "部门例会改到每周四下午了", "update"),
    ("我有两个孩子", "我有三个孩子", "update"),
    ("我对芒果过敏", "我不再对芒果过敏了", "update"),
    ("我一般早上 9 点到公司", "我一般早上 8 点半到公司", "update"),
    ("客户的预算是 200 万", "客户的预算是 300 万", "update"),
    ("我的车停在 B2 层 C15 车位", "我的车位换到了 B2 层 C20", "update"),
    # different facts about the same person, with overlapping words
    ("我的工位在 12 楼靠窗的位置", "我的工号是 SZ20931", "different"),
    ("我对花生过敏", "我对青霉素过敏", "different"),
    ("我的手机号是 13800138000", "我的座机号是 010-88886666", "different"),
    ("我的手机号是 13800138000", "我的备用手机号是 13912345678", "different"),
    ("我的经理是李伟", "我的导师是李伟", "different"),
    ("我的经理是李伟", "我经理的经理是周敏", "different"),
    ("我喜欢喝美式咖啡", "我喜欢吃川菜", "different"),
    ("我每周二下午开部门例会", "我每周二下午去健身房", "different"),
    ("我住在朝阳区望京", "我在海淀区上班", "different"),
    ("我女儿今年 8 岁", "我儿子今年 5 岁", "different"),
    ("我的工号是 SZ20931", "我的门禁卡号是 88012", "different"),
    ("我的邮箱是 liwei@example.com", "我的个人邮箱是 liwei88@example.com", "different"),
    ("我不吃香菜", "我不吃辣", "different"),
    ("我的生日是 3 月 15 日", "我妻子的生日是 7 月 2 日", "different"),
    ("我在 12 楼开会", "我的工位在 12 楼", "different"),
    ("周报每周五发给李伟", "月报每月底发给李伟", "different"),
    ("我的车停在 B2 层 C15 车位", "我的工位在 B 座 15 楼", "different"),
    ("我对青霉素过敏", "我妈妈对青霉素过敏", "different"),
    ("我的护照号是 E12345678", "我的身份证号是 110101199001011234", "different"),
    ("我的飞书账号是 liwei01", "我的企业微信账号是 liwei01", "different"),
    ("我每天早上 9 点到公司", "我每天晚上 9 点下班", "different"),
    ("我下周一在上海出差", "我下周一在深圳见客户", "different"),
    ("我的直属领导是王芳", "我的人事对接人是王芳", "different"),
    ("我的银行卡尾号是 6789", "我的手机尾号是 6789", "different"),
    ("我不喝酒", "我不喝咖啡", "different"),
]
MIXED_PAIRS = [
    # the same fact, reworded
    ("我的 Slack ID 是 U024BE7LH", "我 Slack 的 ID 是 U024BE7LH", "duplicate"),
    ("我的工位在 Building B 12 楼", "My desk is on floor 12 of Building B", "duplicate"),
    ("我用 VS Code 写 Python", "我写 Python 用 VS Code", "duplicate"),
    ("我的 GitHub 用户名是 lwei-dev", "我的 GitHub username 是 lwei-dev", "duplicate"),
    ("我对 peanuts 过敏", "我 peanuts 过敏", "duplicate"),
    (
        "Weekly report 每周五发给 finance team",
        "每周五把 weekly report 发给 finance team",
        "duplicate",
    ),
    ("我喜欢 dark mode", "我偏好 dark mode", "duplicate"),
    ("我在 Shanghai office 上班", "我在 Shanghai office 工作", "duplicate"),
    ("我的 Jira 项目是 CRM-2024", "我负责的 Jira 项目是 CRM-2024", "duplicate"),
    ("我周三 work from home", "我每周三 work from home", "duplicate"),
    ("My employee ID is SZ20931", "我的 employee ID 是 SZ20931", "duplicate"),
    ("我的 email 是 li.wei@acme.com", "我的 email 地址是 li.wei@acme.com", "duplicate"),
    ("我和 Li Wei 的 1:1 在每周一下午 3 点", "我跟 Li Wei 的 1:1 是每周一下午 3 点", "duplicate"),
    ("我的 laptop 是 MacBook Pro 14", "我用的 laptop 是 MacBook Pro 14", "duplicate"),
    ("I'm allergic to 花生", "我对花生过敏, I'm allergic", "duplicate"),
    # the same fact, a new value
    ("我的 manager 是 Li Wei", "我的 manager 换成了 Zhou Min", "update"),
    ("我的 VPN 账号是 lw2931", "我的 VPN 账号改成了 lw2940", "update"),
    ("我的 iPhone 号码是 13800138000", "我的 iPhone 号码换成 13912345678", "update"),
    ("我的 standup 在每天上午 10 点", "我的 standup 改到每天上午 9 点", "update"),
    ("我的 OKR 是把 NPS 提升到 50", "我的 OKR 是把 NPS 提升到 60", "update"),
    ("我不喝 coffee", "我现在喝 coffee 了", "update"),
    ("我的 PTO 是 12 月 20 日到 1 月 3 日", "我的 PTO 改成 12 月 23 日到 1 月 5 日", "update"),
    ("我的 desk 在 12 楼", "我的 desk 搬到了 15 楼", "update"),
    # different facts about the same person, with overlapping words
    ("我的 Slack ID 是 U024BE7LH", "我的 GitHub ID 是 lwei-dev", "different"),
    ("我对 peanuts 过敏", "我对 penicillin 过敏", "different"),
    ("我的 manager 是 Li Wei", "我的 mentor 是 Li Wei", "different"),
    ("我的工位在 Building B 12 楼", "我的 locker 在 Building B 12 楼", "different"),
    (
        "Weekly report 每周五发给 finance team",
        "Monthly report 每月底发给 finance team",
        "different",
    ),
    ("我的 VPN 账号是 lw2931", "我的 Jenkins 账号是 lw2931", "different"),
    ("我的 standup 在每天上午 10 点", "我的 retro 在每周五上午 10 点", "different"),
    ("我喜欢 dark mode", "我喜欢 dark chocolate", "different"),
    ("我用 VS Code 写 Python", "我用 IntelliJ 写 Java", "different"),
    ("我的 iPhone 号码是 13800138000", "我的 iPad 序列号是 DMPX1234", "different"),
    ("我在 Shanghai office 上班", "我在 Shanghai 有一套房子", "different"),
    ("我的 OKR 是把 NPS 提升到 50", "我们团队的 OKR 是把 churn 降到 5%", "different"),
    ("我周三 work from home", "我周三下午去 client site", "different"),
    ("我的 email 是 li.wei@acme.com", "我的 personal email 是 liwei88@gmail.com", "different"),
    ("我不喝 coffee", "我不喝 bubble tea", "different"),
    ("My employee ID is SZ20931", "我的 badge number 是 88012", "different"),
    ("我的 Jira 项目是 CRM-2024", "我的 Confluence space 是 CRM-2024", "different"),
    ("我和 Li Wei 的 1:1 在每周一下午 3 点", "我和 Zhou Min 的 1:1 在每周三下午 3 点", "different"),
    ("我的 laptop 是 MacBook Pro 14", "我的 monitor 是 Dell U2720Q", "different"),
    ("我的 PTO 是 12 月 20 日到 1 月 3 日", "我老婆的 PTO 是 12 月 20 日到 1 月 3 日", "different"),
    ("我对 lactose 不耐受", "我对 gluten 不耐受", "different"),
    ("我家住在 Pudong 张江", "我公司在 Pudong 张江", "different"),
    ("我的 desk 在 12 楼", "我的 desk phone 分机是 1203", "different"),
]


def corpus(groups: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    pairs = [(t, p) for t in range(len(TEMPLATES)) for p in range(len(PEOPLE))]
    rng.shuffle(pairs)
    items = []
    for group, (template, person) in enumerate(pairs[:groups]):
        canonical, paraphrase = TEMPLATES[template]
        name = PEOPLE[person]
        other = OTHERS[(person + template) % len(OTHERS)]
        text = canonical.format(p=name)
        exact = "  " + text.upper().replace(" ", "  ") + " ."
        items += [
            {"group": group, "role": "canonical", "text": text},
            {"group": group, "role": "exact", "text": exact},
            {"group": group, "role": "paraphrase", "text": paraphrase.format(p=name)},
            {"group": group, "role": "near_miss", "text": canonical.format(p=other)},
        ]
    rng.shuffle(items)
    # The canonical sentence of each group comes first, as a fact is stated before repeated.
    items.sort(key=lambda item: item["role"] != "canonical")
    return items


def write(actor, owner, text: str):
    """One memory through the service, then the dedup funnel as its task would run it."""
    from cadre.memory import services
    from cadre.memory.services.funnel import memory_dedup

    memory = services.memory_add(
        actor=actor,
        scope="user",
        scope_id=owner.pk,
        kind="fact",
        content=text,
        source_kind="user_statement",
    )
    if getattr(memory, "dedup_decision", "") == "exact_duplicate":
        return memory, {"decision": "exact"}
    return memory, memory_dedup(memory=memory)


def organization(key: str, label: str):
    """An organization whose active embedding model is `key`'s, and its owner's actor."""
    from cadre.memory import embeddings
    from cadre.tenancy import services as tenancy
    from cadre.tenancy.actors import member_actor

    organization, owner = tenancy.organization_create(
        name=f"Dedup bench {key} {label}",
        slug=f"dedup-bench-{key}-{label}",
        owner_email=f"bench-{key}-{label}@dedup.test",
        password=None,
    )
    name = MODELS[key]
    model = embeddings.register_model(f"local/{name}", "local", name, 384)
    embeddings.activate(model, organization)
    return organization, owner, member_actor(owner), model


def english(key: str, args) -> dict:
    import numpy as np

    from cadre.memory import embeddings
    from cadre.memory.models import Memory

    _, owner, actor, model = organization(key, "en")
    items = corpus(args.groups, args.seed)
    provider = embeddings.provider_for(model)
    vectors = np.array(provider.embed([item["text"] for item in items]), dtype=float)
    for item in items:
        memory, outcome = write(actor, owner, item["text"])
        item["memory"] = memory.pk
        item["exact"] = outcome["decision"] == "exact"  # folded into the earlier memory
    status = dict(
        Memory.objects.filter(pk__in=[i["memory"] for i in items]).values_list("pk", "status")
    )
    for item in items:
        item["merged"] = item["exact"] or status[item["memory"]] != Memory.Status.ACTIVE

    def rates(name: str, merged: list[bool]) -> dict:
        duplicates = [
            m
            for item, m in zip(items, merged, strict=True)
            if item["role"] in ("exact", "paraphrase")
        ]
        near = [m for item, m in zip(items, merged, strict=True) if item["role"] == "near_miss"]
        return {
            "name": name,
            "compression": sum(merged) / len(items),
            "recall": sum(duplicates) / len(duplicates),
            "false_merge": sum(near) / len(near),
            "false": sum(near),
            "missed": len(duplicates) - sum(duplicates),
            "different": len(near),
            "same": len(duplicates),
        }

    # Baseline: cosine ≥ 0.92 (on this model's scale) against any earlier item, no judge.
    cut = embeddings.similarity_threshold(model, 0.92)
    normed = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    cosine_merged = []
    for index, item in enumerate(items):
        best = float((normed[:index] @ normed[index]).max()) if index else 0.0
        cosine_merged.append(
            (item["role"] != "canonical" and best >= cut) or item["role"] == "exact"
        )
    funnel = rates(
        "cadre_funnel", [item["merged"] and item["role"] != "canonical" for item in items]
    )
    if args.verbose:
        for item in items:
            if item["role"] in ("exact", "paraphrase") and not item["merged"]:
                print(f"  [{key} en] missed: {item['text']}", file=sys.stderr)
            if item["role"] == "near_miss" and item["merged"]:
                print(f"  [{key} en] FALSE MERGE: {item['text']}", file=sys.stderr)
    return {
        "baselines": [
            rates("exact_only", [item["role"] == "exact" for item in items]),
            rates(f"cosine_{cut:.3f}", cosine_merged),
        ],
        "funnel": funnel,
    }


def paired(key: str, label: str, pairs: list[tuple[str, str, str]], args) -> dict:
    """Each pair alone in the scope: write both, read back whether either stopped being active;
    then both are archived so the next pair starts from an empty scope."""
    from cadre.memory.models import Memory

    _, owner, actor, _ = organization(key, label)
    false = missed = same = different = 0
    for first, second, expected in pairs:
        one, _ = write(actor, owner, first)
        two, outcome = write(actor, owner, second)
        statuses = set(
            Memory.objects.filter(pk__in=[one.pk, two.pk]).values_list("status", flat=True)
        )
        merged = statuses != {Memory.Status.ACTIVE}
        Memory.objects.filter(pk__in=[one.pk, two.pk]).update(status=Memory.Status.ARCHIVED)
        similarity = max((c["similarity"] for c in outcome.get("candidates", [])), default=None)
        detail = f"{first} → {second} ({outcome.get('decision')}, cosine {similarity})"
        if expected == "different":
            different += 1
            if merged:
                false += 1
                if args.verbose:
                    print(f"  [{key} {label}] FALSE MERGE: {detail}", file=sys.stderr)
        else:
            same += 1
            if not merged:
                missed += 1
                if args.verbose:
                    print(f"  [{key} {label}] missed {expected}: {detail}", file=sys.stderr)
    return {
        "false_merge": false / different,
        "missed_merge": missed / same,
        "false": false,
        "missed": missed,
        "different": different,
        "same": same,
    }


def evaluate(args) -> None:
    keys = [key.strip() for key in args.models.split(",") if key.strip()]
    results = {}
    for key in keys:
        results[key] = {
            "en": english(key, args),
            "zh": paired(key, "zh", ZH_PAIRS, args),
            "mixed": paired(key, "mixed", MIXED_PAIRS, args),
        }
    print(f"English corpus: {args.groups} groups x 4 writes (seed {args.seed})")
    for key in keys:
        for row in [*results[key]["en"]["baselines"], results[key]["en"]["funnel"]]:
            print(
                f"  {MODELS[key]:<22} {row['name']:<14} compression={row['compression']:.3f} "
                f"duplicate_recall={row['recall']:.3f} false_merge={row['false_merge']:.3f}"
            )
    print("Cadre's funnel per language set (rule judge, no model configured):")
    print(f"  {'set':<8}" + "".join(f"{MODELS[key] + ' false/missed':>44}" for key in keys))
    for label in ("en", "zh", "mixed"):
        cells = []
        for key in keys:
            row = results[key][label]
            if label == "en":
                row = row["funnel"]
                row = {**row, "missed_merge": 1 - row["recall"]}
            cells.append(
                f"{row['false_merge']:.3f} ({row['false']}/{row['different']}) / "
                f"{row['missed_merge']:.3f} ({row['missed']}/{row['same']})"
            )
        print(f"  {label:<8}" + "".join(f"{cell:>44}" for cell in cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", type=int, default=60)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--models", default="e5,minilm", help="comma-separated: e5, minilm")
    parser.add_argument("--database", default="cadre_bench_dedup")
    parser.add_argument("--verbose", action="store_true", help="list misses and false merges")
    args = parser.parse_args()

    import django

    django.setup()
    from django.db import connection
    from django.test.utils import setup_databases, teardown_databases

    from cadre.runtime.database_roles import as_owner

    # As the schema owner, as the test suite does: the application's role may not CREATE
    # DATABASE (and only the owner builds the embedding models' HNSW indexes).
    with as_owner():
        connection.settings_dict["TEST"]["NAME"] = args.database
        old_config = setup_databases(verbosity=0, interactive=False, serialized_aliases=set())
        try:
            evaluate(args)
        finally:
            teardown_databases(old_config, verbosity=0)


if __name__ == "__main__":
    main()
