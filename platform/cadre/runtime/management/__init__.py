"""Management commands of the runtime app."""
