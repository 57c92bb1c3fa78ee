"""Agent tools: the registry, the built-ins and the executor that enforces permissions."""
