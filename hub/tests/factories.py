"""Helpers that arrange Hub state through the real services (tests only)."""

from __future__ import annotations

from cadre.tenancy.actors import member_actor
from hub import services
from hub.bundles import bundle_from_files
from hub.tests.skill_samples import skill_files


def publish(member, name="pdf-tools", version="1.0.0", *, files=None, **kwargs):
    """Publish `name@version` as `member` and return the SkillVersion."""
    bundle = bundle_from_files(files or skill_files(name), folder_name=name)
    outcome = services.package_publish(
        actor=member_actor(member), bundle=bundle, version=version, name=name, **kwargs
    )
    return outcome.version
