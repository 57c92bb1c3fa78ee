"""LLM-judged answer accuracy on LoCoMo-format data: Cadre's retrieval against the whole
conversation in context, with the same answer model and the same judge model.

This is the figure Cadre's peers publish (MemOS, Mem0, Zep, Letta: "LoCoMo accuracy"), not
retrieval recall. Any OpenAI-compatible endpoint serves either model:

    .venv/bin/python bench/memory_qa.py --data ../shared/bench/locomo-dev.json \\
        --answer-base-url https://api.openai.com/v1 --answer-model gpt-4.1-mini-2025-04-14 \\
        --answer-api-key-file ~/.openai-key \\
        --judge-model gpt-4o-mini-2024-07-18 --limit 200 --json qa.json

    # a local model (Ollama, vLLM, LM Studio) answering and judging; no key needed:
    .venv/bin/python bench/memory_qa.py --answer-base-url http://127.0.0.1:11434/v1 \\
        --answer-model qwen2.5:14b-instruct --judge-model qwen2.5:14b-instruct --limit 50

Keys: `--answer-api-key`, `--answer-api-key-file` or the environment variable
QA_ANSWER_API_KEY (and the same for the judge: `--judge-*`, QA_JUDGE_API_KEY). The judge uses
the answer model's base URL, and then its key, unless given its own. Pin dated model names: they
are printed in the output's header, and a figure is only comparable with the same models.

`--data` is a LoCoMo-format JSON file (a list of conversations) or a directory of JSON files of
one conversation each (e.g. bench/data/locomo-zh/). Questions of categories 1-4 that name
evidence turns are asked (`--categories`; `--limit N` keeps the first N in file order, and
only their conversations are loaded: the file groups questions, so per-category figures need
the whole set). Category 5
(adversarial: the answer is "not mentioned") is skipped, as the peers' figures skip it. The
category numbers of the LoCoMo file are 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop
(snap-research/locomo's task_eval/evaluation.py; the paper lists them in another order, and
some peers' harnesses label them differently: compare per-category figures by question).

Methods (`--methods cadre,full`, both by default):
- cadre: every turn is written as a memory as bench/memory_retrieval.py does (its loader, one
  scope per conversation); the question is embedded and searched with Cadre's hybrid search
  (`--top-k`, 10); the hits, with their conversation dates, are the answer model's context.
  Retrieval (embedding the question + search) runs sequentially and is timed.
- full: the whole conversation, every session with its date, is the context (retrieval 0 ms).
The answer model answers from the context; the judge model grades the answer against the gold
answer as CORRECT or WRONG, generously (the same thing, date or period in other words counts as
correct: the LoCoMo/Mem0 convention). A judge reply that is neither counts as wrong and is
reported (`unparsed=`). `--workers` model calls run at once.

The judge is lenient by design, and a public audit of LoCoMo found the standard judge accepts
many deliberately wrong answers: read accuracy beside evidence recall@k (the share of the
question's evidence turns among the memories sent), which no model grades.

stdout: a `#` header (models, base URLs, data, embedding model), then one block per method:

    METHOD accuracy=0.xxx correct=N/N unparsed=N recall@10=0.xxx context_tokens=N
        retrieval_p50_ms=N.N retrieval_p95_ms=N.N            (one line)
    METHOD category=1 multi-hop accuracy=0.xxx correct=N/N recall@10=0.xxx
    ... (categories 2 temporal, 3 open-domain, 4 single-hop)

(`recall@10=-` for full: everything is in its context). Context tokens are
cadre.llm.estimate_tokens of the context. `--json FILE` writes every question's record. An
unreachable endpoint, a refused key or a failed model call (after `--retries`) ends the run
with exit status 2 and a one-line error (nothing is printed or written for a run cut short).
Runs in its own database (`cadre_bench_qa`, created
and dropped; `--keepdb` keeps it to skip re-embedding).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import memory_retrieval as retrieval  # noqa: E402  (sets sys.path and settings)

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
METHODS = ("cadre", "full")
DEFAULT_DATA = ROOT.parent / "shared" / "bench" / "locomo-dev.json"

ANSWER_SYSTEM = (
    "You answer questions about long conversations between two people. You are given context "
    "from those conversations: either memories retrieved for the question or the whole "
    "conversation, each piece marked with the date of the conversation it comes from.\n"
    "- Answer from the context only.\n"
    "- Relative times ('yesterday', 'last week', 'next month') are relative to the date of "
    "the conversation they were said in: answer with the date or period they point at.\n"
    "- Be brief: a few words or one short sentence, no explanation.\n"
    "- If the context does not settle it, give the most likely answer it supports.\n"
    "- Answer in the language of the question."
)

JUDGE_SYSTEM = (
    "You grade an answer to a question about a conversation, given the reference (gold) "
    "answer. Be lenient about form and strict about substance:\n"
    "- CORRECT when the answer names the same thing, person, fact or time as the reference, "
    "even if it is longer, worded differently, or more or less detailed, as long as it does "
    "not contradict the reference.\n"
    "- For times: a date, month, year or period that refers to the same time as the "
    "reference counts as CORRECT ('7 May 2023' and 'May 7th', 'the week before 9 June' and "
    "'early June 2023').\n"
    "- WRONG when it names something else, misses the point of the reference, contradicts it, "
    "or does not answer.\n"
    "Reply with a single word: CORRECT or WRONG."
)

_THINKING = re.compile(r"<think>.*?</think>", re.S | re.I)
_VERDICT = re.compile(r"\b(CORRECT|INCORRECT|WRONG)\b")


class BenchError(Exception):
    """A condition that ends the run with a one-line message (exit status 2)."""


@dataclass
class Question:
    number: int  # the conversation's position (1-based), its memory scope agent:<number>
    sample_id: str
    category: int
    question: str
    gold: str
    evidence: set[str]


@dataclass
class Endpoint:
    role: str
    base_url: str
    model: str
    client: object
    timeout: float


# --- input ------------------------------------------------------------------------------------


def read_conversations(path: Path) -> list[dict]:
    """A LoCoMo-format file (a list of conversations, or one) or a directory of such files."""
    try:
        data = retrieval.read_data(path)
    except (OSError, ValueError) as exc:
        raise BenchError(f"cannot read {path}: {exc}") from None
    except SystemExit as exc:  # no conversations
        raise BenchError(str(exc)) from None
    for conversation in data:
        if not isinstance(conversation, dict) or "conversation" not in conversation:
            raise BenchError(f"{path}: not LoCoMo-format conversations")
    return data


def select_questions(data: list[dict], categories: set[int], limit: int) -> list[Question]:
    questions = []
    for number, sample in enumerate(data, start=1):
        for qa in sample.get("qa", []):
            evidence = retrieval.evidence_ids(qa.get("evidence"))
            if qa.get("category") not in categories or not evidence or "answer" not in qa:
                continue
            questions.append(
                Question(
                    number=number,
                    sample_id=str(sample.get("sample_id", number)),
                    category=qa["category"],
                    question=str(qa["question"]),
                    gold=str(qa["answer"]),
                    evidence=evidence,
                )
            )
    if limit:
        questions = questions[:limit]
    if not questions:
        raise BenchError("no questions with evidence in the selected categories")
    return questions


# --- contexts ---------------------------------------------------------------------------------


def _day(moment) -> str:
    return f"{moment.day} {moment:%B %Y}"


def cadre_context(hits) -> str:
    lines = [f"[{_day(hit.memory.observed_at)}] {hit.memory.content}" for hit in hits]
    return "Memories retrieved for the question, most relevant first:\n" + "\n".join(lines)


def full_context(conversation: dict) -> str:
    parts, current = ["The whole conversation, session by session:"], None
    for session, moment, _, turn in retrieval.turns(conversation):
        if session != current:
            current = session
            parts.append(f"\nSession {session} ({_day(moment)}, {moment:%H:%M}):")
        parts.append(retrieval.turn_content(turn))
    return "\n".join(parts)


# --- models -----------------------------------------------------------------------------------


def _api_key(args, role: str) -> str | None:
    direct, file = getattr(args, f"{role}_api_key"), getattr(args, f"{role}_api_key_file")
    if direct:
        return direct
    if file:
        try:
            return Path(file).expanduser().read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise BenchError(f"--{role}-api-key-file: {exc}") from None
    return os.environ.get(f"QA_{role.upper()}_API_KEY") or None


def endpoints(args) -> tuple[Endpoint, Endpoint]:
    import openai

    answer_key = _api_key(args, "answer")
    judge_url = args.judge_base_url or args.answer_base_url
    judge_key = _api_key(args, "judge")
    if judge_key is None and judge_url.rstrip("/") == args.answer_base_url.rstrip("/"):
        judge_key = answer_key  # the same endpoint: never another host's key

    def make(role, url, model, key):
        # A local endpoint may take no key; the client insists on one.
        client = openai.OpenAI(
            base_url=url, api_key=key or "unused", timeout=args.timeout, max_retries=args.retries
        )
        return Endpoint(role=role, base_url=url, model=model, client=client, timeout=args.timeout)

    return (
        make("answer", args.answer_base_url, args.answer_model, answer_key),
        make("judge", judge_url, args.judge_model, judge_key),
    )


def preflight(endpoint: Endpoint) -> None:
    """Fail fast (before loading and embedding) on an endpoint that cannot be reached or
    refuses the key; an endpoint without a model list is checked by its first call."""
    import openai

    client = endpoint.client.with_options(max_retries=1, timeout=min(endpoint.timeout, 20))
    try:
        listed = [model.id for model in client.models.list()]
    except openai.APIConnectionError as exc:
        raise BenchError(
            f"{endpoint.role} model endpoint {endpoint.base_url} unreachable: {exc}"
        ) from None
    except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
        raise BenchError(
            f"{endpoint.role} model endpoint {endpoint.base_url} refused the API key "
            f"(HTTP {exc.status_code})"
        ) from None
    except openai.APIError:
        return
    if listed and endpoint.model not in listed:
        print(
            f"warning: {endpoint.role} model {endpoint.model!r} is not in the list "
            f"{endpoint.base_url} offers",
            file=sys.stderr,
        )


def chat(endpoint: Endpoint, system: str, user: str, temperature: float) -> str:
    import openai

    try:
        response = endpoint.client.chat.completions.create(
            model=endpoint.model,
            messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
            temperature=temperature,
        )
    except openai.APIConnectionError as exc:
        raise BenchError(
            f"{endpoint.role} model endpoint {endpoint.base_url} unreachable: {exc}"
        ) from None
    except openai.APIStatusError as exc:
        raise BenchError(
            f"{endpoint.role} model {endpoint.model!r} at {endpoint.base_url} answered "
            f"HTTP {exc.status_code}: {exc.message}"
        ) from None
    choices = getattr(response, "choices", None) or []
    text = (choices[0].message.content if choices else None) or ""
    return _THINKING.sub("", text).strip()


def parse_verdict(reply: str) -> str:
    """CORRECT, WRONG, or UNPARSED (neither, or both): UNPARSED counts as wrong."""
    found = {"WRONG" if word == "INCORRECT" else word for word in _VERDICT.findall(reply.upper())}
    return found.pop() if len(found) == 1 else "UNPARSED"


def answer_and_judge(record: dict, context: str, answer: Endpoint, judge: Endpoint, args):
    started = time.perf_counter()
    record["answer"] = chat(
        answer,
        ANSWER_SYSTEM,
        f"{context}\n\nQuestion: {record['question']}\nAnswer:",
        args.temperature,
    )
    record["answer_ms"] = round((time.perf_counter() - started) * 1000, 1)
    started = time.perf_counter()
    reply = chat(
        judge,
        JUDGE_SYSTEM,
        f"Question: {record['question']}\nReference answer: {record['gold']}\n"
        f"Answer to grade: {record['answer']}\n\nCORRECT or WRONG?",
        args.temperature,
    )
    record["judge_ms"] = round((time.perf_counter() - started) * 1000, 1)
    record["judge_reply"] = reply
    record["verdict"] = parse_verdict(reply)
    record["correct"] = record["verdict"] == "CORRECT"


# --- the run ----------------------------------------------------------------------------------


def retrieve(args, data: list[dict], questions: list[Question]) -> list[tuple[dict, str]]:
    """Load the conversations as memories and search each question; (record, context)."""
    from cadre.llm import estimate_tokens
    from cadre.memory import embeddings, selectors
    from cadre.tenancy.models import Organization

    digest = hashlib.sha256(
        json.dumps(data, sort_keys=True, ensure_ascii=False).encode()
    ).hexdigest()[:12]
    organization, _ = Organization.objects.get_or_create(
        slug=f"bench-qa-{digest}-{len(data)}", defaults={"name": f"QA benchmark {digest}"}
    )
    by_scope = retrieval.load(data, organization, args.embed_batch)
    # Read through the memory gate as a named system reader (not audited: the benchmark's own
    # conversations, sent to the models the person running it chose).
    reader = selectors.system_reader(
        organization, job="benchmark", reason="measure answer accuracy on LoCoMo"
    )
    model = embeddings.active_model()
    provider = embeddings.provider_for(model)

    def search(question: Question) -> list:
        return list(
            selectors.memory_search(
                actor=reader,
                scope_keys=[f"agent:{question.number}"],
                query=question.question,
                mode="hybrid",
                query_vector=provider.embed([question.question])[0],
                top_k=args.top_k,
                force=True,  # every question is asked, whatever its words
            )
        )

    search(questions[0])  # load the local model and warm the database outside the timings
    out = []
    for question in questions:
        started = time.perf_counter()
        hits = search(question)
        elapsed = (time.perf_counter() - started) * 1000
        found = [by_scope[question.number].get(hit.memory.pk) for hit in hits]
        context = cadre_context(hits)
        record = _record("cadre", question)
        record.update(
            retrieved=found,
            recall=len(question.evidence & set(found)) / len(question.evidence),
            retrieval_ms=round(elapsed, 2),
            context_tokens=estimate_tokens(context),
        )
        out.append((record, context))
    return out


def _record(method: str, question: Question) -> dict:
    return {
        "method": method,
        "sample_id": question.sample_id,
        "category": question.category,
        "question": question.question,
        "gold": question.gold,
        "evidence": sorted(question.evidence),
    }


def full_history(data: list[dict], questions: list[Question]) -> list[tuple[dict, str]]:
    from cadre.llm import estimate_tokens

    contexts: dict[int, tuple[str, int]] = {}
    out = []
    for question in questions:
        if question.number not in contexts:
            text = full_context(data[question.number - 1]["conversation"])
            contexts[question.number] = (text, estimate_tokens(text))
        context, tokens = contexts[question.number]
        record = _record("full", question)
        record.update(recall=None, retrieval_ms=0.0, context_tokens=tokens)
        out.append((record, context))
    return out


def evaluate(args, data, questions, answer: Endpoint, judge: Endpoint) -> list[dict]:
    from cadre.memory import embeddings

    args.embedding_model = embeddings.active_model().name if "cadre" in args.methods else "-"
    # Only the conversations the questions come from are loaded and embedded.
    data = data[: max(q.number for q in questions)]
    jobs: list[tuple[dict, str]] = []
    for method in args.methods:
        if method == "cadre":
            started = time.perf_counter()
            jobs += retrieve(args, data, questions)
            print(
                f"retrieval: {len(questions)} questions in {time.perf_counter() - started:.1f}s",
                file=sys.stderr,
            )
        else:
            jobs += full_history(data, questions)
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=max(1, args.workers)) as pool:
        futures = [
            pool.submit(answer_and_judge, record, context, answer, judge, args)
            for record, context in jobs
        ]
        try:
            for future in futures:
                future.result()
        except BaseException:
            for future in futures:
                future.cancel()
            raise
    print(
        f"models: {len(jobs)} answers and judgements in {time.perf_counter() - started:.1f}s",
        file=sys.stderr,
    )
    return [record for record, _ in jobs]


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]


def _share(part: float, whole: int) -> str:
    return f"{part / whole:.3f}" if whole else "-"


def report(args, records: list[dict], conversations: int, questions: int) -> list[str]:
    k = args.top_k
    lines = [
        f"# memory_qa answer_model={args.answer_model} answer_base_url={args.answer_base_url}",
        f"# judge_model={args.judge_model} "
        f"judge_base_url={args.judge_base_url or args.answer_base_url}",
        f"# data={args.data} conversations={conversations} questions={questions} "
        f"categories={','.join(map(str, args.categories))} top_k={k} "
        f"embedding={args.embedding_model} temperature={args.temperature}",
    ]
    for method in args.methods:
        rows = [r for r in records if r["method"] == method]
        correct = sum(r["correct"] for r in rows)
        unparsed = sum(r["verdict"] == "UNPARSED" for r in rows)
        recall = _share(sum(r["recall"] for r in rows), len(rows)) if method == "cadre" else "-"
        tokens = sum(r["context_tokens"] for r in rows) / len(rows) if rows else 0
        latency = [r["retrieval_ms"] for r in rows]
        lines.append("")
        lines.append(
            f"{method} accuracy={_share(correct, len(rows))} correct={correct}/{len(rows)} "
            f"unparsed={unparsed} recall@{k}={recall} context_tokens={round(tokens)} "
            f"retrieval_p50_ms={percentile(latency, 50):.1f} "
            f"retrieval_p95_ms={percentile(latency, 95):.1f}"
        )
        for category in args.categories:
            subset = [r for r in rows if r["category"] == category]
            hits = sum(r["correct"] for r in subset)
            recall = (
                _share(sum(r["recall"] for r in subset), len(subset)) if method == "cadre" else "-"
            )
            lines.append(
                f"{method} category={category} {CATEGORIES[category]} "
                f"accuracy={_share(hits, len(subset))} correct={hits}/{len(subset)} "
                f"recall@{k}={recall}"
            )
    return lines


def _categories(text: str) -> list[int]:
    try:
        values = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers like 1,2,3,4, got {text!r}") from None
    if not values or any(value not in CATEGORIES for value in values):
        raise argparse.ArgumentTypeError(
            "categories are 1-4 (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop); "
            "5 (adversarial) is not measured"
        )
    return values


def _methods(text: str) -> list[str]:
    values = [part.strip() for part in text.split(",") if part.strip()]
    if not values or any(value not in METHODS for value in values):
        raise argparse.ArgumentTypeError(f"methods are {','.join(METHODS)}, got {text!r}")
    return list(dict.fromkeys(values))


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="file or directory")
    parser.add_argument("--limit", type=int, default=0, help="the first N questions")
    parser.add_argument("--categories", type=_categories, default=[1, 2, 3, 4])
    parser.add_argument("--methods", type=_methods, default=list(METHODS))
    parser.add_argument("--top-k", type=int, default=10)
    for role in ("answer", "judge"):
        parser.add_argument(
            f"--{role}-base-url",
            required=role == "answer",
            help="OpenAI-compatible base URL" + (" (default: the answer's)" * (role == "judge")),
        )
        parser.add_argument(f"--{role}-model", required=True, help="a pinned model name")
        parser.add_argument(f"--{role}-api-key", help=f"else QA_{role.upper()}_API_KEY")
        parser.add_argument(f"--{role}-api-key-file")
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--workers", type=int, default=4, help="model calls at once")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per model call")
    parser.add_argument("--retries", type=int, default=3, help="per model call")
    parser.add_argument("--json", type=Path, help="write every question's record here")
    parser.add_argument("--database", default="cadre_bench_qa")
    parser.add_argument("--keepdb", action="store_true", help="keep (and reuse) the database")
    parser.add_argument("--embed-batch", type=int, default=256)
    return parser


def main(argv: list[str] | None = None, *, own_database: bool = True) -> int:
    """Exit status: 0 done, 2 an error reported on one line. `own_database=False` runs in the
    database Django is already connected to (the tests')."""
    args = parser().parse_args(argv)
    try:
        data = read_conversations(args.data)
        questions = select_questions(data, set(args.categories), args.limit)
        answer, judge = endpoints(args)
        preflight(answer)
        if (judge.base_url, judge.client.api_key) != (answer.base_url, answer.client.api_key):
            preflight(judge)
        result: list[dict] = []

        def job(_args) -> None:
            result.extend(evaluate(args, data, questions, answer, judge))

        if own_database and "cadre" in args.methods:
            retrieval.run(args, job=job)
        else:
            import django

            django.setup()
            job(args)
    except BenchError as exc:
        print(f"memory_qa: error: {exc}", file=sys.stderr)
        return 2
    for line in report(args, result, len({q.number for q in questions}), len(questions)):
        print(line)
    for record in result:
        if record["verdict"] == "UNPARSED":
            print(
                f"judge reply neither CORRECT nor WRONG (counted wrong): {record['method']} "
                f"{record['question']!r}: {record['judge_reply']!r}",
                file=sys.stderr,
            )
    if args.json:
        header = {
            key: str(value) if isinstance(value, Path) else value
            for key, value in vars(args).items()
            if "api_key" not in key
        }
        args.json.write_text(
            json.dumps({"run": header, "records": result}, ensure_ascii=False, indent=1),
            encoding="utf-8",
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
