"""Drives MemTensor's own MemOS client (`memos.api.client.MemOSClient`, PyPI `MemoryOS`) against
a base URL: run by tests/ecosystem/test_memos_client.py with the interpreter of the client's
own virtualenv (tests/ecosystem/memos/.venv), since MemoryOS pins openai<2 and transformers<5.

argv: base_url api_key. stdin: a JSON list of [method, kwargs]. stdout (last line): a JSON list
with, per call, {"ok": <the client's answer as a dict>} or {"error": <exception class>,
"status": <HTTP status>, "body": <the answer's JSON>}."""

from __future__ import annotations

import json
import sys

from memos.api.client import MemOSClient


def answer(result):
    if hasattr(result, "model_dump"):
        return result.model_dump(mode="json")
    return result


def main() -> None:
    base_url, api_key = sys.argv[1], sys.argv[2]
    client = MemOSClient(api_key=api_key, base_url=base_url)
    results = []
    for method, kwargs in json.loads(sys.stdin.read()):
        try:
            results.append({"ok": answer(getattr(client, method)(**kwargs))})
        except Exception as error:  # reported to the test, which asserts on it
            response = getattr(error, "response", None)
            body = None
            if response is not None:
                try:
                    body = response.json()
                except ValueError:
                    body = response.text[:2000]
            results.append(
                {
                    "error": type(error).__name__,
                    "message": str(error)[:2000],
                    "status": getattr(response, "status_code", None),
                    "body": body,
                }
            )
    print(json.dumps(results))


if __name__ == "__main__":
    main()
