"""Turn a hand-written `[[TYPE:value]]` markup file into JSONL labels.

.venv/bin/python bench/data/build_handwritten.py                        # masking_handwritten
.venv/bin/python bench/data/build_handwritten.py masking_im_glue.txt    # -> masking_im_glue.jsonl
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).parent
MARK = re.compile(r"\[\[([A-Z_]+):(.+?)\]\]", re.S)


def convert(line: str) -> dict:
    line = line.replace("\\n", "\n")
    text, entities, cursor = "", [], 0
    for match in MARK.finditer(line):
        text += line[cursor : match.start()]
        start = len(text)
        text += match.group(2)
        entities.append({"start": start, "end": len(text), "type": match.group(1)})
        cursor = match.end()
    text += line[cursor:]
    return {"text": text, "entities": entities}


def main() -> None:
    name = sys.argv[1] if len(sys.argv) > 1 else "masking_handwritten.txt"
    source = (HERE / name).read_text(encoding="utf-8").splitlines()
    rows = [convert(line) for line in source if line.strip() and not line.startswith("#")]
    out = (HERE / name).with_suffix(".jsonl")
    out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    print(f"wrote {len(rows)} lines to {out}")


if __name__ == "__main__":
    main()
