from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0003_templateversion_policy_chain"),
    ]

    operations = [
        migrations.RenameModel(old_name="OutboundMessage", new_name="AgentMessage"),
    ]
