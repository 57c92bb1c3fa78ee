"""Role templates, deployments and the agent runtime."""

from django.apps import AppConfig


class AgentsConfig(AppConfig):
    name = "cadre.agents"
    label = "agents"
    verbose_name = "Agents"

    def ready(self) -> None:
        # Every import here is lazy: ready() — the modules need the loaded apps (the models).
        from cadre.agents import redaction, selectors  # lazy: ready()
        from cadre.agents.hooks import builtins  # lazy: ready()  # noqa: F401
        from cadre.agents.ratings import RUN_OUTCOMES  # lazy: ready()
        from cadre.agents.runtime.lifecycle.services import confirmation_decided  # lazy: ready()
        from cadre.agents.services import agents_stop_for_member  # lazy: ready()
        from cadre.agents.tools import builtins as tools  # lazy: ready()  # noqa: F401
        from cadre.governance import budgets, confirmations  # lazy: ready()
        from cadre.memory import agent_scopes  # lazy: ready()
        from cadre.memory.services import run_copies  # lazy: ready()
        from cadre.tenancy.services import member_deactivated  # lazy: ready()

        # The built-in hooks and tools register themselves on import; a decided confirmation
        # resumes the run paused on it; a deactivated member's agents stop at once, in the
        # deactivation's transaction; memory learns whose agent an agent scope is; a deleted
        # memory's text is redacted from the runs that carried it.
        confirmations.on_decided.register(confirmation_decided)
        run_copies.register("runs", redaction)
        member_deactivated.register(agents_stop_for_member)
        agent_scopes.lookups.register("agents", selectors.memory_agent_scopes)
        # Budgets (governance) may be set per role template and name it in messages.
        budgets.TEMPLATES.register("names", selectors.template_names)
        # The Memory Viewer's recall hit rate counts the runs people rated.
        RUN_OUTCOMES.register("runs", selectors.rated_runs)
