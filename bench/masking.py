"""Precision, recall and latency of the masking engine on a labelled JSONL corpus.

    .venv/bin/python bench/masking.py --data bench/data/masking_corpus.jsonl
    .venv/bin/python bench/masking.py any_labelled_file.jsonl [more.jsonl ...]

Input: any labelled JSONL, one object per line: {"text": "...", "gold": [{"start", "end",
"type"}]} (the key `entities` is read the same way), offsets in Python code points; types from
CN_PHONE, CN_ID, PAYMENT_CARD, EMAIL, IP_ADDRESS, PASSPORT, US_SSN, IBAN, SECRET (other types
are ignored). Several files are scored together as one corpus.

Matching rule: a predicted span is a true positive when its type equals a gold span's type and
the two spans match exactly or overlap with IoU (intersection over union of the character
ranges) >= 0.5; each gold span is matched at most once (best IoU first). Unmatched predictions
are false positives, unmatched gold spans false negatives. Precision and recall are computed
per type over all lines; ALL is micro-averaged over every type. A type with no predictions has
precision 1.000; with no gold spans, recall 1.000.

Output, exactly: one `TYPE precision=0.xxx recall=0.xxx` line per type, one `ALL ...` line,
then `latency p50_ms=… p95_ms=…` (wall-clock time of each line's `analyze` call; `--cpu-time`
measures the thread's CPU time instead, which is what to use on a loaded machine).

`--strict` adds, on the same lines, the measure that says whether anything leaks. IoU ≥ 0.5
counts a value masked by half as a hit, and the other half is sent to the model. Strictly:

- `leak_free`: the share of gold values of the type whose every character lies inside a
  predicted span of that type (several adjacent spans of the type may cover it together);
- `leak_free_any`: the same with predicted spans of any type (a value masked as another type
  does not leak either, it is only labelled wrong);
- `strict_precision`: the share of predicted spans of the type that cover a whole gold value of
  that type (a span cutting a value in two, or on text that is no value, is wrong).

`ALL` pools every type. `--errors N` then prints the lines with a leak or a strict false
positive instead of the IoU mismatches.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "platform"), str(ROOT)]

from cadre.governance.masking.engine import get_engine  # noqa: E402
from cadre.governance.masking.recognizers import ENTITY_TYPES  # noqa: E402

IOU_THRESHOLD = 0.5


def iou(a: tuple[int, int], b: tuple[int, int]) -> float:
    inter = min(a[1], b[1]) - max(a[0], b[0])
    if inter <= 0:
        return 0.0
    return inter / (max(a[1], b[1]) - min(a[0], b[0]))


def match(gold: list[dict], predicted: list[dict]) -> tuple[Counter, Counter, Counter]:
    """True positives, false positives and false negatives per type for one line."""
    tp, fp, fn = Counter(), Counter(), Counter()
    pairs = []
    for gi, g in enumerate(gold):
        for pi, p in enumerate(predicted):
            if g["type"] == p["type"]:
                score = iou((g["start"], g["end"]), (p["start"], p["end"]))
                if score >= IOU_THRESHOLD:
                    pairs.append((score, gi, pi))
    used_gold, used_pred = set(), set()
    for _, gi, pi in sorted(pairs, key=lambda pair: (-pair[0], pair[1], pair[2])):
        if gi not in used_gold and pi not in used_pred:
            used_gold.add(gi)
            used_pred.add(pi)
            tp[gold[gi]["type"]] += 1
    for gi, g in enumerate(gold):
        if gi not in used_gold:
            fn[g["type"]] += 1
    for pi, p in enumerate(predicted):
        if pi not in used_pred:
            fp[p["type"]] += 1
    return tp, fp, fn


def covered(span: tuple[int, int], cover: list[tuple[int, int]]) -> bool:
    """Every character of `span` lies inside the union of the `cover` spans."""
    position = span[0]
    for start, end in sorted(cover):
        if start > position:
            break
        position = max(position, end)
        if position >= span[1]:
            return True
    return position >= span[1]


def strict_match(gold: list[dict], predicted: list[dict]) -> dict[str, Counter]:
    """Per type for one line: gold values, leak-free ones (same type / any type), predictions
    and the predictions that cover a whole gold value of their type."""
    counts = {name: Counter() for name in ("gold", "safe", "safe_any", "pred", "pred_ok")}
    every = [(p["start"], p["end"]) for p in predicted]
    by_type: dict[str, list[tuple[int, int]]] = {}
    for p in predicted:
        by_type.setdefault(p["type"], []).append((p["start"], p["end"]))
    for g in gold:
        span = (g["start"], g["end"])
        counts["gold"][g["type"]] += 1
        counts["safe"][g["type"]] += covered(span, by_type.get(g["type"], []))
        counts["safe_any"][g["type"]] += covered(span, every)
    for p in predicted:
        counts["pred"][p["type"]] += 1
        counts["pred_ok"][p["type"]] += any(
            g["type"] == p["type"] and p["start"] <= g["start"] and g["end"] <= p["end"]
            for g in gold
        )
    return counts


def percentile(sorted_values: list[float], fraction: float) -> float:
    if not sorted_values:
        return 0.0
    index = min(len(sorted_values) - 1, max(0, round(fraction * len(sorted_values)) - 1))
    return sorted_values[index]


def gold_spans(line: dict) -> list[dict]:
    spans = line.get("gold", line.get("entities")) or []
    return [
        {"start": int(e["start"]), "end": int(e["end"]), "type": e["type"]}
        for e in spans
        if e["type"] in ENTITY_TYPES
    ]


def read_lines(paths: list[Path]) -> list[dict]:
    return [
        json.loads(raw)
        for path in paths
        for raw in path.read_text(encoding="utf-8").splitlines()
        if raw.strip()
    ]


def evaluate(
    path: Path | list[Path],
    *,
    cpu_time: bool = False,
    errors: list | None = None,
    strict: bool = False,
) -> dict:
    engine = get_engine()
    clock = time.thread_time if cpu_time else time.perf_counter
    tp, fp, fn = Counter(), Counter(), Counter()
    strict_counts = {name: Counter() for name in ("gold", "safe", "safe_any", "pred", "pred_ok")}
    latencies: list[float] = []
    lines = read_lines(path if isinstance(path, list) else [path])
    for line in lines[:50]:  # warm-up: first-call costs are not per-message latency
        engine.analyze(line["text"], entities=ENTITY_TYPES)
    for line in lines:
        text = line["text"]
        started = clock()
        detections = engine.analyze(text, entities=ENTITY_TYPES)
        latencies.append((clock() - started) * 1000)
        predicted = [{"start": d.start, "end": d.end, "type": d.type} for d in detections]
        gold = gold_spans(line)
        line_tp, line_fp, line_fn = match(gold, predicted)
        tp += line_tp
        fp += line_fp
        fn += line_fn
        line_strict = strict_match(gold, predicted) if strict else None
        if line_strict is not None:
            for name, counter in line_strict.items():
                strict_counts[name] += counter
        if errors is not None:
            if line_strict is not None:
                wrong = line_strict["safe"] != line_strict["gold"] or (
                    line_strict["pred_ok"] != line_strict["pred"]
                )
            else:
                wrong = bool(line_fp or line_fn)
            if wrong:
                errors.append({"text": text, "gold": gold, "predicted": predicted})
    result = {}
    for entity_type in (*ENTITY_TYPES, "ALL"):
        if entity_type == "ALL":
            t, p, n = sum(tp.values()), sum(fp.values()), sum(fn.values())
        else:
            t, p, n = tp[entity_type], fp[entity_type], fn[entity_type]
        result[entity_type] = {
            "precision": t / (t + p) if t + p else 1.0,
            "recall": t / (t + n) if t + n else 1.0,
            "tp": t,
            "fp": p,
            "fn": n,
        }
        if strict:
            if entity_type == "ALL":
                c = {name: sum(counter.values()) for name, counter in strict_counts.items()}
            else:
                c = {name: counter[entity_type] for name, counter in strict_counts.items()}
            result[entity_type].update(
                leak_free=c["safe"] / c["gold"] if c["gold"] else 1.0,
                leak_free_any=c["safe_any"] / c["gold"] if c["gold"] else 1.0,
                strict_precision=c["pred_ok"] / c["pred"] if c["pred"] else 1.0,
                gold=c["gold"],
                leaks=c["gold"] - c["safe"],
                predicted=c["pred"],
            )
    latencies.sort()
    result["latency"] = {
        "p50_ms": percentile(latencies, 0.5),
        "p95_ms": percentile(latencies, 0.95),
    }
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Masking precision/recall/latency benchmark")
    parser.add_argument("files", type=Path, nargs="*", help="labelled JSONL files")
    parser.add_argument("--data", type=Path, action="append", default=[], help="labelled JSONL")
    parser.add_argument("--cpu-time", action="store_true", help="latency as thread CPU time")
    parser.add_argument(
        "--strict",
        action="store_true",
        help="also print leak_free, leak_free_any and strict_precision per type",
    )
    parser.add_argument(
        "--errors",
        type=int,
        default=0,
        metavar="N",
        help="also print up to N mismatching lines to stderr",
    )
    args = parser.parse_args(argv)
    paths = [*args.data, *args.files]
    if not paths:
        parser.error("give one or more labelled JSONL files (positional or --data)")
    errors: list = []
    result = evaluate(paths, cpu_time=args.cpu_time, errors=errors, strict=args.strict)
    for entity_type in (*ENTITY_TYPES, "ALL"):
        row = result[entity_type]
        line = f"{entity_type} precision={row['precision']:.3f} recall={row['recall']:.3f}"
        if args.strict:
            line += (
                f" leak_free={row['leak_free']:.3f} leak_free_any={row['leak_free_any']:.3f}"
                f" strict_precision={row['strict_precision']:.3f}"
                f" gold={row['gold']} leaks={row['leaks']} predicted={row['predicted']}"
            )
        print(line)
    latency = result["latency"]
    print(f"latency p50_ms={latency['p50_ms']:.3f} p95_ms={latency['p95_ms']:.3f}")
    for item in errors[: args.errors]:
        print(json.dumps(item, ensure_ascii=False), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
