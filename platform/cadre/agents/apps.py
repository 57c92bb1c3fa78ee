"""Role templates, deployments and the agent runtime (built in its own issue)."""

from django.apps import AppConfig


class AgentsConfig(AppConfig):
    name = "cadre.agents"
    label = "agents"
    verbose_name = "Agents"

    def ready(self) -> None:
        from cadre.agents.services import agents_stop_for_member
        from cadre.tenancy.services import member_deactivated

        # A deactivated member's agents stop at once, in the deactivation's transaction.
        member_deactivated.register(agents_stop_for_member)
