"""What a viewer request covers: the actor's readable memories narrowed by scope, member,
agent, department and kind (never widened), and the day buckets its series use."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from django.db import connections
from django.db.models import QuerySet

from cadre.memory import selectors
from cadre.memory.models import Memory, Scope, scope_key

# The heatmap and quality figures as first built (straight from the context record items and
# one query per figure), kept so bench/memory_viewer.py can set this and measure them side by
# side with the rollup; the tests check both give the same numbers.
DIRECT = False


def requested_scope_keys(
    *,
    scopes: list[str] | None = None,
    members: list[int] | None = None,
    agents: list[int] | None = None,
    departments: list[int] | None = None,
) -> list[str] | None:
    """The scope keys a request names (None: every readable scope)."""
    keys = [selectors.parse_scope_key(key) for key in scopes or []]
    keys += [scope_key(Scope.USER, pk) for pk in members or []]
    keys += [scope_key(Scope.AGENT, pk) for pk in agents or []]
    keys += [scope_key(Scope.DEPARTMENT, pk) for pk in departments or []]
    return keys or None


def viewer_memories(
    actor,
    *,
    scope_keys: list[str] | None = None,
    kinds: list[str] | None = None,
    with_deleted: bool = False,
) -> QuerySet[Memory]:
    """The memories a viewer figure counts: readable by the actor, in the requested scopes
    (an unreadable requested scope contributes nothing), of the requested kinds."""
    rows = selectors.memory_queryset(actor, scope_keys=scope_keys, with_deleted=with_deleted)
    if scope_keys is not None and not scope_keys:
        return rows.none()
    if kinds:
        rows = rows.filter(kind__in=kinds)
    return rows


def viewer_rows(
    actor,
    rows: QuerySet,
    *,
    scope_keys: list[str] | None = None,
    kinds: list[str] | None = None,
) -> QuerySet:
    """A rollup of memories (rows with their reader columns and kind) narrowed exactly as
    `viewer_memories` narrows the memories."""
    if scope_keys is not None and not scope_keys:
        return rows.none()
    rows = selectors.readable_rows(actor, rows, scope_keys=scope_keys)
    return rows.filter(kind__in=kinds) if kinds else rows


def viewer_rollup_parts(
    actor,
    rows: QuerySet,
    whole_rows: QuerySet,
    *,
    scope_keys: list[str] | None = None,
    kinds: list[str] | None = None,
) -> list[QuerySet]:
    """A rollup narrowed as `viewer_rows` narrows it, in parts that sum to the same: `rows`
    (per scope key) for what the actor reads one scope at a time, `whole_rows` (the same
    summed per kind of scope) for the kinds of scope it reads whole."""
    if scope_keys is not None and not scope_keys:
        return []
    rows, whole = selectors.readable_rows_by_scope(actor, rows, scope_keys=scope_keys)
    parts = [rows]
    if whole:
        parts.append(whole_rows.filter(organization=actor.organization, scope__in=whole))
    return [part.filter(kind__in=kinds) for part in parts] if kinds else parts


def viewer_items(
    actor,
    items: QuerySet,
    *,
    scope_keys: list[str] | None = None,
    kinds: list[str] | None = None,
) -> QuerySet:
    """Context record items narrowed to the memories `viewer_memories(..., with_deleted=True)`
    holds, by the reader columns the items carry; the caller keeps them to the actor's
    organization (through their records)."""
    if scope_keys is not None and not scope_keys:
        return items.none()
    condition = selectors.readable_condition(actor, scope_keys)
    if condition is None:
        return items.none()
    items = items.filter(condition)
    return items.filter(kind__in=kinds) if kinds else items


def fetch_rows(rows: QuerySet) -> list[tuple]:
    """A `values_list` query's rows as the database driver returns them, without Django's
    per-value converters: for tens of thousands of plain rows (ids, dates, counts) whose
    driver types are already the Python ones."""
    sql, params = rows.query.get_compiler(using=rows.db).as_sql()
    with connections[rows.db].cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def day_start(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def window_days(now: datetime, days: int) -> list[date]:
    """The last `days` UTC days, oldest first, today included."""
    today = day_start(now).date()
    return [today - timedelta(days=offset) for offset in range(days - 1, -1, -1)]


def as_day(value) -> date:
    return value.astimezone(UTC).date() if isinstance(value, datetime) else value
