"""The agent runtime, in floors; a floor imports only the floors below it (contract
"runtime-floors" in pyproject.toml):

- `lifecycle` — a run's start, its execution (one worker at a time: the run lock), finish,
  resume and waits, the after-run hooks, the next turn's prefetch and warm-up, event triggers;
  `cadre.agents.tasks` adapts it to Celery.
- `engine` — the loop: model step, tool calls, until a reply; how the loop ended.
- `steps` — one step each: the execution context (replayed or done and recorded), context
  assembly, the model step, the tool executor, delegation.
- `records` — what the floors above write and read: progress records and events, `load_run`,
  tracing, what a run is charged to, `model_side`, the task names it queues, grants and budget
  constants, delivery channels, crash points for tests.

Hooks (`cadre.agents.hooks`) and tools (`cadre.agents.tools`, `cadre.agents.mcp_tools`,
`cadre.agents.subscriptions`) run inside steps and import only `records` (contract
"hooks-tools-below-engine"). A floor calls only the floors below it too, callbacks included
(tests/agents/test_runtime_floors.py): the lifecycle passes the engine nothing to call back, the
engine returns an `Outcome` the lifecycle finishes the run with, and what must start a run from
below (a delegation, a publication) queues it by task name.
"""
