"""Skill candidates, quality scoring and approval (built in its own issue)."""

from django.apps import AppConfig


class SkillsConfig(AppConfig):
    name = "cadre.skills"
    label = "skills"
    verbose_name = "Skills"
