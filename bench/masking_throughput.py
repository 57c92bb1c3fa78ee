"""Masking throughput and latency per ~500-character message: Cadre vs plain Presidio.

    .venv/bin/python bench/masking_throughput.py [--data bench/data/masking_corpus.jsonl]
                                                 [--messages 1000] [--chars 500]

Messages are built deterministically by joining corpus lines (Chinese, English, mixed; with and
without sensitive data) until each is about `--chars` characters. Both engines analyze the same
messages in the same run, after a warm-up:

- cadre: `MaskingEngine.analyze` (the built-in recognizers, compiled fast path);
- presidio: `AnalyzerEngine` with the no-op NLP engine and Presidio's default predefined
  recognizers (nothing downloaded) — what "just use Presidio" costs.

Each line reports messages/s and p50/p95 wall-clock latency; `cpu_p95_ms` is the same p95 in
thread CPU time, which stays meaningful when other processes compete for the CPU.
"""

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
    args = parser.parse_args(argv)
    messages = build_messages(args.data, args.messages, args.chars)
    average = sum(map(len, messages)) / len(messages)
    print(f"messages={len(messages)} avg_chars={average:.0f}")
    cadre = MaskingEngine()
    presidio = presidio_default_analyzer()
    rows = [
        ("cadre", measure(cadre.analyze, messages)),
        ("presidio_defaults", measure(lambda m: presidio.analyze(m, language="en"), messages)),
    ]
    for name, row in rows:
        print(
            f"{name} msgs_per_s={row['msgs_per_s']:.0f} p50_ms={row['p50_ms']:.3f} "
            f"p95_ms={row['p95_ms']:.3f} cpu_p95_ms={row['cpu_p95_ms']:.3f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
