"""Masking throughput and latency per ~500-character message: Cadre vs plain Presidio.

    .venv/bin/python bench/masking_throughput.py [--data bench/data/masking_corpus.jsonl]
                                                 [--messages 1000] [--chars 500]
                                                 [--directory 2000]

Messages are built deterministically by joining corpus lines (Chinese, English, mixed; with and
without sensitive data) until each is about `--chars` characters. Both engines analyze the same
messages in the same run, after a warm-up:

- cadre: `MaskingEngine.analyze` (the built-in recognizers, compiled fast path);
- presidio: `AnalyzerEngine` with the no-op NLP engine and Presidio's default predefined
  recognizers (nothing downloaded) — what "just use Presidio" costs.

- cadre_directory (with `--directory N`): the same call with an organization whose directory
  has N members (Chinese and Latin names, e-mails, mobiles, IM ids), through the engine's
  organization path. The members are generated in memory and the automaton is built with the
  public `Directory(members)` class, the same object `directory_for()` builds from the
  database; organization rules are left out (none), so no database is needed. About a fifth of
  the messages mention members (`@张伟明`, `cc Weiming Zhang`, their e-mail), the rest none.

Each line reports messages/s and p50/p95 wall-clock latency; `cpu_p95_ms` is the same p95 in
thread CPU time, which stays meaningful when other processes compete for the CPU.
"""

# ruff: noqa: E501 - Chinese names and punctuation are the point

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "platform"), str(ROOT)]
os.environ.setdefault("TLDEXTRACT_PUBLIC_SUFFIX_LIST_URLS", "")

from cadre.governance.masking.engine import MaskingEngine  # noqa: E402
from cadre.governance.masking.presidio import presidio_default_analyzer  # noqa: E402


def build_messages(path: Path, count: int, chars: int, seed: int = 7) -> list[str]:
    texts = [json.loads(line)["text"] for line in path.read_text("utf-8").splitlines() if line]
    rng = random.Random(seed)
    messages = []
    for _ in range(count):
        parts, size = [], 0
        while size < chars:
            piece = rng.choice(texts)
            parts.append(piece)
            size += len(piece) + 1
        messages.append(" ".join(parts)[: chars + 40])
    return messages


SURNAMES = (
    "王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘于蒋蔡余杜叶程"
)
GIVEN = "伟芳娜敏静丽强磊军洋勇艳杰娟涛明超秀霞平刚桂英华建国文辉力永健世广志义兴良海山仁波宁贵福生龙元全"
PINYIN = [
    "wei",
    "fang",
    "na",
    "min",
    "jing",
    "li",
    "qiang",
    "lei",
    "jun",
    "yang",
    "yong",
    "yan",
    "jie",
    "juan",
    "tao",
    "ming",
    "chao",
    "xiu",
    "xia",
    "ping",
    "gang",
    "hua",
    "jian",
    "hui",
]
SURNAMES_LATIN = [
    "Zhang",
    "Wang",
    "Li",
    "Liu",
    "Chen",
    "Yang",
    "Huang",
    "Zhao",
    "Wu",
    "Zhou",
    "Smith",
    "Johnson",
    "Brown",
    "Garcia",
    "Miller",
    "Davis",
    "Martin",
    "Lee",
]
FIRST_LATIN = ["Alice", "Daniel", "Sophie", "Michael", "Emma", "Lucas", "Olivia", "Ethan",
               "Grace", "Henry", "Chloe", "Ryan"]  # fmt: skip


def make_members(count: int, seed: int = 11) -> list[dict]:
    """`count` members as `directory.load_members()` returns them: names (Chinese and Latin)
    and contacts (e-mail, mobile, IM user id)."""
    rng = random.Random(seed)
    members = []
    for index in range(count):
        cn = rng.choice(SURNAMES) + "".join(rng.choice(GIVEN) for _ in range(rng.choice([1, 2, 2])))
        given = "".join(rng.choice(PINYIN) for _ in range(2)).capitalize()
        latin = rng.choice([f"{given} {rng.choice(SURNAMES_LATIN)}",
                            f"{rng.choice(FIRST_LATIN)} {rng.choice(SURNAMES_LATIN)}"])  # fmt: skip
        user = f"{given.lower()}.{index}"
        members.append({
            "names": [cn, latin],
            "contacts": [f"{user}@corp.example.com", f"+86 1{rng.randint(3, 9)}{rng.randint(0, 9)}"
                         f"{rng.randint(10000000, 99999999)}", f"ou_{rng.getrandbits(64):016x}"],
        })  # fmt: skip
    return members


def mention_members(messages: list[str], members: list[dict], seed: int = 13) -> list[str]:
    """About one message in five gets one to three member mentions; the length stays ~the same."""
    rng = random.Random(seed)
    out = []
    for message in messages:
        if rng.random() < 0.2:
            mentions = []
            for _ in range(rng.randint(1, 3)):
                member = rng.choice(members)
                mentions.append(rng.choice([f"@{member['names'][0]} ", f"cc {member['names'][1]}，",
                                            f"发给{member['contacts'][0]} ",
                                            f"{member['names'][0]}说"]))  # fmt: skip
            prefix = "".join(mentions)
            message = prefix + message[: max(0, len(message) - len(prefix))]
        out.append(message)
    return out


def with_directory(engine: MaskingEngine, members: list[dict]):
    """`engine.analyze(text, organization=org)` for an organization whose directory is built
    from `members` in memory, with no organization rules (so no database)."""
    from types import SimpleNamespace

    from cadre.governance.masking import directory as directory_module
    from cadre.governance.masking import rules as rules_module

    started = time.perf_counter()
    built = directory_module.Directory(members)
    build_ms = (time.perf_counter() - started) * 1000
    organization = SimpleNamespace(pk=-1)
    directory_module.directory_for = lambda org: built
    rules_module.rules_for = lambda org: []
    return (lambda message: engine.analyze(message, organization=organization)), build_ms


def measure(analyze, messages: list[str]) -> dict:
    for message in messages[:50]:
        analyze(message)
    wall, cpu = [], []
    started = time.perf_counter()
    for message in messages:
        w0, c0 = time.perf_counter(), time.thread_time()
        analyze(message)
        cpu.append((time.thread_time() - c0) * 1000)
        wall.append((time.perf_counter() - w0) * 1000)
    elapsed = time.perf_counter() - started
    wall.sort()
    cpu.sort()

    def pct(values, fraction):
        return values[min(len(values) - 1, max(0, round(fraction * len(values)) - 1))]

    return {
        "msgs_per_s": len(messages) / elapsed,
        "p50_ms": pct(wall, 0.5),
        "p95_ms": pct(wall, 0.95),
        "cpu_p95_ms": pct(cpu, 0.95),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Masking throughput: Cadre vs Presidio")
    parser.add_argument("--data", type=Path, default=ROOT / "bench/data/masking_corpus.jsonl")
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--chars", type=int, default=500)
    parser.add_argument(
        "--directory",
        type=int,
        default=0,
        metavar="N",
        help="also measure with an organization directory of N members (e.g. 2000)",
    )
    args = parser.parse_args(argv)
    messages = build_messages(args.data, args.messages, args.chars)
    members = make_members(args.directory) if args.directory else []
    if members:
        messages = mention_members(messages, members)
    average = sum(map(len, messages)) / len(messages)
    print(f"messages={len(messages)} avg_chars={average:.0f}")
    cadre = MaskingEngine()
    presidio = presidio_default_analyzer()
    rows = [("cadre", measure(cadre.analyze, messages))]
    if members:
        analyze, build_ms = with_directory(cadre, members)
        hits = sum(any(d.type == "DIRECTORY" for d in analyze(m)) for m in messages)
        print(f"directory members={len(members)} build_ms={build_ms:.0f} messages_with_hits={hits}")
        rows.append(("cadre_directory", measure(analyze, messages)))
    rows.append(
        ("presidio_defaults", measure(lambda m: presidio.analyze(m, language="en"), messages))
    )
    for name, row in rows:
        print(
            f"{name} msgs_per_s={row['msgs_per_s']:.0f} p50_ms={row['p50_ms']:.3f} "
            f"p95_ms={row['p95_ms']:.3f} cpu_p95_ms={row['cpu_p95_ms']:.3f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
