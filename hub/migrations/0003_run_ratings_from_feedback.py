"""Run feedback given before runs carried their own rating: each rated run takes the newest
rating its skill usages hold (the feedback endpoint gave them all the same one)."""

from django.db import migrations
from django.db.models import OuterRef, Subquery


def ratings_from_feedback(apps, schema_editor):
    Run = apps.get_model("agents", "Run")
    SkillUsage = apps.get_model("hub", "SkillUsage")
    newest = (
        SkillUsage.objects.filter(run=OuterRef("pk"))
        .exclude(feedback="")
        .order_by("-feedback_at", "-pk")
    )
    Run.objects.filter(rating="", pk__in=newest.values("run")).update(
        rating=Subquery(newest.values("feedback")[:1]),
        rating_note=Subquery(newest.values("feedback_note")[:1]),
        rated_at=Subquery(newest.values("feedback_at")[:1]),
    )


class Migration(migrations.Migration):
    dependencies = [
        ("hub", "0002_distribution_and_outcomes"),
        ("agents", "0010_run_rating"),
    ]

    operations = [migrations.RunPython(ratings_from_feedback, migrations.RunPython.noop)]
