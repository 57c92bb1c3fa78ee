"""Role templates, deployments and the agent runtime."""

from django.apps import AppConfig


class AgentsConfig(AppConfig):
    name = "cadre.agents"
    label = "agents"
    verbose_name = "Agents"

    def ready(self) -> None:
        from cadre.agents.runtime.services import confirmation_decided
        from cadre.governance.confirmations import on_decided

        # A decided confirmation resumes the run paused on it.
        on_decided.register(confirmation_decided)
