"""Memory.verification: a memory written into a shared scope (organization, department,
position) by someone without `memory.manage` waits as unverified until a holder accepts it.
Existing rows are verified (the database default), so nothing already sent stops being sent.
The triggers on memory_memory name their columns, so the new column leaves them unchanged."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0014_memory_last_sent"),
    ]

    operations = [
        migrations.AddField(
            model_name="memory",
            name="verification",
            field=models.CharField(
                choices=[
                    ("verified", "Verified"),
                    ("unverified", "Unverified (waiting for review)"),
                    ("rejected", "Rejected"),
                ],
                db_default="verified",
                default="verified",
                max_length=16,
            ),
        ),
        migrations.AddIndex(
            model_name="memory",
            index=models.Index(
                condition=models.Q(("verification", "verified"), _negated=True),
                fields=["organization", "scope_key"],
                name="memory_pending_review_idx",
            ),
        ),
    ]
