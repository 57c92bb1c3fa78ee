"""Memory retrieval in a turn's assembly, with and without the prefetch (lifecycle/prefetch.py).

One member's agent with --memories memories of their own (embedded with the local model). A
session moves to a new topic; the prefetch task runs for that turn; then --turns follow-up
inputs on the topic are assembled. Each is timed twice through the `memory_retrieval` hook,
the part of the assembly the prefetch replaces: without a prefetch (the full hybrid search over
the scope: query embedding, lexical and vector candidates, fusion, MMR) and with it (query
embedding for the match check, then the same search restricted to the prefetched pool's ids).
Both paths embed the input once. Printed side by side: median and p90 ms (every turn), and on
the turns the prefetch served the overlap of the memories sent (top_k) between the two; the
last line is
`prefetch without=N.Nms with=N.Nms overlap=0.xx`. Separate database (`cadre_prefetch_bench`)
and Redis DB 11.

    .venv/bin/python bench/prefetch.py
    .venv/bin/python bench/prefetch.py --memories 400 --turns 20 --pool 25

`--locomo FILE` (e.g. ../shared/bench/locomo-dev.json) measures retrieval quality instead:
each conversation's turns become memories as in bench/memory_retrieval.py (its loader and
evidence ids, imported), and its questions are walked in order as the turns of one session.
Each turn's evidence R@10 is taken from the full search ("today") and from the runtime's path
with the prefetch ("new": the ranking over the pool prefetched after an earlier turn when the
prefetch's topic rules serve it, else the full search); printed with the share of turns
served, the last line `prefetch_locomo today=0.xxx new=0.xxx served=0.xx`.

    .venv/bin/python bench/prefetch.py --locomo ../shared/bench/locomo-dev.json
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "platform")]

BENCH_DB = "cadre_prefetch_bench"
REDIS_DB = 11
TOPICS = {
    "travel": ["flight", "hotel", "business trip", "Ctrip portal", "per diem", "visa"],
    "expenses": ["receipt", "reimbursement", "invoice", "expense report", "taxi", "meal"],
    "payroll": ["salary", "payslip", "bonus", "tax", "social insurance", "overtime"],
    "it": ["laptop", "VPN", "password", "printer", "Wi-Fi", "email account"],
    "sales": ["discount", "quote", "contract", "customer visit", "pipeline", "renewal"],
}
FOLLOW_UPS = [  # follow-ups on the new topic (the booking of a business trip)
    "How do I book the {a} and the {b} for my next business trip?",
    "For a business trip, how do I book the {a} and what about the {b}?",
    "Remind me how booking the {a} and the {b} works for business trips.",
    "What do I need to book the {a} and the {b} of a business trip?",
]


def prepare_environment() -> None:
    from bench.environment import prepare

    prepare(
        BENCH_DB,
        redis_db=REDIS_DB,
        cache_prefix="cadre-prefetch-bench",
        extra={"HF_HUB_OFFLINE": "1"},
    )


def setup(memories: int, rng: random.Random):
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    import redis
    from django.conf import settings

    redis.Redis.from_url(settings.REDIS_URL).flushdb()  # the bench Redis database only
    from cadre.agents import services
    from cadre.memory import embeddings
    from cadre.memory import services as memory_services
    from cadre.memory.models import Memory
    from cadre.tenancy.actors import member_actor
    from cadre.tenancy.models import Member, Organization, Position

    organization = Organization.objects.create(name="Bench", slug="prefetch-bench")
    owner = Member.objects.create(
        organization=organization, display_name="Owner", email="owner@bench.test", roles=["owner"]
    )
    position = Position.objects.create(organization=organization, name="Staff", code="staff")
    owner.positions.add(position)
    actor = member_actor(owner)
    template = services.template_create(
        actor=actor,
        name="Assistant",
        code="assistant",
        model_settings={"provider": "offline", "model": "offline-1"},
        memory_policy={"read_scopes": ["user"], "write_scopes": ["user"]},
        hooks={"assemble_context": [{"name": "memory_retrieval", "config": {"top_k": 5}}]},
    )
    version = template.versions.get()
    services.version_submit(actor=actor, version=version)
    services.version_publish(actor=actor, version=version)
    deployment = services.deployment_create(
        actor=actor, name="Assistant", template=template, positions=[position]
    )
    agent = deployment.agents.get(member=owner)
    topics = list(TOPICS)
    for n in range(memories):
        words = TOPICS[topics[n % len(topics)]]
        a, b = rng.sample(words, 2)
        memory_services.memory_add(
            actor=actor,
            scope="user",
            scope_id=owner.pk,
            kind="fact",
            content=f"Note {n}: for the {a}, remember the {b} rule number {rng.randint(1, 99)}.",
            source_kind="user_statement",
        )
    embeddings.embed_memories(Memory.objects.filter(organization=organization))
    return owner, agent


def locomo(path: str, top_k: int, pool: int) -> None:
    """Evidence R@10 of the full search and of the prefetch path, LoCoMo questions as turns."""
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from bench.memory_retrieval import load
    from cadre.agents.hooks import prefetched as prefetch
    from cadre.tenancy.models import Organization

    prefetch.POOL_SIZE = pool or prefetch.POOL_SIZE
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    organization = Organization.objects.create(name="LoCoMo", slug="prefetch-locomo")
    by_scope = load(data, organization, embed_batch=256)
    today, new, counts = locomo_recall(data, organization, by_scope, top_k)
    turns, shifts, served = counts["turns"], counts["shifts"], counts["served"]
    print(
        f"{turns} questions as turns, {shifts} topic shifts prefetched, "
        f"{served} turns served from a prefetch (pool {prefetch.pool_size(top_k)})"
    )
    print(f"{'evidence R@' + str(top_k):<16}{'full search':>12}{'prefetch':>10}")
    print(f"{'all turns':<16}{today:>12.3f}{new:>10.3f}")
    print(f"{'served turns':<16}{counts['served_today']:>12.3f}{counts['served_new']:>10.3f}")
    print(f"served turns: sent-memory overlap with the full search {counts['overlap']:.2f}")
    print(f"prefetch_locomo today={today:.3f} new={new:.3f} served={served / max(turns, 1):.2f}")


def locomo_recall(data, organization, by_scope, top_k: int) -> tuple[float, float, dict]:
    """(R@top_k of the full search, of the prefetch path, {"turns", "shifts", "served"})."""
    from django.conf import settings

    from bench.memory_retrieval import evidence_ids
    from cadre.agents.hooks import prefetched as prefetch
    from cadre.memory import embeddings, selectors

    model = embeddings.active_model()
    provider = embeddings.provider_for(model)
    reader = selectors.system_reader(
        organization, job="benchmark", reason="measure prefetch recall"
    )
    recall = dict.fromkeys(("today", "new", "served_today", "served_new", "overlap"), 0.0)
    turns = served = shifts = 0
    for number, sample in enumerate(data, start=1):
        questions = [
            (str(qa["question"]), evidence_ids(qa.get("evidence")))
            for qa in sample.get("qa", [])
            if qa.get("category") != 5 and evidence_ids(qa.get("evidence"))
        ]
        vectors = provider.embed([question for question, _ in questions], query=True)
        ids = by_scope[number]
        entry, previous = None, None
        for (question, evidence), vector in zip(questions, vectors, strict=True):
            kwargs = {
                "actor": reader,
                "force": True,
                "scope_keys": [f"agent:{number}"],
                "query": question,
                "query_vector": vector,
            }
            full = list(selectors.memory_search(top_k=top_k, **kwargs))
            hits = full
            # The hook's rule (prefetch.take): the pool serves an input close to its query.
            match = entry and prefetch.similarity(model, vector, entry["vector"])
            if match and match >= settings.CADRE_PREFETCH_MATCH:
                hits = list(
                    selectors.memory_search(top_k=top_k, candidate_ids=entry["ids"], **kwargs)
                )
                served += 1
            for name, found in (("today", full), ("new", hits)):
                dia = {ids.get(hit.memory.pk) for hit in found}
                recall[name] += len(evidence & dia) / len(evidence)
                if hits is not full:
                    recall[f"served_{name}"] += len(evidence & dia) / len(evidence)
            if hits is not full:
                same = {hit.memory.pk for hit in full} & {hit.memory.pk for hit in hits}
                recall["overlap"] += len(same) / max(len(full), 1)
            turns += 1
            # The task's rule (prefetch.prefetch_next_turn): a topic shift prefetches.
            if previous is not None and prefetch.topic_shift(previous, vector, model=model):
                result = selectors.memory_search(
                    top_k=prefetch.pool_size(top_k), passed_over=True, **kwargs
                )
                pool, passed = list(result), result.passed_over
                entry = {"vector": vector, "ids": prefetch.pool_ids(pool, passed)}
                shifts += 1
            previous = vector
    counts = {"turns": turns, "shifts": shifts, "served": served}
    counts.update(
        {name: recall[name] / max(served, 1) for name in ("served_today", "served_new", "overlap")}
    )
    return recall["today"] / max(turns, 1), recall["new"] / max(turns, 1), counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--memories", type=int, default=100)
    parser.add_argument("--turns", type=int, default=12)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--pool", type=int, default=0, help="prefetch.POOL_SIZE (0: as shipped)")
    parser.add_argument("--locomo", metavar="FILE", help="LoCoMo-format file: R@10 mode")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    prepare_environment()
    if args.locomo:
        locomo(args.locomo, top_k=10, pool=args.pool)
        return
    owner, agent = setup(args.memories, rng)

    from cadre.agents.hooks import prefetched
    from cadre.agents.hooks.builtins import memory_retrieval
    from cadre.agents.models import Run
    from cadre.agents.runtime.lifecycle import execution as engine
    from cadre.agents.runtime.lifecycle import prefetch
    from cadre.agents.runtime.lifecycle import services as runtime
    from cadre.agents.runtime.steps.run_context import RunContext
    from cadre.tenancy.actors import member_actor

    prefetched.POOL_SIZE = args.pool or prefetched.POOL_SIZE

    def turn(text, session=None):
        run = runtime.run_start(actor=member_actor(owner), agent=agent, text=text, session=session)
        assert engine.run_execute(run.pk) == Run.Status.COMPLETED
        run.refresh_from_db()
        return run

    first = turn("Which laptop and VPN settings do I need for the office Wi-Fi?")
    shifted = turn("How do I book the flight and the hotel for a business trip?", first.session)
    assert prefetch.prefetch_next_turn(shifted.pk) == "prefetched"
    config = {"top_k": 5}
    from cadre.memory import embeddings

    provider = embeddings.provider_for(embeddings.active_model())
    real_embed, memo = provider.embed, {}

    def memo_embed(texts, *, query=False):  # the retrieval-only rows: embedded before
        return [
            memo[text] if text in memo else real_embed([text], query=query)[0] for text in texts
        ]

    times = {name: [] for name in ("plain", "fetched", "plain_only", "fetched_only")}
    overlap, served = [], 0
    travel = TOPICS["travel"]
    for n in range(args.turns + 1):
        a, b = rng.sample(travel, 2)
        text = FOLLOW_UPS[n % len(FOLLOW_UPS)].format(a=a, b=b)
        run = runtime.run_start(
            actor=member_actor(owner), agent=agent, text=text, session=first.session
        )
        ctx = RunContext(run, first_attempt=True)
        ttl = prefetch.settings.CADRE_PREFETCH_TTL_SECONDS
        results = {}
        for name, ttl_now, embed in (
            ("plain", 0, real_embed),
            ("fetched", ttl, real_embed),
            ("plain_only", 0, memo_embed),
            ("fetched_only", ttl, memo_embed),
        ):
            prefetch.settings.CADRE_PREFETCH_TTL_SECONDS = ttl_now  # 0: off, the full search
            provider.embed = embed
            memo.setdefault(ctx.input_text, real_embed([ctx.input_text], query=True)[0])
            start = time.perf_counter()
            results[name] = memory_retrieval(ctx, config)
            times[name].append((time.perf_counter() - start) * 1000)
        prefetch.settings.CADRE_PREFETCH_TTL_SECONDS = ttl
        provider.embed = real_embed
        Run.objects.filter(pk=run.pk).update(status=Run.Status.CANCELLED)
        if n == 0:  # warm-up (query plans, the model's first call)
            for values in times.values():
                values.clear()
            continue
        if not any(m["components"].get("prefetched") for m in results["fetched"]["memories"]):
            continue  # not served: both ran the full search
        served += 1
        a_ids = {m["id"] for m in results["plain"]["memories"]}
        b_ids = {m["id"] for m in results["fetched"]["memories"]}
        overlap.append(len(a_ids & b_ids) / max(1, len(a_ids)))

    def p90(values):
        return sorted(values)[int(0.9 * (len(values) - 1))]

    med = {name: statistics.median(values) for name, values in times.items()}
    print(f"memories={args.memories} follow-up turns={args.turns} top_k=5")
    print(f"{'memory_retrieval hook':<34}{'no prefetch':>14}{'prefetch':>12}")
    print(f"{'median ms, with query embedding':<34}{med['plain']:>14.1f}{med['fetched']:>12.1f}")
    p90_plain, p90_fetched = p90(times["plain"]), p90(times["fetched"])
    print(f"{'p90 ms, with query embedding':<34}{p90_plain:>14.1f}{p90_fetched:>12.1f}")
    print(
        f"{'median ms, retrieval only':<34}{med['plain_only']:>14.1f}{med['fetched_only']:>12.1f}"
    )
    share = statistics.mean(overlap) if overlap else 0.0
    print(
        f"served from prefetch: {served}/{args.turns} (pool {prefetch.pool_size(5)}); "
        f"on those, sent-memory overlap with the full search: {share:.2f}"
    )
    print(f"prefetch without={med['plain']:.1f}ms with={med['fetched']:.1f}ms overlap={share:.2f}")


if __name__ == "__main__":
    main()
