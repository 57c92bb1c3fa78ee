"""Role templates, deployments and the agent runtime."""

from django.apps import AppConfig


class AgentsConfig(AppConfig):
    name = "cadre.agents"
    label = "agents"
    verbose_name = "Agents"

    def ready(self) -> None:
        from cadre.agents.hooks import builtins  # noqa: F401
        from cadre.agents.runtime.services import confirmation_decided
        from cadre.agents.tools import builtins as tools  # noqa: F401
        from cadre.governance.confirmations import on_decided

        # The built-in hooks and tools register themselves on import; a decided confirmation
        # resumes the run paused on it.
        on_decided.register(confirmation_decided)
