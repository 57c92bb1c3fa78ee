"""Skill candidates, quality scoring, approval stages and memory-to-skill."""

from django.apps import AppConfig


class SkillsConfig(AppConfig):
    name = "cadre.skills"
    label = "skills"
    verbose_name = "Skills"

    def ready(self) -> None:
        # Registers the post_process:skill_backflow hook with the agents' hook registry.
        from cadre.api.middleware import BodySizeLimitMiddleware
        from cadre.skills import hooks  # noqa: F401
        from hub.apps import UPLOAD_BODY_LIMIT

        # Candidate uploads and resubmissions carry a bundle, as Hub publishes do.
        BodySizeLimitMiddleware.overrides["/api/v1/skills/candidates/"] = UPLOAD_BODY_LIMIT
