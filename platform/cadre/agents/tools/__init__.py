"""Agent tools: the registry and the built-ins (the executor that enforces permissions is
the runtime's, agents/runtime/steps/executor.py)."""
