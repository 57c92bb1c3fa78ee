"""Role templates, deployments and the agent runtime."""

from django.apps import AppConfig


class AgentsConfig(AppConfig):
    name = "cadre.agents"
    label = "agents"
    verbose_name = "Agents"

    def ready(self) -> None:
        from cadre.agents import redaction
        from cadre.agents.hooks import builtins  # noqa: F401
        from cadre.agents.runtime.services import confirmation_decided
        from cadre.agents.selectors import memory_agent_scopes, rated_runs, template_names
        from cadre.agents.services import agents_stop_for_member
        from cadre.agents.tools import builtins as tools  # noqa: F401
        from cadre.governance.budgets import TEMPLATES as budget_templates
        from cadre.governance.confirmations import on_decided
        from cadre.memory.agent_scopes import lookups as memory_agent_lookups
        from cadre.memory.services import run_copies
        from cadre.memory.viewer.ports import RUN_OUTCOMES
        from cadre.tenancy.services import member_deactivated

        # The built-in hooks and tools register themselves on import; a decided confirmation
        # resumes the run paused on it; a deactivated member's agents stop at once, in the
        # deactivation's transaction; memory learns whose agent an agent scope is; a deleted
        # memory's text is redacted from the runs that carried it.
        on_decided.register(confirmation_decided)
        run_copies.register("runs", redaction)
        member_deactivated.register(agents_stop_for_member)
        memory_agent_lookups.register("agents", memory_agent_scopes)
        # Budgets (governance) may be set per role template and name it in messages.
        budget_templates.register("names", template_names)
        # The Memory Viewer's recall hit rate counts the runs people rated.
        RUN_OUTCOMES.register("runs", rated_runs)
