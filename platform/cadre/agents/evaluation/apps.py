"""Evaluation suites, cases, replays and their comparisons (a part of the agents layer)."""

from django.apps import AppConfig


class EvaluationConfig(AppConfig):
    name = "cadre.agents.evaluation"
    label = "evaluation"
    verbose_name = "Evaluation"
