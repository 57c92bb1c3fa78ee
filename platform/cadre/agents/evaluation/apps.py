"""Evaluation suites, cases, replays and their comparisons (a part of the agents layer)."""

from django.apps import AppConfig


class EvaluationConfig(AppConfig):
    name = "cadre.agents.evaluation"
    label = "evaluation"
    verbose_name = "Evaluation"

    def ready(self) -> None:
        from cadre.agents.evaluation import gates, recall  # lazy: ready()
        from cadre.memory import activation  # lazy: ready()

        # Switching search to a new embedding model can wait for a passing retrieval suite;
        # a re-embed held for a person replays it old model against new when it is filled.
        activation.REEMBED_FILLED.register(recall.reembed_filled)
        activation.GATES.register(
            "evaluation",
            activation.ActivationGate(
                held=gates.embedding_activation_held, check=gates.check_embedding_activation
            ),
        )
