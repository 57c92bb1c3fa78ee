"""Replay of a 200-case evaluation suite for a template change, with the offline provider.

The suite's cases are turns of a sales template (half with a recorded tool result the replay
answers instead of the tool, a quarter with facts to check, a few with earlier turns); the
candidate is a draft of the template with a changed SOP. Every case is replayed twice (the
published version as baseline, the draft as candidate) by the same service the Celery task
calls (`eval_run_execute`), results stored per case, aggregate computed at the end.

Printed side by side, per case (both sides):
- `bare offline provider`: the offline provider's two calls on the same assembled messages,
  nothing else — the model's share, which a real provider replaces with its own latency;
- `replay`: wall time of the whole replay divided by the cases;
- `platform overhead`: replay minus the provider's time inside it (input policy, context
  assembly, tool answering, checks, comparison, the result rows). Target: <= 50 ms per case.

Memory retrieval is off in this template (no scopes on the cases): its cost is the memory
search's, measured by bench/memory_latency.py. Runs on its own database (dropped first).

    .venv/bin/python bench/replay.py
    .venv/bin/python bench/replay.py --cases 500
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "platform")]

TARGET_MS = 50.0


def prepare_environment(database: str, redis_db: int) -> None:
    from bench.environment import prepare

    prepare(
        database,
        redis_db=redis_db,
        cache_prefix="cadre-bench-replay",
        extra={"LOG_FORMAT": "text"},
    )


QUESTIONS = [
    ("What is the standard discount?", {"required_facts": ["5 percent"]}),
    ("How do I prepare a customer visit?", {}),
    ("Who approves discounts above the limit?", {"forbidden_facts": ["no approval needed"]}),
]


def build(cases: int):
    from cadre.agents import services as agents
    from cadre.agents.evaluation import services as evaluation
    from cadre.tenancy.actors import member_actor
    from cadre.tenancy.models import Organization
    from tests.factories import MemberFactory

    organization = Organization.objects.create(name="Bench replay", slug="bench-replay")
    owner = MemberFactory(organization=organization, roles=["owner"])
    actor = member_actor(owner)
    template = agents.template_create(
        actor=actor,
        name="Sales assistant",
        code="sales-assistant",
        agent_md="# Persona\nYou help the sales team.",
        sop="# SOP\n## Pricing\nStandard discount is 5 percent.\n"
        + "\n".join(f"{n}. Record visit notes for region {n}." for n in range(1, 30)),
        tool_permissions={
            "task_create": {"risk": "low", "confirmation": "never"},
            "memory_search": {"risk": "low", "confirmation": "never"},
        },
        model_settings={"provider": "offline", "model": "offline-1"},
        hooks={"assemble_context": [{"name": "memory_retrieval", "enabled": False}]},
    )
    first = template.versions.get()
    agents.version_submit(actor=actor, version=first)
    agents.version_publish(actor=actor, version=first, reason="bench")
    draft = agents.version_draft(actor=actor, template=template)
    agents.version_update(
        actor=actor,
        version=draft,
        sop=first.sop.replace("5 percent", "5 percent, 7 percent for renewals"),
    )
    suite = evaluation.suite_create(actor=actor, name="Bench suite", template=template)
    lines = []
    import json

    for n in range(cases):
        if n % 2 == 0:
            lines.append(
                {
                    "input": f"remind me to call customer {n}",
                    "tool_results": [
                        {
                            "name": "task_create",
                            "arguments": {"title": f"call customer {n}"},
                            "result": {"task": {"id": n, "title": f"call customer {n}"}},
                        }
                    ],
                    "expected_tool_calls": [{"name": "task_create"}],
                }
            )
        else:
            question, expectations = QUESTIONS[n % len(QUESTIONS)]
            conversation = (
                [
                    {"role": "user", "content": "hello"},
                    {"role": "assistant", "content": "Hello, how can I help?"},
                ]
                if n % 5 == 1
                else []
            )
            lines.append({"input": question, "conversation": conversation, **expectations})
    evaluation.cases_import_jsonl(
        actor=actor, suite=suite, content="\n".join(json.dumps(line) for line in lines)
    )
    return actor, suite, draft


def bare_provider_ms(suite) -> float:
    """The offline provider's two calls per case on the messages the replay would send."""
    from cadre.agents.evaluation.replay import _pieces, current_version
    from cadre.agents.runtime.steps import context as context_assembly
    from cadre.llm import provider_for

    version = current_version(suite)
    provider = provider_for({"provider": "offline", "model": "offline-1"})
    prepared = [
        context_assembly.fit(_pieces(case, version, case.input_text, []), 8000)[0]
        for case in suite.cases.all()
    ]
    started = time.perf_counter()
    for messages in prepared:
        for _ in range(2):
            provider.chat(messages, [])
    return (time.perf_counter() - started) * 1000 / len(prepared)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--database", default="cadre_bench_replay")
    parser.add_argument("--redis-db", type=int, default=13)
    args = parser.parse_args()
    prepare_environment(args.database, args.redis_db)
    import django

    django.setup()
    from django.core.management import call_command

    from cadre.agents.evaluation import services as evaluation
    from cadre.agents.evaluation.models import EvalRun

    call_command("migrate", verbosity=0)
    actor, suite, draft = build(args.cases)
    bare = bare_provider_ms(suite)
    run = evaluation.eval_run_start(
        actor=actor, suite=suite, candidate={"kind": "template_version", "version": draft.pk}
    )
    started = time.perf_counter()
    evaluation.eval_run_execute(run.pk)
    wall = time.perf_counter() - started
    run = EvalRun.objects.get(pk=run.pk)
    model_ms = sum(
        result.baseline["model_ms"] + result.candidate["model_ms"] for result in run.results.all()
    )
    cases = run.summary["cases"]
    per_case = wall * 1000 / cases
    overhead = per_case - model_ms / cases
    print(f"replay of {cases} cases, template change (draft v{draft.number}), offline provider")
    print(f"{'':28} {'ms/case':>9} {'total s':>9}")
    print(f"{'bare offline provider':28} {bare:9.2f} {bare * cases / 1000:9.2f}")
    print(f"{'replay (both sides)':28} {per_case:9.2f} {wall:9.2f}")
    print(f"{'provider inside the replay':28} {model_ms / cases:9.2f} {model_ms / 1000:9.2f}")
    print(f"{'platform overhead':28} {overhead:9.2f} {overhead * cases / 1000:9.2f}")
    summary = run.summary
    print(
        f"verdict {summary['verdict']}: pass rate {summary['baseline']['pass_rate']:.3f} -> "
        f"{summary['candidate']['pass_rate']:.3f} (difference 95% CI "
        f"{summary['difference_ci95'][0]:+.3f}..{summary['difference_ci95'][1]:+.3f}), "
        f"stubbed calls {summary['candidate']['stubbed_calls']}"
    )
    print(
        f"replay overhead_ms_per_case={overhead:.2f} target<={TARGET_MS:.0f} "
        f"{'ok' if overhead <= TARGET_MS else 'MISSED'}"
    )


if __name__ == "__main__":
    main()
