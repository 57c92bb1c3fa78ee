"""Convert REALTALK (Lee et al. 2025, github.com/danny911kr/REALTALK) conversations into the
LoCoMo format that bench/memory_retrieval.py loads with --data: held-back retrieval data that
nothing in Cadre was tuned on (docs/memory-retrieval.md, "Held-back measurements").

    python3 bench/realtalk_convert.py --source REALTALK/data --out var/bench/realtalk.json
    .venv/bin/python bench/memory_retrieval.py --data var/bench/realtalk.json

REALTALK's repository states no licence and holds real people's chats: fetch it yourself, keep
the converted file out of the repository (var/ is ignored).

Source files: REALTALK's data/Chat_<n>_<A>_<B>.json (real 21-day messaging-app conversations
between two people, with LoCoMo-style memory-probing questions and evidence dia_ids). Not its
data/locomo/ folder: that is LoCoMo's own ten conversations, re-split.

Sample, fixed before any question or turn text was read: the ten files in
chat-number order, shuffled with random.Random(34); walk that order and keep each conversation
whose turns still fit in a running total of <= MAX_TURNS (one that would overflow is skipped).
Every question of a kept conversation is kept. `--rest` writes the conversations that rule
skipped instead (a second held-back set, for a measurement after tuning on the development file).

What changes on the way (nothing is chosen by content):
- `clean_text` -> `text`; `blip_caption` is kept when present (the loader appends it); per-turn
  timestamps, image files/URLs and `events_session_N` are dropped (the loader reads none).
- `session_N_date_time` '29.12.2023, 22:42:04' -> '10:42 pm on 29 December, 2023' (the form the
  loader parses; LoCoMo's own form); seconds are dropped.
- `name.speaker_1/2` -> `conversation.speaker_a/b`; `sample_id` = 'realtalk-chat-<n>'.
- evidence: entries split into single ids the way the loader reads them ('D1:11; D3:18' ->
  two ids, 'D:11:26' -> 'D11:26'), after repairing REALTALK's id typos: a range 'D12:3-D12:5'
  is every id in it (the loader alone would read only its two ends), 'D 2:18' -> 'D2:18',
  '23:29' -> 'D23:29', 'D17;39' -> 'D17:39'. An id that names no turn of its conversation is
  dropped (REALTALK's per-day turn numbering has gaps: turns removed in its preprocessing), and
  a question left without evidence is dropped. Both are counted on stderr.

dia_ids are REALTALK's own ('D<day>:<n>', unique within a conversation); the day need not equal
the session number, which the loader does not require.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from datetime import datetime
from pathlib import Path

SEED = 34  # fixed before any conversation was read
MAX_TURNS = 7000  # ~15 min of ingestion at ~8 memories/s
_FILE = re.compile(r"Chat_(\d+)_.+\.json")
_SESSION = re.compile(r"session_(\d+)")
_EVIDENCE = re.compile(r"D\d+:\d+")  # as bench/memory_retrieval.py's evidence_ids()


def source_files(source: Path) -> list[Path]:
    """The ten REALTALK files in chat-number order."""
    files = [path for path in source.iterdir() if _FILE.fullmatch(path.name)]
    return sorted(files, key=lambda path: int(_FILE.fullmatch(path.name).group(1)))


def session_numbers(raw: dict) -> list[int]:
    return sorted(
        int(match.group(1))
        for key in raw
        if (match := _SESSION.fullmatch(key)) and isinstance(raw[key], list)
    )


def turn_count(raw: dict) -> int:
    return sum(len(raw[f"session_{number}"]) for number in session_numbers(raw))


def choose(files: list[Path], loaded: dict[Path, dict]) -> list[Path]:
    """The seeded sample: shuffled order, greedy fill up to MAX_TURNS."""
    order = list(files)
    random.Random(SEED).shuffle(order)
    chosen, total = [], 0
    for path in order:
        turns = turn_count(loaded[path])
        if total + turns <= MAX_TURNS:
            chosen.append(path)
            total += turns
    return chosen


def locomo_date(value: str) -> str:
    """'29.12.2023, 22:42:04' -> '10:42 pm on 29 December, 2023'."""
    moment = datetime.strptime(value.strip(), "%d.%m.%Y, %H:%M:%S")
    hour = moment.hour % 12 or 12
    meridiem = "am" if moment.hour < 12 else "pm"
    return f"{hour}:{moment.minute:02d} {meridiem} on {moment.day} {moment:%B}, {moment.year}"


def _expand_range(match: re.Match) -> str:
    day, first, last = (int(group) for group in match.groups())
    return " ".join(f"D{day}:{n}" for n in range(first, last + 1))


def split_evidence(raw: list) -> list[str]:
    """Single dia_ids, in order, from REALTALK's free-form evidence entries."""
    found: list[str] = []
    for entry in raw or []:
        text = str(entry).replace("D:", "D")
        text = re.sub(r"D\s+(?=\d)", "D", text)  # 'D 2:18'
        text = re.sub(r"(?<![D\d:])(\d+:\d+)", r"D\1", text)  # '23:29'
        text = re.sub(r"D(\d+);(\d+)(?!\d*:)", r"D\1:\2", text)  # 'D17;39'
        text = re.sub(r"D(\d+):(\d+)\s*-\s*(?:D\1:)?(\d+)", _expand_range, text)
        for dia_id in _EVIDENCE.findall(text):
            if dia_id not in found:
                found.append(dia_id)
    return found


def convert(path: Path, raw: dict, stats: dict) -> dict:
    number = int(_FILE.fullmatch(path.name).group(1))
    conversation = {
        "speaker_a": raw["name"]["speaker_1"],
        "speaker_b": raw["name"]["speaker_2"],
    }
    known: set[str] = set()
    for session in session_numbers(raw):
        conversation[f"session_{session}_date_time"] = locomo_date(
            raw[f"session_{session}_date_time"]
        )
        turns = []
        for turn in raw[f"session_{session}"]:
            dia_id = turn["dia_id"]
            if dia_id in known:
                raise SystemExit(f"{path.name}: duplicate dia_id {dia_id}")
            known.add(dia_id)
            converted = {"speaker": turn["speaker"], "dia_id": dia_id, "text": turn["clean_text"]}
            if turn.get("blip_caption"):
                converted["blip_caption"] = turn["blip_caption"]
            if not str(turn["clean_text"]).strip() and not turn.get("blip_caption"):
                stats["empty_turns"] += 1
            turns.append(converted)
        conversation[f"session_{session}"] = turns
    qa = []
    for question in raw["qa"]:
        evidence = split_evidence(question.get("evidence"))
        stats["unparsed_entries"] += sum(
            1
            for entry in question.get("evidence") or []
            if str(entry).strip() and not split_evidence([entry])
        )
        resolved = [dia_id for dia_id in evidence if dia_id in known]
        stats["dropped_ids"] += len(evidence) - len(resolved)
        if not resolved:
            stats["dropped_questions"] += 1
            continue
        qa.append(
            {
                "question": question["question"],
                "answer": question["answer"],
                "evidence": resolved,
                "category": question["category"],
            }
        )
    stats["turns"] += len(known)
    stats["questions"] += len(qa)
    return {"sample_id": f"realtalk-chat-{number}", "conversation": conversation, "qa": qa}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", required=True, help="REALTALK's data/ folder (Chat_*.json)")
    parser.add_argument("--out", required=True)
    parser.add_argument(
        "--rest", action="store_true", help="write the conversations the sample skipped instead"
    )
    args = parser.parse_args()
    files = source_files(Path(args.source))
    if len(files) != 10:
        raise SystemExit(f"expected REALTALK's 10 Chat_<n> files, found {len(files)}")
    loaded = {path: json.loads(path.read_text(encoding="utf-8")) for path in files}
    chosen = choose(files, loaded)
    if args.rest:
        chosen = [path for path in files if path not in chosen]
    stats = dict.fromkeys(
        (
            "turns",
            "questions",
            "dropped_ids",
            "unparsed_entries",
            "dropped_questions",
            "empty_turns",
        ),
        0,
    )
    data = [convert(path, loaded[path], stats) for path in chosen]
    Path(args.out).write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")
    print(
        f"{args.out}: {len(data)} conversations ({', '.join(s['sample_id'] for s in data)}), "
        f"{stats['turns']} turns, {stats['questions']} questions; dropped {stats['dropped_ids']} "
        f"evidence ids naming no turn, {stats['unparsed_entries']} evidence entries holding no id, "
        f"{stats['dropped_questions']} questions left without "
        f"evidence; {stats['empty_turns']} turns with neither text nor caption",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
