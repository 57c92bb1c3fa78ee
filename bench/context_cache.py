"""Provider prompt-cache hits of 20-turn sessions: today's context order against the stable one.

Each session is replayed through the runtime's assembly (`context.fit`) and the real provider
adapters against the loopback fakes with prompt caching (tests/agents/fake_models.py,
`caching=True`): the OpenAI-compatible one caches the longest prefix shared with an earlier
request in 128-token blocks (none below 1,024), the Anthropic one reads and writes at the
`cache_control` breakpoints. The template has AGENT.md, USER.md, an SOP, 3 skills with their
bodies and 10 long-lived user memories; every turn brings 3 memories retrieved for its input
and the last --window turns (the runtime sends 12). Both orders get the same pieces — `legacy`
(today: one system message, per-request memories ahead of the skill bodies) and `stable` (the
new default) — so only the order differs.

Printed per provider and order: cached share of input tokens and input cost (cached-token
prices against all-uncached) from turn 3 on. The last line is the cached share of input tokens
from turn 3 on, both providers' tokens together:
`context_cache today=0.xx new=0.xx`. No database needed. The other half of issue 20, the
next turn's memories prefetched, and its retrieval quality on LoCoMo (R@10 of the prefetch
path against the full search's), is measured by bench/prefetch.py (`--locomo FILE`).

    .venv/bin/python bench/context_cache.py
    .venv/bin/python bench/context_cache.py --turns 40 --window 12
"""

from __future__ import annotations

import argparse
import os
import random
import sys
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "platform")]
# The fake model endpoints listen on loopback, which the outbound guard admits only when allowed.
os.environ.setdefault("CADRE_MODEL_PROVIDER_ALLOWED_HOSTS", "127.0.0.1")

from cadre.agents.runtime.steps.context import ContextPieces, fit  # noqa: E402
from cadre.llm.anthropic import AnthropicProvider  # noqa: E402
from cadre.llm.openai_compatible import OpenAICompatibleProvider  # noqa: E402
from tests.agents.fake_models import FakeModelServer  # noqa: E402

# Per million tokens, as the providers list them (gpt-4o-class; claude-sonnet-class).
PRICES = {
    "openai_compatible": {"input": "2.50", "cached_input": "1.25", "output": "10"},
    "anthropic": {"input": "3", "cached_input": "0.30", "cache_write": "3.75", "output": "15"},
}
TOPICS = ["refunds", "invoices", "shipping", "contracts", "onboarding", "travel", "payroll"]


def _template(rng: random.Random) -> ContextPieces:
    sop = "\n".join(
        f"{n}. When a {rng.choice(TOPICS)} request mentions case type {n}, confirm the order "
        f"number, the customer's tier and the channel, quote policy section {n}.{n % 4} and "
        "escalate disputes above the approval limit to the duty manager."
        for n in range(1, 31)
    )
    skills = [
        {
            "name": name,
            "version": "1.2.0",
            "description": f"How to handle {name.replace('-', ' ')} end to end.",
            "body": "\n".join(
                f"Step {n}: for {name}, check field {n} against the ledger and note the result."
                for n in range(1, 13)
            ),
        }
        for name in ("refund-review", "invoice-lookup", "shipping-claims")
    ]
    standing = [
        {
            "id": 100 + n,
            "scope": "user:7",
            "content": f"The user prefers {topic} updates as short bullet lists, sent before noon.",
        }
        for n, topic in enumerate([*TOPICS, "budgets", "audits", "vendors"])
    ]
    return ContextPieces(
        agent_md="You are the finance operations assistant of Acme's shared-services team.",
        sop=sop,
        user_md="Name: Bob Li. Team: accounts payable. Time zone: Asia/Shanghai.",
        skills=skills,
        standing=standing,
    )


def _session(kind: str, order: str, turns: int, window: int, seed: int) -> list[dict]:
    """Usage per turn ({"input", "cached", "cost", "uncached_cost"}) of one session."""
    rng = random.Random(seed)
    base = _template(rng)
    pool = [
        {
            "id": 500 + n,
            "scope": "user:7",
            "content": f"Case {n}: the {rng.choice(TOPICS)} ticket {rng.randint(1000, 9999)} "
            f"was resolved on day {rng.randint(1, 28)} by {rng.choice(['Ann', 'Wu', 'Raj'])}.",
        }
        for n in range(40)
    ]
    replies = [
        f"Here is what I found about item {n}: the {rng.choice(TOPICS)} record is complete, "
        f"the amount matches the ledger and nothing needs escalation today."
        for n in range(turns)
    ]
    prices = PRICES[kind]
    history: list[dict] = []
    usages = []
    with FakeModelServer([{"text": text} for text in replies], caching=True) as server:
        if kind == "anthropic":
            provider = AnthropicProvider(model="claude-bench", base_url=server.root_url)
        else:
            provider = OpenAICompatibleProvider(model="gpt-bench", base_url=server.base_url)
        for turn in range(turns):
            text = f"Turn {turn}: what is the status of the {rng.choice(TOPICS)} case {turn}?"
            pieces = ContextPieces(
                **{**base.__dict__, "memories": rng.sample(pool, 3)},
            )
            pieces.turns = history[-2 * window :]
            pieces.input_text = text
            messages, _ = fit(pieces, 8_000, order=order)
            result = provider.chat(messages, [], prompt_cache_key=f"bench-{order}", max_tokens=256)
            usage = result.usage
            uncached = type(usage)(usage.input_tokens, usage.output_tokens).cost(prices)
            usages.append(
                {
                    "input": usage.input_tokens,
                    "cached": usage.cached_input_tokens,
                    "cost": usage.cost(prices),
                    "uncached_cost": uncached,
                    "output": usage.output_tokens,
                }
            )
            history += [
                {"role": "user", "content": text},
                {"role": "assistant", "content": result.text},
            ]
    return usages


def _output_cost(usage: dict, kind: str) -> Decimal:
    return Decimal(PRICES[kind]["output"]) * usage["output"] / Decimal(1_000_000)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--window", type=int, default=12, help="recent turns sent")
    parser.add_argument("--seed", type=int, default=20261202)
    args = parser.parse_args()
    shares: dict[str, list[int]] = {"legacy": [0, 0], "stable": [0, 0]}
    print(f"{'provider':<18} {'order':<7} {'input':>8} {'cached':>8} {'share':>6} {'cost':>6}")
    for kind in ("openai_compatible", "anthropic"):
        for order in ("legacy", "stable"):
            usages = _session(kind, order, args.turns, args.window, args.seed)[2:]
            tokens = sum(u["input"] for u in usages)
            cached = sum(u["cached"] for u in usages)
            # input cost only: the output is the same whichever order
            cost = sum(u["cost"] - _output_cost(u, kind) for u in usages)
            full = sum(u["uncached_cost"] - _output_cost(u, kind) for u in usages)
            shares[order][0] += cached
            shares[order][1] += tokens
            print(
                f"{kind:<18} {order:<7} {tokens:>8} {cached:>8} {cached / tokens:>6.2f} "
                f"{float(cost / full):>6.2f}"
            )
    print("(turn 3 on; share = cached/input tokens; cost = input cost / all-uncached input cost)")
    today, new = (shares[o][0] / shares[o][1] for o in ("legacy", "stable"))
    print(f"context_cache today={today:.2f} new={new:.2f}")


if __name__ == "__main__":
    main()
