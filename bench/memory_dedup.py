"""Memory dedup funnel on a generated corpus with known duplicates and near-misses:
compression rate, duplicate recall and false-merge rate, Cadre's funnel side by side with two
baselines in the same run (exact hash only; cosine ≥ 0.92 alone, as MemOS's server does).

    python bench/memory_dedup.py [--groups 60] [--seed 7]

Each group is one fact about one person, written four times into one personal scope:
the canonical sentence, an exact duplicate (case, spacing and punctuation changed), a
paraphrase (a true duplicate), and a near-miss (the same sentence about another person,
a different fact that must stay separate). All groups share the scope, so every write also
meets the other groups' items as candidates. Runs in its own database (default
`cadre_bench_dedup`, created and dropped).
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


def evaluate(args) -> None:
    import numpy as np

    from cadre.memory import embeddings, services
    from cadre.memory.models import Memory
    from cadre.memory.services.funnel import memory_dedup
    from cadre.tenancy import services as tenancy
    from cadre.tenancy.actors import member_actor

    _, owner = tenancy.organization_create(
        name="Dedup bench", slug="dedup-bench", owner_email="bench@dedup.test", password=None
    )
    actor = member_actor(owner)
    items = corpus(args.groups, args.seed)
    model = embeddings.active_model()
    provider = embeddings.provider_for(model)
    vectors = np.array(provider.embed([item["text"] for item in items]), dtype=float)

    for item in items:
        memory = services.memory_add(
            actor=actor,
            scope="user",
            scope_id=owner.pk,
            kind="fact",
            content=item["text"],
            source_kind="user_statement",
        )
        item["memory"] = memory.pk
        if getattr(memory, "dedup_decision", "") == "exact_duplicate":
            item["outcome"] = "merged"
            continue
        memory_dedup(memory=memory)
        item["outcome"] = None  # read back below: merged/superseded/active
    status = dict(
        Memory.objects.filter(pk__in=[i["memory"] for i in items]).values_list("pk", "status")
    )
    for item in items:
        if item["outcome"] is None:
            item["outcome"] = "kept" if status[item["memory"]] == Memory.Status.ACTIVE else "merged"

    def report(name: str, merged: list[bool]) -> None:
        writes = len(items)
        duplicates = [
            m
            for item, m in zip(items, merged, strict=True)
            if item["role"] in ("exact", "paraphrase")
        ]
        near = [m for item, m in zip(items, merged, strict=True) if item["role"] == "near_miss"]
        compression = sum(merged) / writes
        print(
            f"{name} compression={compression:.3f} duplicate_recall="
            f"{sum(duplicates) / len(duplicates):.3f} false_merge={sum(near) / len(near):.3f}"
        )

    # Baseline 1: exact hash only.
    report("exact_only", [item["role"] == "exact" for item in items])
    # Baseline 2: cosine ≥ 0.92 against any earlier item (no judge).
    normed = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    cosine_merged = []
    for index, item in enumerate(items):
        earlier = normed[:index]
        best = float((earlier @ normed[index]).max()) if index else 0.0
        cosine_merged.append(
            (item["role"] != "canonical" and best >= 0.92) or item["role"] == "exact"
        )
    report("cosine_0.92", cosine_merged)
    # Cadre: exact → near (cosine ≥ 0.75 among top candidates) → judge.
    report(
        "cadre_funnel",
        [item["outcome"] == "merged" and item["role"] != "canonical" for item in items],
    )
    print(f"writes={len(items)} groups={args.groups}", file=sys.stderr)
    for item in items:
        missed = item["role"] in ("exact", "paraphrase") and item["outcome"] != "merged"
        wrong = item["role"] == "near_miss" and item["outcome"] == "merged"
        if args.verbose and (missed or wrong):
            print(f"  {'missed' if missed else 'false merge'}: {item['text']}", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", type=int, default=60)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--database", default="cadre_bench_dedup")
    parser.add_argument("--verbose", action="store_true", help="list misses and false merges")
    args = parser.parse_args()

    import django

    django.setup()
    from django.db import connection
    from django.test.utils import setup_databases, teardown_databases

    connection.settings_dict["TEST"]["NAME"] = args.database
    old_config = setup_databases(verbosity=0, interactive=False, serialized_aliases=set())
    try:
        evaluate(args)
    finally:
        teardown_databases(old_config, verbosity=0)


if __name__ == "__main__":
    main()
