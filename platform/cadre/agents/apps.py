"""Role templates, deployments and the agent runtime (built in its own issue)."""

from django.apps import AppConfig


class AgentsConfig(AppConfig):
    name = "cadre.agents"
    label = "agents"
    verbose_name = "Agents"

    def ready(self) -> None:
        # The built-in hooks and tools register themselves on import.
        from cadre.agents.hooks import builtins  # noqa: F401
        from cadre.agents.tools import builtins as tools  # noqa: F401
