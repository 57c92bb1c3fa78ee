from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0006_memory_viewer"),
    ]

    operations = [
        migrations.AddField(
            model_name="contextrecord",
            name="passed_over",
            field=models.JSONField(blank=True, default=None, null=True),
        ),
    ]
