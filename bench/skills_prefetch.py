"""The Hub's `skills` hook in a turn's assembly, with and without the skills prefetch
(hub/skill_prefetch.py).

One agent with --skills installed skills (hand-written descriptions, signed and verified as
in production) and the local embedding model. A session moves to a new topic; the prefetch
task runs for that turn; then --turns follow-up inputs on the topic are assembled. Each is
timed twice through `skills_for_run` (verification, relevance, recording — the whole hook):
without a prefetch (the input and every description embedded) and with it (the input
embedded for the match check, the descriptions' vectors read from the cache). Printed side by
side: median and p90 ms, texts embedded per turn, and how often both loaded the same bodies.
Separate database (`cadre_skills_prefetch_bench`) and Redis DB 12.

    .venv/bin/python bench/skills_prefetch.py
    .venv/bin/python bench/skills_prefetch.py --skills 30 --turns 20
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "platform")]

BENCH_DB = "cadre_skills_prefetch_bench"
REDIS_DB = 12
DESCRIPTIONS = [
    ("pdf-tools", "Fill, merge and split PDF forms and documents."),
    ("crm-notes", "Write call notes into the CRM after a customer meeting."),
    ("expense-report", "Prepare an expense report with receipts for reimbursement."),
    ("travel-booking", "Book flights and hotels for business trips through the travel portal."),
    ("contract-review", "Check a sales contract's payment terms and liability clauses."),
    ("meeting-minutes", "Turn a meeting transcript into minutes with decisions and owners."),
    ("sql-reports", "Write SQL queries against the sales warehouse for weekly reports."),
    ("onboarding", "Walk a new employee through accounts, equipment and first-week tasks."),
    ("vpn-help", "Troubleshoot VPN connections and office Wi-Fi certificates."),
    ("slide-deck", "Draft a slide deck outline from a document or notes."),
    ("translation", "Translate business e-mails between Chinese and English."),
    ("invoice-check", "Match supplier invoices with purchase orders and deliveries."),
    ("leave-request", "File annual leave and sick leave requests in the HR system."),
    ("press-release", "Write a press release in the company's style guide."),
    ("data-cleanup", "Clean and deduplicate a spreadsheet of customer records."),
    ("interview-kit", "Prepare interview questions and a scorecard for a role."),
]
TOPIC_SWITCH = "Which laptop should I order for the new analyst?"
TOPIC = "Combine these two Acrobat documents into one file for the customer"
FOLLOW_UPS = [
    "Combine the two Acrobat documents into a single file",
    "Can you merge these Acrobat documents into one file for the customer?",
    "Put the two Acrobat files together into one document",
    "Merge the customer's Acrobat documents into a single file please",
]


def prepare_environment() -> None:
    from bench.environment import prepare

    prepare(
        BENCH_DB,
        redis_db=REDIS_DB,
        cache_prefix="cadre-skills-prefetch-bench",
        extra={"HF_HUB_OFFLINE": "1"},
    )


def setup(skills: int):
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    import redis
    from django.conf import settings

    redis.Redis.from_url(settings.REDIS_URL).flushdb()  # the bench Redis database only
    from cadre.agents import services
    from cadre.tenancy.actors import member_actor
    from cadre.tenancy.models import Member, Organization, Position
    from hub import services as hub_services
    from hub.bundles import bundle_from_files

    organization = Organization.objects.create(name="Bench", slug="skills-bench")
    owner = Member.objects.create(
        organization=organization, display_name="Owner", email="owner@bench.test", roles=["owner"]
    )
    position = Position.objects.create(organization=organization, name="Staff", code="staff")
    owner.positions.add(position)
    actor = member_actor(owner)
    chosen = [
        DESCRIPTIONS[n % len(DESCRIPTIONS)][0] + ("" if n < len(DESCRIPTIONS) else f"-{n}")
        for n in range(skills)
    ]
    for n, name in enumerate(chosen):
        description = DESCRIPTIONS[n % len(DESCRIPTIONS)][1]
        skill_md = f"---\nname: {name}\ndescription: {description}\n---\n# {name}\n\nSteps.\n"
        bundle = bundle_from_files({"SKILL.md": skill_md.encode()}, folder_name=name)
        hub_services.package_publish(actor=actor, bundle=bundle, version="1.0.0", name=name)
    template = services.template_create(
        actor=actor,
        name="Assistant",
        code="assistant",
        model_settings={"provider": "offline", "model": "offline-1"},
        memory_policy={"read_scopes": ["user"], "write_scopes": ["user"]},
        hooks={
            "assemble_context": [
                {"name": "memory_retrieval", "config": {"top_k": 3}},
                {"name": "skills", "config": {"semantic": True}},
            ]
        },
        skills=[{"package": f"@skills-bench/{name}", "range": "^1"} for name in chosen],
    )
    version = template.versions.get()
    services.version_submit(actor=actor, version=version)
    services.version_publish(actor=actor, version=version)
    deployment = services.deployment_create(
        actor=actor, name="Assistant", template=template, positions=[position]
    )
    return owner, deployment.agents.get(member=owner)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--skills", type=int, default=16)
    parser.add_argument("--turns", type=int, default=12)
    args = parser.parse_args()
    prepare_environment()
    owner, agent = setup(args.skills)

    from cadre.agents.models import Run
    from cadre.agents.runtime.lifecycle import execution as engine
    from cadre.agents.runtime.lifecycle import prefetch
    from cadre.agents.runtime.lifecycle import services as runtime
    from cadre.memory import embeddings
    from cadre.tenancy.actors import member_actor
    from hub import skill_prefetch
    from hub.hooks import skills_for_run
    from hub.models import SkillInstall

    installed = SkillInstall.objects.filter(agent=agent, version__isnull=False).count()
    assert installed == args.skills, f"{installed} of {args.skills} skills installed"

    def turn(text, session=None):
        run = runtime.run_start(actor=member_actor(owner), agent=agent, text=text, session=session)
        assert engine.run_execute(run.pk) == Run.Status.COMPLETED
        run.refresh_from_db()
        return run

    first = turn(TOPIC_SWITCH)
    shifted = turn(TOPIC, first.session)
    assert prefetch.prefetch_next_turn(shifted.pk) == "prefetched"

    provider = embeddings.provider_for(embeddings.active_model())
    real_embed, embedded = provider.embed, []

    def counted(texts, **kwargs):
        embedded.append(len(texts))
        return real_embed(texts, **kwargs)

    provider.embed = counted
    config = {"semantic": True}
    ttl = skill_prefetch.settings.CADRE_PREFETCH_TTL_SECONDS
    times = {"plain": [], "fetched": []}
    texts = {"plain": [], "fetched": []}
    same, served = 0, 0
    for n in range(args.turns + 1):
        text = FOLLOW_UPS[n % len(FOLLOW_UPS)]
        run = runtime.run_start(
            actor=member_actor(owner), agent=agent, text=text, session=first.session
        )
        outputs = {}
        for name, ttl_now in (("plain", 0), ("fetched", ttl)):
            skill_prefetch.settings.CADRE_PREFETCH_TTL_SECONDS = ttl_now  # 0: no prefetch
            embedded.clear()
            start = time.perf_counter()
            outputs[name] = skills_for_run(run, agent, config=config)
            times[name].append((time.perf_counter() - start) * 1000)
            texts[name].append(sum(embedded))
        skill_prefetch.settings.CADRE_PREFETCH_TTL_SECONDS = ttl
        Run.objects.filter(pk=run.pk).update(status=Run.Status.CANCELLED)
        if n == 0:  # warm-up (query plans, the model's first call)
            for values in (*times.values(), *texts.values()):
                values.clear()
            continue
        served += bool(outputs["fetched"].get("prefetched"))
        same += outputs["plain"]["bodies"] == outputs["fetched"]["bodies"]
    provider.embed = real_embed

    def p90(values):
        return sorted(values)[int(0.9 * (len(values) - 1))]

    med = {name: statistics.median(values) for name, values in times.items()}
    print(f"skills={args.skills} follow-up turns={args.turns} model=all-MiniLM-L6-v2 (local)")
    print(f"{'skills hook':<30}{'no prefetch':>14}{'prefetch':>12}")
    print(f"{'median ms':<30}{med['plain']:>14.1f}{med['fetched']:>12.1f}")
    print(f"{'p90 ms':<30}{p90(times['plain']):>14.1f}{p90(times['fetched']):>12.1f}")
    plain_texts, fetched_texts = statistics.mean(texts["plain"]), statistics.mean(texts["fetched"])
    print(f"{'texts embedded per turn':<30}{plain_texts:>14.1f}{fetched_texts:>12.1f}")
    print(f"served from prefetch: {served}/{args.turns}; same bodies: {same}/{args.turns}")
    print(f"skills_prefetch without={med['plain']:.1f}ms with={med['fetched']:.1f}ms")


if __name__ == "__main__":
    main()
