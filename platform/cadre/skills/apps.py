"""Skill candidates, quality scoring, approval stages and memory-to-skill."""

from django.apps import AppConfig


def feedback_verdict(text: str) -> str | None:
    """The employee's next message as feedback on the previous answer (for its experience)."""
    from cadre.skills import drafting

    if drafting.is_affirmation(text):
        return "affirmation"
    return "correction" if drafting.is_correction(text) else None


class SkillsConfig(AppConfig):
    name = "cadre.skills"
    label = "skills"
    verbose_name = "Skills"

    def ready(self) -> None:
        # Registers the post_process:skill_backflow hook with the agents' hook registry.
        from cadre.agents.runtime.experience import FEEDBACK_CLASSIFIERS
        from cadre.api.middleware import BodySizeLimitMiddleware
        from cadre.skills import hooks  # noqa: F401
        from hub.apps import UPLOAD_BODY_LIMIT

        # Candidate uploads and resubmissions carry a bundle, as Hub publishes do.
        BodySizeLimitMiddleware.overrides["/api/v1/skills/candidates/"] = UPLOAD_BODY_LIMIT
        FEEDBACK_CLASSIFIERS.register("skills", feedback_verdict)
        from cadre.memory.viewer.ports import DERIVED_SKILLS
        from cadre.skills.viewer_trail import skills_from_memory

        DERIVED_SKILLS.register("skills", skills_from_memory)
