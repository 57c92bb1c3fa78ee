"""The heatmap's usage rollup carries each memory's reader columns, kind and status (copied at
insert and recount, kept when the memory changes, filled here), so the heatmap narrows and
groups it without joining the memories."""

import importlib

from django.db import migrations, models

_0008 = importlib.import_module("cadre.memory.migrations.0008_memory_usage_rollup")
# 0008's versions of the functions replaced here (they write the rows without the columns).
FUNCTIONS_0008 = _0008.FORWARD[
    : _0008.FORWARD.index("CREATE OR REPLACE FUNCTION memory_usage_removed")
]

FORWARD = """
CREATE OR REPLACE FUNCTION memory_usage_recount(memory_ids bigint[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM memory_memoryusageday WHERE memory_id = ANY(memory_ids);
    INSERT INTO memory_memoryusageday
        (organization_id, memory_id, day, retrieved, sent, last_used, last_sent,
         scope, scope_key, subject_id, kind, memory_status)
    SELECT min(r.organization_id), i.memory_id, (r.created_at AT TIME ZONE 'UTC')::date,
           count(*),
           count(*) FILTER (WHERE i.status = 'sent' AND r.kind = 'model_call'),
           max(r.created_at),
           max(r.created_at) FILTER (WHERE i.status = 'sent' AND r.kind = 'model_call'),
           coalesce(min(m.scope), ''), coalesce(min(m.scope_key), ''),
           coalesce(min(m.subject_id), 0), coalesce(min(m.kind), ''),
           coalesce(min(m.status), '')
    FROM memory_contextrecorditem i
    JOIN memory_contextrecord r ON r.id = i.context_id
    LEFT JOIN memory_memory m ON m.id = i.memory_id
    WHERE i.memory_id = ANY(memory_ids)
    GROUP BY i.memory_id, (r.created_at AT TIME ZONE 'UTC')::date;
END $$;

CREATE OR REPLACE FUNCTION memory_usage_added() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO memory_memoryusageday
        (organization_id, memory_id, day, retrieved, sent, last_used, last_sent,
         scope, scope_key, subject_id, kind, memory_status)
    SELECT min(r.organization_id), i.memory_id, (r.created_at AT TIME ZONE 'UTC')::date,
           count(*),
           count(*) FILTER (WHERE i.status = 'sent' AND r.kind = 'model_call'),
           max(r.created_at),
           max(r.created_at) FILTER (WHERE i.status = 'sent' AND r.kind = 'model_call'),
           coalesce(min(m.scope), ''), coalesce(min(m.scope_key), ''),
           coalesce(min(m.subject_id), 0), coalesce(min(m.kind), ''),
           coalesce(min(m.status), '')
    FROM added_items i
    JOIN memory_contextrecord r ON r.id = i.context_id
    LEFT JOIN memory_memory m ON m.id = i.memory_id
    GROUP BY i.memory_id, (r.created_at AT TIME ZONE 'UTC')::date
    ON CONFLICT (memory_id, day) DO UPDATE SET
        retrieved = memory_memoryusageday.retrieved + EXCLUDED.retrieved,
        sent = memory_memoryusageday.sent + EXCLUDED.sent,
        last_used = GREATEST(memory_memoryusageday.last_used, EXCLUDED.last_used),
        last_sent = GREATEST(memory_memoryusageday.last_sent, EXCLUDED.last_sent);
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION memory_usage_memories_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE memory_memoryusageday u
    SET scope = n.scope, scope_key = n.scope_key, subject_id = coalesce(n.subject_id, 0),
        kind = n.kind, memory_status = n.status
    FROM old_memories o JOIN new_memories n ON n.id = o.id
    WHERE u.memory_id = n.id
      AND (o.scope, o.scope_key, o.subject_id, o.kind, o.status)
          IS DISTINCT FROM (n.scope, n.scope_key, n.subject_id, n.kind, n.status);
    RETURN NULL;
END $$;

CREATE TRIGGER memory_usage_on_memory_update AFTER UPDATE ON memory_memory
    REFERENCING OLD TABLE AS old_memories NEW TABLE AS new_memories
    FOR EACH STATEMENT EXECUTE FUNCTION memory_usage_memories_changed();

UPDATE memory_memoryusageday u
SET scope = m.scope, scope_key = m.scope_key, subject_id = coalesce(m.subject_id, 0),
    kind = m.kind, memory_status = m.status
FROM memory_memory m WHERE m.id = u.memory_id;
"""

# Back to migration 0008's functions (the columns go with the fields, removed after this).
BACKWARD = """
DROP TRIGGER IF EXISTS memory_usage_on_memory_update ON memory_memory;
DROP FUNCTION IF EXISTS memory_usage_memories_changed();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0009_memory_activity_rollup"),
    ]

    operations = [
        migrations.AddField(
            model_name="memoryusageday",
            name="kind",
            field=models.CharField(blank=True, max_length=20),
        ),
        migrations.AddField(
            model_name="memoryusageday",
            name="memory_status",
            field=models.CharField(blank=True, max_length=16),
        ),
        migrations.AddField(
            model_name="memoryusageday",
            name="scope",
            field=models.CharField(blank=True, max_length=16),
        ),
        migrations.AddField(
            model_name="memoryusageday",
            name="scope_key",
            field=models.CharField(blank=True, max_length=48),
        ),
        migrations.AddField(
            model_name="memoryusageday",
            name="subject_id",
            field=models.BigIntegerField(default=0),
        ),
        migrations.RunSQL(FORWARD, BACKWARD + FUNCTIONS_0008),
    ]
