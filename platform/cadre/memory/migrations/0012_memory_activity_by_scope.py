"""The activity rollup summed per kind of scope (MemoryActivityScopeDay), kept from the
per-scope-key rollup by a statement trigger on it (inserts add, deletes subtract, updates add
the difference: the recount's delete-and-insert nets out), filled here."""

import django.db.models.deletion
from django.db import migrations, models

FORWARD = """
CREATE OR REPLACE FUNCTION memory_activity_by_scope() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO memory_memoryactivityscopeday
        (organization_id, scope, day, kind, event, count)
    SELECT organization_id, scope, day, kind, event, sum(n)
    FROM (
        SELECT organization_id, scope, day, kind, event, count AS n FROM added_rows
        UNION ALL
        SELECT organization_id, scope, day, kind, event, -count FROM removed_rows
    ) AS delta
    GROUP BY 1, 2, 3, 4, 5
    HAVING sum(n) <> 0
    ORDER BY 1, 2, 3, 4, 5
    ON CONFLICT (organization_id, scope, day, kind, event) DO UPDATE
        SET count = memory_memoryactivityscopeday.count + EXCLUDED.count;
    RETURN NULL;
END $$;

-- An insert or a delete has one transition table, an update both.
CREATE OR REPLACE FUNCTION memory_activity_by_scope_inserted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO memory_memoryactivityscopeday
        (organization_id, scope, day, kind, event, count)
    SELECT organization_id, scope, day, kind, event, sum(count) FROM added_rows
    GROUP BY 1, 2, 3, 4, 5 HAVING sum(count) <> 0 ORDER BY 1, 2, 3, 4, 5
    ON CONFLICT (organization_id, scope, day, kind, event) DO UPDATE
        SET count = memory_memoryactivityscopeday.count + EXCLUDED.count;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION memory_activity_by_scope_deleted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO memory_memoryactivityscopeday
        (organization_id, scope, day, kind, event, count)
    SELECT organization_id, scope, day, kind, event, -sum(count) FROM removed_rows
    GROUP BY 1, 2, 3, 4, 5 HAVING sum(count) <> 0 ORDER BY 1, 2, 3, 4, 5
    ON CONFLICT (organization_id, scope, day, kind, event) DO UPDATE
        SET count = memory_memoryactivityscopeday.count + EXCLUDED.count;
    RETURN NULL;
END $$;

CREATE TRIGGER memory_activity_by_scope_on_insert AFTER INSERT ON memory_memoryactivityday
    REFERENCING NEW TABLE AS added_rows
    FOR EACH STATEMENT EXECUTE FUNCTION memory_activity_by_scope_inserted();
CREATE TRIGGER memory_activity_by_scope_on_update AFTER UPDATE ON memory_memoryactivityday
    REFERENCING OLD TABLE AS removed_rows NEW TABLE AS added_rows
    FOR EACH STATEMENT EXECUTE FUNCTION memory_activity_by_scope();
CREATE TRIGGER memory_activity_by_scope_on_delete AFTER DELETE ON memory_memoryactivityday
    REFERENCING OLD TABLE AS removed_rows
    FOR EACH STATEMENT EXECUTE FUNCTION memory_activity_by_scope_deleted();

INSERT INTO memory_memoryactivityscopeday (organization_id, scope, day, kind, event, count)
SELECT organization_id, scope, day, kind, event, sum(count) FROM memory_memoryactivityday
GROUP BY 1, 2, 3, 4, 5;
"""

BACKWARD = """
DROP TRIGGER IF EXISTS memory_activity_by_scope_on_delete ON memory_memoryactivityday;
DROP TRIGGER IF EXISTS memory_activity_by_scope_on_update ON memory_memoryactivityday;
DROP TRIGGER IF EXISTS memory_activity_by_scope_on_insert ON memory_memoryactivityday;
DROP FUNCTION IF EXISTS memory_activity_by_scope_deleted();
DROP FUNCTION IF EXISTS memory_activity_by_scope_inserted();
DROP FUNCTION IF EXISTS memory_activity_by_scope();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0011_memory_created_covering_index"),
        ("tenancy", "0007_saml_sso_sessions"),
    ]

    operations = [
        migrations.CreateModel(
            name="MemoryActivityScopeDay",
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
                ("kind", models.CharField(max_length=20)),
                ("event", models.CharField(max_length=20)),
                ("count", models.IntegerField(default=0)),
            ],
        ),
        migrations.AddIndex(
            model_name="memoryactivityday",
            index=models.Index(
                fields=["organization", "scope", "day"],
                include=("scope_key", "subject_id", "kind", "event", "count"),
                name="memory_activity_scope_day_idx",
            ),
        ),
        migrations.AddField(
            model_name="memoryactivityscopeday",
            name="organization",
            field=models.ForeignKey(
                db_constraint=False,
                on_delete=django.db.models.deletion.DO_NOTHING,
                related_name="+",
                to="tenancy.organization",
            ),
        ),
        migrations.AddConstraint(
            model_name="memoryactivityscopeday",
            constraint=models.UniqueConstraint(
                fields=("organization", "scope", "day", "kind", "event"),
                name="memoryactivityscopeday_unique",
            ),
        ),
        migrations.RunSQL(FORWARD, BACKWARD),
    ]
