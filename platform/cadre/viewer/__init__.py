"""The Memory Viewer: the read model over memory, runs, skills and the Hub, and its API."""
