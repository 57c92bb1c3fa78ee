"""The per-day activity rollup the timeline and the quality dashboard read: memories added (and
of those, deleted and corrected) by creation day, history events by version day, per reader
columns and kind. Kept by triggers on memories and versions, backfilled here.

The merge reasons' prefixes are the dedup stages' (cadre.memory.services.common EXACT_REASON
and NEAR_REASON; tests/memory/test_viewer_activity.py checks they still agree)."""

import django.db.models.deletion
from django.db import migrations, models

FORWARD = """
CREATE OR REPLACE FUNCTION memory_version_event(change text, reason text, new_status text)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE
        WHEN change = 'addition' THEN 'addition'
        WHEN change = 'correction' THEN 'correction'
        WHEN change = 'deletion' THEN 'deletion'
        WHEN change = 'merge' AND starts_with(reason, 'near duplicate of') THEN 'merge_near'
        WHEN change = 'merge' AND starts_with(reason, 'exact duplicate') THEN 'merge_exact'
        WHEN change = 'merge' THEN 'merge'
        WHEN new_status = 'superseded' THEN 'superseded'
        ELSE 'updated'
    END
$$;

-- Every row of the organization's given days, counted again from the memories and versions.
CREATE OR REPLACE FUNCTION memory_activity_recount(org bigint, days date[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM memory_memoryactivityday WHERE organization_id = org AND day = ANY(days);
    INSERT INTO memory_memoryactivityday
        (organization_id, day, scope, scope_key, subject_id, kind, event, count)
    SELECT org, c.day, min(c.scope), c.scope_key, c.subject_id, c.kind, c.event, count(*)
    FROM (
        SELECT d AS day, m.scope, m.scope_key, coalesce(m.subject_id, 0) AS subject_id,
               m.kind, e.event
        FROM unnest(days) AS d
        JOIN memory_memory m ON m.organization_id = org
             AND m.created_at >= (d::timestamp AT TIME ZONE 'UTC')
             AND m.created_at < ((d + 1)::timestamp AT TIME ZONE 'UTC')
        CROSS JOIN LATERAL (
            SELECT 'created'::text
            UNION ALL SELECT 'created_deleted' WHERE m.status = 'deleted'
            UNION ALL SELECT 'created_corrected' WHERE EXISTS (
                SELECT 1 FROM memory_memoryversion x
                WHERE x.memory_id = m.id AND x.change = 'correction')
        ) AS e(event)
        UNION ALL
        SELECT d, m.scope, m.scope_key, coalesce(m.subject_id, 0), m.kind,
               memory_version_event(v.change, v.reason, v.new_status)
        FROM unnest(days) AS d
        JOIN memory_memoryversion v
             ON v.created_at >= (d::timestamp AT TIME ZONE 'UTC')
             AND v.created_at < ((d + 1)::timestamp AT TIME ZONE 'UTC')
        JOIN memory_memory m ON m.id = v.memory_id AND m.organization_id = org
    ) AS c
    GROUP BY c.day, c.scope_key, c.subject_id, c.kind, c.event;
END $$;

CREATE OR REPLACE FUNCTION memory_activity_memories_added() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO memory_memoryactivityday
        (organization_id, day, scope, scope_key, subject_id, kind, event, count)
    SELECT m.organization_id, (m.created_at AT TIME ZONE 'UTC')::date, min(m.scope),
           m.scope_key, coalesce(m.subject_id, 0), m.kind, e.event, count(*)
    FROM added_memories m
    CROSS JOIN LATERAL (
        SELECT 'created'::text
        UNION ALL SELECT 'created_deleted' WHERE m.status = 'deleted'
    ) AS e(event)
    GROUP BY 1, 2, 4, 5, 6, 7
    ON CONFLICT (organization_id, day, scope_key, subject_id, kind, event) DO UPDATE
        SET count = memory_memoryactivityday.count + EXCLUDED.count;
    RETURN NULL;
END $$;

-- A change of what a memory is counted under recounts its creation day (old and new) and,
-- when its reader columns or kind changed, the days of its history.
CREATE OR REPLACE FUNCTION memory_activity_memories_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE r record;
BEGIN
    FOR r IN SELECT org, array_agg(DISTINCT day) AS days FROM (
    SELECT t.org, t.day FROM old_memories o JOIN new_memories n ON n.id = o.id
    CROSS JOIN LATERAL (VALUES
        (o.organization_id, (o.created_at AT TIME ZONE 'UTC')::date),
        (n.organization_id, (n.created_at AT TIME ZONE 'UTC')::date)
    ) AS t(org, day)
    WHERE (o.organization_id, o.scope, o.scope_key, o.subject_id, o.kind, o.status,
           o.created_at)
          IS DISTINCT FROM
          (n.organization_id, n.scope, n.scope_key, n.subject_id, n.kind, n.status,
           n.created_at)
    UNION
    SELECT t.org, (v.created_at AT TIME ZONE 'UTC')::date
    FROM old_memories o JOIN new_memories n ON n.id = o.id
    JOIN memory_memoryversion v ON v.memory_id = n.id
    CROSS JOIN LATERAL (VALUES (o.organization_id), (n.organization_id)) AS t(org)
    WHERE (o.organization_id, o.scope, o.scope_key, o.subject_id, o.kind)
          IS DISTINCT FROM (n.organization_id, n.scope, n.scope_key, n.subject_id, n.kind)
    ) AS touched(org, day) GROUP BY org LOOP
        PERFORM memory_activity_recount(r.org, r.days);
    END LOOP;
    RETURN NULL;
END $$;

-- Gone memories: their creation days and their history's days (a cascade may have removed
-- the history first, or may remove it next: the recount no longer finds these memories).
CREATE OR REPLACE FUNCTION memory_activity_memories_removed() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE r record;
BEGIN
    FOR r IN SELECT org, array_agg(DISTINCT day) AS days FROM (
    SELECT organization_id, (created_at AT TIME ZONE 'UTC')::date FROM removed_memories
    UNION
    SELECT o.organization_id, (v.created_at AT TIME ZONE 'UTC')::date
    FROM removed_memories o JOIN memory_memoryversion v ON v.memory_id = o.id
    ) AS touched(org, day) GROUP BY org LOOP
        PERFORM memory_activity_recount(r.org, r.days);
    END LOOP;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION memory_activity_versions_added() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO memory_memoryactivityday
        (organization_id, day, scope, scope_key, subject_id, kind, event, count)
    SELECT m.organization_id, (v.created_at AT TIME ZONE 'UTC')::date, min(m.scope),
           m.scope_key, coalesce(m.subject_id, 0), m.kind,
           memory_version_event(v.change, v.reason, v.new_status), count(*)
    FROM added_versions v JOIN memory_memory m ON m.id = v.memory_id
    GROUP BY 1, 2, 4, 5, 6, 7
    ON CONFLICT (organization_id, day, scope_key, subject_id, kind, event) DO UPDATE
        SET count = memory_memoryactivityday.count + EXCLUDED.count;
    -- A memory's first correction: it now counts as corrected on its creation day.
    INSERT INTO memory_memoryactivityday
        (organization_id, day, scope, scope_key, subject_id, kind, event, count)
    SELECT m.organization_id, (m.created_at AT TIME ZONE 'UTC')::date, min(m.scope),
           m.scope_key, coalesce(m.subject_id, 0), m.kind, 'created_corrected', count(*)
    FROM memory_memory m
    WHERE m.id IN (SELECT memory_id FROM added_versions WHERE change = 'correction')
      AND NOT EXISTS (
          SELECT 1 FROM memory_memoryversion x
          WHERE x.memory_id = m.id AND x.change = 'correction'
            AND x.id NOT IN (SELECT id FROM added_versions))
    GROUP BY 1, 2, 4, 5, 6
    ON CONFLICT (organization_id, day, scope_key, subject_id, kind, event) DO UPDATE
        SET count = memory_memoryactivityday.count + EXCLUDED.count;
    RETURN NULL;
END $$;

-- History is written once; a delete (or an update of what a version counts as) recounts the
-- versions' days and their memories' creation days (for `created_corrected`).
CREATE OR REPLACE FUNCTION memory_activity_versions_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE r record;
BEGIN
    FOR r IN SELECT org, array_agg(DISTINCT day) AS days FROM (
    SELECT m.organization_id, d.day
    FROM removed_versions v JOIN memory_memory m ON m.id = v.memory_id
    CROSS JOIN LATERAL (VALUES
        ((v.created_at AT TIME ZONE 'UTC')::date),
        ((m.created_at AT TIME ZONE 'UTC')::date)
    ) AS d(day)
    ) AS touched(org, day) GROUP BY org LOOP
        PERFORM memory_activity_recount(r.org, r.days);
    END LOOP;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION memory_activity_versions_updated() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE r record;
BEGIN
    IF NOT EXISTS (
        SELECT 1 FROM removed_versions o JOIN added_versions n ON n.id = o.id
        WHERE (o.memory_id, o.change, o.reason, o.new_status, o.created_at)
              IS DISTINCT FROM (n.memory_id, n.change, n.reason, n.new_status, n.created_at)
    ) THEN
        RETURN NULL;  -- e.g. a related memory's removal setting related_memory_id to NULL
    END IF;
    FOR r IN SELECT org, array_agg(DISTINCT day) AS days FROM (
    SELECT m.organization_id, d.day
    FROM (SELECT memory_id, created_at FROM removed_versions
          UNION ALL SELECT memory_id, created_at FROM added_versions) AS v
    JOIN memory_memory m ON m.id = v.memory_id
    CROSS JOIN LATERAL (VALUES
        ((v.created_at AT TIME ZONE 'UTC')::date),
        ((m.created_at AT TIME ZONE 'UTC')::date)
    ) AS d(day)
    ) AS touched(org, day) GROUP BY org LOOP
        PERFORM memory_activity_recount(r.org, r.days);
    END LOOP;
    RETURN NULL;
END $$;

CREATE TRIGGER memory_activity_on_insert AFTER INSERT ON memory_memory
    REFERENCING NEW TABLE AS added_memories
    FOR EACH STATEMENT EXECUTE FUNCTION memory_activity_memories_added();
CREATE TRIGGER memory_activity_on_update AFTER UPDATE ON memory_memory
    REFERENCING OLD TABLE AS old_memories NEW TABLE AS new_memories
    FOR EACH STATEMENT EXECUTE FUNCTION memory_activity_memories_changed();
CREATE TRIGGER memory_activity_on_delete AFTER DELETE ON memory_memory
    REFERENCING OLD TABLE AS removed_memories
    FOR EACH STATEMENT EXECUTE FUNCTION memory_activity_memories_removed();
CREATE TRIGGER memory_activity_on_version_insert AFTER INSERT ON memory_memoryversion
    REFERENCING NEW TABLE AS added_versions
    FOR EACH STATEMENT EXECUTE FUNCTION memory_activity_versions_added();
CREATE TRIGGER memory_activity_on_version_delete AFTER DELETE ON memory_memoryversion
    REFERENCING OLD TABLE AS removed_versions
    FOR EACH STATEMENT EXECUTE FUNCTION memory_activity_versions_changed();
CREATE TRIGGER memory_activity_on_version_update AFTER UPDATE ON memory_memoryversion
    REFERENCING OLD TABLE AS removed_versions NEW TABLE AS added_versions
    FOR EACH STATEMENT EXECUTE FUNCTION memory_activity_versions_updated();

SELECT memory_activity_recount(org, array_agg(DISTINCT day)) FROM (
    SELECT organization_id AS org, (created_at AT TIME ZONE 'UTC')::date AS day
    FROM memory_memory
    UNION
    SELECT m.organization_id, (v.created_at AT TIME ZONE 'UTC')::date
    FROM memory_memoryversion v JOIN memory_memory m ON m.id = v.memory_id
) AS touched GROUP BY org;
"""

BACKWARD = """
DROP TRIGGER IF EXISTS memory_activity_on_version_update ON memory_memoryversion;
DROP TRIGGER IF EXISTS memory_activity_on_version_delete ON memory_memoryversion;
DROP TRIGGER IF EXISTS memory_activity_on_version_insert ON memory_memoryversion;
DROP TRIGGER IF EXISTS memory_activity_on_delete ON memory_memory;
DROP TRIGGER IF EXISTS memory_activity_on_update ON memory_memory;
DROP TRIGGER IF EXISTS memory_activity_on_insert ON memory_memory;
DROP FUNCTION IF EXISTS memory_activity_versions_updated();
DROP FUNCTION IF EXISTS memory_activity_versions_changed();
DROP FUNCTION IF EXISTS memory_activity_versions_added();
DROP FUNCTION IF EXISTS memory_activity_memories_removed();
DROP FUNCTION IF EXISTS memory_activity_memories_changed();
DROP FUNCTION IF EXISTS memory_activity_memories_added();
DROP FUNCTION IF EXISTS memory_activity_recount(bigint, date[]);
DROP FUNCTION IF EXISTS memory_version_event(text, text, text);
"""


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0008_memory_usage_rollup"),
        ("tenancy", "0007_saml_sso_sessions"),
    ]

    operations = [
        migrations.CreateModel(
            name="MemoryActivityDay",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("day", models.DateField()),
                (
                    "scope",
                    models.CharField(
                        choices=[
                            ("user", "User (one member's personal memory)"),
                            ("agent", "Agent (one agent instance)"),
                            ("position", "Position"),
                            ("department", "Department"),
                            ("organization", "Organization (shared)"),
                        ],
                        max_length=16,
                    ),
                ),
                ("scope_key", models.CharField(max_length=48)),
                ("subject_id", models.BigIntegerField(default=0)),
                ("kind", models.CharField(max_length=20)),
                ("event", models.CharField(max_length=20)),
                ("count", models.IntegerField(default=0)),
                (
                    "organization",
                    models.ForeignKey(
                        db_constraint=False,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to="tenancy.organization",
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(
                        fields=("organization", "day", "scope_key", "subject_id", "kind", "event"),
                        name="memoryactivityday_unique",
                    )
                ],
            },
        ),
        migrations.RunSQL(FORWARD, BACKWARD),
    ]
