from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0002_agent_subscriptions"),
    ]

    operations = [
        migrations.RenameModel(old_name="OutboundMessage", new_name="AgentMessage"),
    ]
