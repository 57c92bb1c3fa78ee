"""Baseline against candidate: per case (retrieval overlap and rank change, recall of the
baseline's memories, recall@k of the expected memories, tool calls, policy decisions, reply
checks, tokens, cost, latency) and in aggregate (pass rates with Wilson intervals, the paired
difference with a bootstrap interval, mean recall@k, and the verdict against the suite's
regression threshold)."""

from __future__ import annotations

import math
from decimal import Decimal
from statistics import fmean

from cadre.agents.evaluation.checks import unmasked_shape

Z95 = 1.959964
BOOTSTRAP_SAMPLES = 2000
BOOTSTRAP_SEED = 20  # fixed: the same results give the same interval


def _retrieval(baseline: list[dict], candidate: list[dict]) -> dict:
    base = {m["id"]: m["rank"] for m in baseline}
    cand = {m["id"]: m["rank"] for m in candidate}
    shared = set(base) & set(cand)
    union = set(base) | set(cand)
    return {
        "baseline_ids": list(base),
        "candidate_ids": list(cand),
        "overlap": round(len(shared) / len(union), 4) if union else 1.0,
        "recall_of_baseline": round(len(shared) / len(base), 4) if base else 1.0,
        # how far the memories both sent moved, on average (0: same places)
        "mean_rank_change": round(fmean(abs(base[i] - cand[i]) for i in shared), 4)
        if shared
        else 0.0,
        "added": sorted(set(cand) - set(base)),
        "lost": sorted(set(base) - set(cand)),
    }


def _calls(outcome: dict) -> list[tuple[str, str]]:
    import json

    return sorted(
        (c["name"], json.dumps(unmasked_shape(c.get("arguments") or {}), sort_keys=True))
        for c in outcome.get("tool_calls") or []
    )


def _recall_at_k(baseline: dict, candidate: dict) -> dict | None:
    base, cand = baseline.get("recall_at_k"), candidate.get("recall_at_k")
    if not base or not cand:
        return None
    return {"k": base["k"], "baseline": base["recall"], "candidate": cand["recall"]}


def compare_case(baseline: dict, candidate: dict) -> dict:
    base_calls, cand_calls = _calls(baseline), _calls(candidate)
    base_usage, cand_usage = baseline.get("usage", {}), candidate.get("usage", {})
    return {
        "recall_at_k": _recall_at_k(baseline, candidate),
        "retrieval": _retrieval(baseline.get("memories", []), candidate.get("memories", [])),
        "tools": {
            "same_tools": [n for n, _ in base_calls] == [n for n, _ in cand_calls],
            "same_arguments": base_calls == cand_calls,
            "stubbed": {
                "baseline": baseline.get("stubbed", 0),
                "candidate": candidate.get("stubbed", 0),
            },
        },
        "policy": {
            "same": baseline.get("policy") == candidate.get("policy"),
            "baseline": baseline.get("policy"),
            "candidate": candidate.get("policy"),
        },
        "reply": {
            "same": (baseline.get("reply") or "") == (candidate.get("reply") or ""),
            "baseline_passed": baseline.get("passed", False),
            "candidate_passed": candidate.get("passed", False),
        },
        "tokens": {
            "baseline": base_usage.get("input_tokens", 0) + base_usage.get("output_tokens", 0),
            "candidate": cand_usage.get("input_tokens", 0) + cand_usage.get("output_tokens", 0),
        },
        "cost": {"baseline": baseline.get("cost", "0"), "candidate": candidate.get("cost", "0")},
        "latency_ms": {
            "baseline": baseline.get("latency_ms", 0),
            "candidate": candidate.get("latency_ms", 0),
        },
    }


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a proportion (95 % by default); (0, 1) with no trials."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return round(max(0.0, centre - half), 4), round(min(1.0, centre + half), 4)


def bootstrap_difference(pairs: list[tuple[bool, bool]]) -> tuple[float, float]:
    """95 % percentile bootstrap interval of candidate minus baseline pass rate, resampling
    cases (paired: a case is drawn with both its sides)."""
    import numpy

    n = len(pairs)
    if n == 0:
        return 0.0, 0.0
    rng = numpy.random.default_rng(BOOTSTRAP_SEED)
    diffs = numpy.array([int(c) - int(b) for b, c in pairs], dtype=numpy.int8)
    means = numpy.sort(diffs[rng.integers(0, n, size=(BOOTSTRAP_SAMPLES, n))].mean(axis=1))
    low = float(means[int(0.025 * (BOOTSTRAP_SAMPLES - 1))])
    high = float(means[int(0.975 * (BOOTSTRAP_SAMPLES - 1))])
    return round(low, 4), round(high, 4)


def aggregate(results: list[dict], threshold: float) -> dict:
    """`results`: [{"baseline", "candidate", "comparison"}] per case. The candidate regresses
    when its pass rate is more than `threshold` below the baseline's."""
    n = len(results)
    pairs = [
        (r["baseline"].get("passed", False), r["candidate"].get("passed", False)) for r in results
    ]
    base_passes = sum(b for b, _ in pairs)
    cand_passes = sum(c for _, c in pairs)
    base_rate = base_passes / n if n else 0.0
    cand_rate = cand_passes / n if n else 0.0
    difference = cand_rate - base_rate

    def mean(values) -> float:
        values = list(values)
        return round(fmean(values), 4) if values else 0.0

    def total_cost(side: str) -> str:
        return str(sum((Decimal(r[side].get("cost") or "0") for r in results), Decimal(0)))

    comparisons = [r["comparison"] for r in results]
    recalls = [c["recall_at_k"] for c in comparisons if c.get("recall_at_k")]
    recall_drop = (
        fmean(r["baseline"] for r in recalls) - fmean(r["candidate"] for r in recalls)
        if recalls
        else None
    )
    return {
        # Over the cases that name expected memories: the mean share of them in each side's
        # top k (the figure a re-embed is judged by before the switch); None without such cases.
        "recall_at_k": {
            "k": recalls[0]["k"],
            "cases": len(recalls),
            "baseline": mean(r["baseline"] for r in recalls),
            "candidate": mean(r["candidate"] for r in recalls),
            "difference": round(
                mean(r["candidate"] for r in recalls) - mean(r["baseline"] for r in recalls), 4
            ),
        }
        if recalls
        else None,
        "cases": n,
        "threshold": threshold,
        "baseline": {
            "pass_rate": round(base_rate, 4),
            "pass_rate_ci95": wilson(base_passes, n),
            "tokens": sum(c["tokens"]["baseline"] for c in comparisons),
            "cost": total_cost("baseline"),
            "mean_latency_ms": mean(r["baseline"].get("latency_ms", 0) for r in results),
            "stubbed_calls": sum(r["baseline"].get("stubbed", 0) for r in results),
        },
        "candidate": {
            "pass_rate": round(cand_rate, 4),
            "pass_rate_ci95": wilson(cand_passes, n),
            "tokens": sum(c["tokens"]["candidate"] for c in comparisons),
            "cost": total_cost("candidate"),
            "mean_latency_ms": mean(r["candidate"].get("latency_ms", 0) for r in results),
            "stubbed_calls": sum(r["candidate"].get("stubbed", 0) for r in results),
        },
        "difference": round(difference, 4),
        "difference_ci95": bootstrap_difference(pairs),
        "regressed_cases": sum(1 for b, c in pairs if b and not c),
        "improved_cases": sum(1 for b, c in pairs if c and not b),
        "retrieval": {
            "mean_overlap": mean(c["retrieval"]["overlap"] for c in comparisons),
            "mean_recall_of_baseline": mean(
                c["retrieval"]["recall_of_baseline"] for c in comparisons
            ),
            "mean_rank_change": mean(c["retrieval"]["mean_rank_change"] for c in comparisons),
        },
        "same_tool_calls": mean(float(c["tools"]["same_arguments"]) for c in comparisons),
        "same_policy": mean(float(c["policy"]["same"]) for c in comparisons),
        # A candidate regresses when its pass rate, or its recall@k of the expected memories,
        # falls more than the threshold below the baseline's.
        "verdict": "regression"
        if n and (difference < -threshold or (recall_drop is not None and recall_drop > threshold))
        else "pass",
    }
