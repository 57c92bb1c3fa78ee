"""Skill candidates, quality scoring, approval stages and memory-to-skill."""

from django.apps import AppConfig

from hub.apps import UPLOAD_BODY_LIMIT


def feedback_verdict(text: str) -> str | None:
    """The employee's next message as feedback on the previous answer (for its experience)."""
    from cadre.skills import drafting  # lazy: settings — drafting imports models

    if drafting.is_affirmation(text):
        return "affirmation"
    return "correction" if drafting.is_correction(text) else None


class SkillsConfig(AppConfig):
    name = "cadre.skills"
    label = "skills"
    verbose_name = "Skills"

    def ready(self) -> None:
        from cadre.agents.hooks.experience import FEEDBACK_CLASSIFIERS  # lazy: ready()
        from cadre.api.middleware import BodySizeLimitMiddleware  # lazy: ready()
        from cadre.memory.services.deletion import other_copies  # lazy: ready()

        # lazy: ready() — `hooks` registers the post_process:skill_backflow hook with the
        # agents' hooks on import, `origins` the Hub's SKILL_ORIGINS (an approved skill reaches
        # the template it was taught to); `redaction` is registered on memory's `other_copies`.
        from cadre.skills import (
            hooks,  # noqa: F401
            origins,  # noqa: F401
            redaction,  # lazy: ready()
        )

        # Candidate uploads and resubmissions carry a bundle, as Hub publishes do.
        BodySizeLimitMiddleware.overrides["/api/v1/skills/candidates/"] = UPLOAD_BODY_LIMIT
        FEEDBACK_CLASSIFIERS.register("skills", feedback_verdict)
        # A deleted memory's text is redacted from the drafts and candidates that quote it.
        other_copies.register("skills", redaction)
