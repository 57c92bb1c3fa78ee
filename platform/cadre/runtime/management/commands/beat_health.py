"""Exit 0 when a beat holds the schedule's lock and ticked recently (a container healthcheck)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from cadre.runtime.beat import beat_status, default_max_age


class Command(BaseCommand):
    help = (
        "Exit 0 when a beat holds the schedule lock in Redis, renewed it (it does on every "
        "tick) within --max-age seconds and no entry waits past its time by more than that; "
        "exit 1 otherwise."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--max-age",
            type=float,
            default=None,
            help="seconds (default: 3 times CELERY_BEAT_MAX_LOOP_INTERVAL)",
        )

    def handle(self, *args, max_age=None, **options):
        max_age = default_max_age() if max_age is None else max_age
        status = beat_status()
        line = (
            f"lock held: {'yes' if status.held else 'no'}; "
            f"last tick: {_seconds(status.tick_age)} ago; "
            f"entries: {status.entries}; most late: {status.late:.1f} s"
        )
        if not status.healthy(max_age):
            raise CommandError(f"beat unhealthy (max age {max_age:g} s): {line}")
        self.stdout.write(f"beat healthy: {line}")


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"
