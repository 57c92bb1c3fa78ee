"""Where a published skill was taught: the Hub's `SKILL_ORIGINS` port, filled by skills.

A skill proposed from an employee's correction was taught by that employee, to the agents of
one template (the template of the run they corrected). Once its candidate is approved and
published, the Hub installs it into that template (or offers to) and tells the employee when
it is live (hub.distribution). Registered on import (the app's `ready()` imports this module).
"""

from __future__ import annotations

from cadre.skills.models import SkillProposal
from hub.distribution import SKILL_ORIGINS


@SKILL_ORIGINS.register
def package_origins(package) -> list[dict]:
    """Each confirmed proposal whose candidate published a version of `package`: the version,
    the template it was taught to and the member who taught it."""
    rows = (
        SkillProposal.objects.filter(
            organization_id=package.organization_id,
            status=SkillProposal.Status.CONFIRMED,
            candidate__published_version__package=package,
        )
        .order_by("pk")
        .values_list(
            "pk", "candidate__published_version_id", "run__version__template_id", "member_id"
        )
    )
    return [
        {"proposal": pk, "version": version_id, "template": template_id, "member": member_id}
        for pk, version_id, template_id, member_id in rows
    ]
