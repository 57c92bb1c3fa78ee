"""Drives Hermes Agent's own mem0 memory provider (`plugins.memory.mem0.Mem0MemoryProvider`,
PyPI `hermes-agent`) against a Cadre base URL: run by tests/ecosystem/test_hermes_mem0.py with
the interpreter of Hermes's own virtualenv (tests/ecosystem/hermes/.venv), since hermes-agent
pins exact versions Cadre's environment cannot share.

The provider is configured as a Hermes user does it: MEM0_HOST (its self-hosted mode),
MEM0_API_KEY and MEM0_USER_ID in the environment, read from HERMES_HOME by the provider itself.
The test sets HERMES_HOME to a directory of its own; this script writes its config.yaml with
`security.allow_lazy_installs: false`, so the provider's lazy `mem0ai` install never runs.

stdin: a JSON list of [step, kwargs]:
  ["sync_turn", {"user": …, "assistant": …}]  the provider's after-turn path (a thread), awaited
  ["prefetch", {"query": …}]                  the before-turn recall (on_turn_start + prefetch)
  ["tool", {"name": …, "args": {…}}]          one of its tools (mem0_search, mem0_add, …)
stdout (last line): {"backend": <backend class>, "system_prompt": …, "results": [...]}, each
result the step's answer (a tool's answer parsed from its JSON) or {"error": …}."""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path


class Failures(logging.Handler):
    """The provider swallows errors of its background sync and logs them: collect those."""

    def __init__(self):
        super().__init__(level=logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def main() -> None:
    home = Path(os.environ["HERMES_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text("security:\n  allow_lazy_installs: false\n")

    from plugins.memory.mem0 import Mem0MemoryProvider

    failures = Failures()
    logging.getLogger("plugins.memory.mem0").addHandler(failures)

    provider = Mem0MemoryProvider()
    assert provider.is_available(), "the provider says it is not configured"
    provider.initialize(session_id="cadre-test", platform="cli")
    results = []
    for turn, (step, kwargs) in enumerate(json.loads(sys.stdin.read()), start=1):
        failures.messages.clear()
        if step == "sync_turn":
            provider.sync_turn(kwargs["user"], kwargs["assistant"], session_id="cadre-test")
            thread = provider._sync_thread
            if thread is not None:
                thread.join(timeout=120)
            results.append({"ok": not failures.messages, "log": failures.messages[:]})
        elif step == "prefetch":
            provider.on_turn_start(turn, kwargs["query"])
            text = provider.prefetch(kwargs["query"], session_id="cadre-test")
            if not text:  # its hot-path wait is 3 s; a slow machine is not a wrong answer
                thread = provider._prefetch_thread
                if thread is not None:
                    thread.join(timeout=120)
                text = provider.prefetch(kwargs["query"], session_id="cadre-test")
            results.append({"text": text, "log": failures.messages[:]})
        elif step == "tool":
            answer = provider.handle_tool_call(kwargs["name"], kwargs.get("args", {}))
            results.append(json.loads(answer))
        else:
            results.append({"error": f"unknown step {step}"})
    output = {
        "backend": type(provider._backend).__name__,
        "system_prompt": provider.system_prompt_block(),
        "results": results,
    }
    provider.shutdown()
    print(json.dumps(output))


if __name__ == "__main__":
    main()
