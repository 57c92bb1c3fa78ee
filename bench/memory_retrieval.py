"""Memory retrieval quality on a LoCoMo-format file: evidence recall@5/10/20 of lexical-only,
vector-only and Cadre's hybrid search, side by side, through the product's search code.

    python bench/memory_retrieval.py --data ../shared/bench/locomo-dev.json

Each dialog turn becomes one Memory (scope agent:<n> per conversation, `observed_at` = the
session date, `search_text` = text.lexical_document), embedded with embed_memories under the
configured model. Each question (category 5 and evidence-less ones skipped) is searched within
its own conversation's scope. stdout gets exactly one line per method:

    METHOD R@5=0.xxx R@10=0.xxx R@20=0.xxx words@10=NNN

and stderr the context-size comparison and timings. Runs in its own database (default
`cadre_bench_retrieval`, created and dropped; `--keepdb` keeps it to skip re-embedding).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "platform")]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cadre.settings")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LOG_LEVEL", "WARNING")

METHODS = ("lexical", "vector", "hybrid")
_EVIDENCE = re.compile(r"D\d+:\d+")


def evidence_ids(raw: list) -> set[str]:
    """LoCoMo evidence entries may hold several ids ('D8:6; D9:17') or stray typos ('D:11:26')."""
    found: set[str] = set()
    for entry in raw or []:
        text = str(entry).replace("D:", "D")
        found.update(_EVIDENCE.findall(text))
    return found


def parse_session_date(value: str) -> datetime:
    """'1:56 pm on 8 May, 2023' -> aware datetime (UTC)."""
    cleaned = " ".join(value.replace(",", ", ").split()).replace(" ,", ",")
    for pattern in ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y", "%Y-%m-%d %H:%M"):
        try:
            return datetime.strptime(cleaned, pattern).replace(tzinfo=UTC)
        except ValueError:
            continue
    raise ValueError(f"unrecognized session date {value!r}")


def turns(conversation: dict):
    """(session number, session date, turn index in session, turn) in order."""
    sessions = sorted(
        int(key.split("_")[1])
        for key in conversation
        if re.fullmatch(r"session_\d+", key) and isinstance(conversation[key], list)
    )
    for number in sessions:
        moment = parse_session_date(conversation[f"session_{number}_date_time"])
        for index, turn in enumerate(conversation[f"session_{number}"]):
            yield number, moment, index, turn


def turn_content(turn: dict) -> str:
    content = f"{turn['speaker']}: {turn['text']}"
    caption = turn.get("blip_caption")
    if caption:
        content += f" [shared an image: {caption}]"
    return content


def load(data: list[dict], organization, embed_batch: int) -> dict[int, dict[int, str]]:
    """Write every turn as a Memory (once per database) and embed them; return, per scope id,
    memory id -> dia_id."""
    from cadre.memory import embeddings
    from cadre.memory.models import Memory, Scope
    from cadre.memory.text import lexical_document

    by_scope: dict[int, dict[int, str]] = {}
    for number, sample in enumerate(data, start=1):
        key = f"agent:{number}"
        existing = dict(
            Memory.objects.filter(organization=organization, scope_key=key).values_list(
                "id", "attributes__dia_id"
            )
        )
        if not existing:
            rows = []
            for session, moment, index, turn in turns(sample["conversation"]):
                content = turn_content(turn)
                attributes = {
                    "speaker": turn["speaker"],
                    "dia_id": turn["dia_id"],
                    "session": session,
                    "session_date": moment.isoformat(),
                    "turn": index,
                }
                rows.append(
                    Memory(
                        organization=organization,
                        scope=Scope.AGENT,
                        scope_id=number,
                        scope_key=key,
                        kind="fact",
                        content=content,
                        attributes=attributes,
                        search_text=lexical_document(content, attributes),
                        source_kind="import",
                        author_label=turn["speaker"],
                        observed_at=moment,
                        valid_from=moment,
                        created_at=moment,
                        content_hash=hashlib.sha256(content.encode()).hexdigest(),
                        conversation_id=f"{sample.get('sample_id', number)}/session_{session}",
                    )
                )
            created = Memory.objects.bulk_create(rows, batch_size=500)
            existing = {memory.pk: memory.attributes["dia_id"] for memory in created}
        by_scope[number] = existing
    started = time.perf_counter()
    model = embeddings.active_model()
    pending = Memory.objects.filter(organization=organization).exclude(embeddings__model=model)
    written = embeddings.embed_memories(
        pending.iterator(chunk_size=512), model, batch_size=embed_batch
    )
    if written:
        print(f"embedded {written} turns in {time.perf_counter() - started:.1f}s", file=sys.stderr)
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memory_memory")
        cursor.execute("ANALYZE memory_memoryembedding")
    return by_scope


def run(args) -> None:
    import django

    django.setup()
    from django.db import connection
    from django.test.utils import setup_databases, teardown_databases

    connection.settings_dict["TEST"]["NAME"] = args.database
    old_config = setup_databases(
        verbosity=0, interactive=False, keepdb=args.keepdb, serialized_aliases=set()
    )
    try:
        evaluate(args)
    finally:
        if not args.keepdb:
            teardown_databases(old_config, verbosity=0)


def evaluate(args) -> None:
    from cadre.memory import embeddings, search, selectors
    from cadre.tenancy.models import Organization

    data = json.loads(Path(args.data).read_text(encoding="utf-8"))
    if args.limit_conversations:
        data = data[: args.limit_conversations]
    digest = hashlib.sha256(Path(args.data).read_bytes()).hexdigest()[:12]
    organization, _ = Organization.objects.get_or_create(
        slug=f"bench-{digest}-{len(data)}", defaults={"name": f"Retrieval benchmark {digest}"}
    )
    by_scope = load(data, organization, args.embed_batch)
    # Searched through the memory gate as a named system reader (not audited: the benchmark's
    # own synthetic conversations, shown to no one but the person running it).
    reader = selectors.system_reader(
        organization, job="benchmark", reason="measure retrieval recall on LoCoMo"
    )

    questions = []
    for number, sample in enumerate(data, start=1):
        for qa in sample.get("qa", []):
            evidence = evidence_ids(qa.get("evidence"))
            if qa.get("category") == 5 or not evidence:
                continue
            questions.append((number, str(qa["question"]), evidence))
    model = embeddings.active_model()
    started = time.perf_counter()
    vectors = embeddings.provider_for(model).embed([q for _, q, _ in questions])
    print(
        f"{len(questions)} questions embedded in {time.perf_counter() - started:.1f}s",
        file=sys.stderr,
    )

    history_words = [
        sum(len(turn_content(turn).split()) for *_, turn in turns(sample["conversation"]))
        for sample in data
    ]
    settings = search.DEFAULT_SETTINGS
    if args.set:
        settings = search.with_settings(
            **{
                k: float(v) if "." in v else int(v)
                for k, v in (item.split("=", 1) for item in args.set)
            }
        )
    lines = []
    for method in METHODS:
        recall = {5: 0.0, 10: 0.0, 20: 0.0}
        words = 0
        started = time.perf_counter()
        for (number, question, evidence), vector in zip(questions, vectors, strict=True):
            kwargs = {
                "actor": reader,
                "scope_keys": [f"agent:{number}"],
                "query": question,
                "mode": method,
                "query_vector": vector,
                "settings": settings,
                "force": True,  # every question is asked, whatever its words
            }
            top20 = selectors.memory_search(top_k=20, **kwargs)
            # The hybrid's candidate pool and MMR depend on top_k: rank the top 10 as asked.
            top10 = (
                selectors.memory_search(top_k=10, **kwargs) if method == "hybrid" else top20[:10]
            )
            ids = by_scope[number]
            found10 = [ids.get(hit.memory.pk) for hit in top10]
            found20 = [ids.get(hit.memory.pk) for hit in top20]
            recall[5] += len(evidence & set(found10[:5])) / len(evidence)
            recall[10] += len(evidence & set(found10)) / len(evidence)
            recall[20] += len(evidence & set(found20)) / len(evidence)
            words += sum(len(hit.memory.content.split()) for hit in top10)
        count = len(questions) or 1
        elapsed = time.perf_counter() - started
        calls = len(questions) * (2 if method == "hybrid" else 1)
        print(f"{method}: {elapsed / calls * 1000:.1f} ms per search", file=sys.stderr)
        lines.append(
            f"{method} R@5={recall[5] / count:.3f} R@10={recall[10] / count:.3f} "
            f"R@20={recall[20] / count:.3f} words@10={round(words / count)}"
        )
    print(
        f"context: full history {sum(history_words) / len(history_words):.0f} words per "
        f"conversation vs top-10 memories (words@10 below); {len(questions)} questions",
        file=sys.stderr,
    )
    for line in lines:
        print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="a LoCoMo-format JSON file")
    parser.add_argument("--limit-conversations", type=int, default=0)
    parser.add_argument("--database", default="cadre_bench_retrieval")
    parser.add_argument("--keepdb", action="store_true", help="keep (and reuse) the database")
    parser.add_argument("--embed-batch", type=int, default=256)
    parser.add_argument(
        "--set",
        nargs="*",
        metavar="NAME=VALUE",
        help="override SearchSettings fields (experiments)",
    )
    run(parser.parse_args())


if __name__ == "__main__":
    main()
