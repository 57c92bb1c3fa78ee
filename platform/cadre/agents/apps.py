"""Role templates, deployments and the agent runtime."""

from django.apps import AppConfig


class AgentsConfig(AppConfig):
    name = "cadre.agents"
    label = "agents"
    verbose_name = "Agents"
