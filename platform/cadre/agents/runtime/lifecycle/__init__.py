"""The runtime's top floor: starting, executing, finishing and resuming runs, and what follows
a finished run (after-run hooks, prefetch, prompt-cache warm-up); event triggers."""
