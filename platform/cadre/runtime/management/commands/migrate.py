"""`migrate` as the schema owner (settings.DATABASE_OWNER), whatever role the app runs as."""

from __future__ import annotations

from django.core.management.commands.migrate import Command as DjangoMigrate

from cadre.runtime.database_roles import as_owner


class Command(DjangoMigrate):
    help = (
        DjangoMigrate.help + " Cadre connects as the owner (DATABASE_OWNER_URL, or the embedded "
        "database's owner) and then grants the application's role its privileges."
    )

    def handle(self, *args, **options):
        with as_owner(options["database"]):
            return super().handle(*args, **options)
