"""Static files served by ServeStatic, with the finders' file list read once per process.

ServeStatic lists and stats every file the static finders know when its middleware is built
(2,300 files here, most of them icons: about half a second). A server builds it once; every
Django test client builds its own handler, so the suite paid that scan for each client. The
list depends only on the finders' directories, so it is kept per process and copied into each
new middleware. With autorefresh (DEBUG) ServeStatic finds files per request and the list is
not used for lookups."""

from __future__ import annotations

from django.conf import settings
from servestatic.middleware import ServeStaticMiddleware

_SCANNED: dict[tuple, tuple[dict, list]] = {}


class StaticFilesMiddleware(ServeStaticMiddleware):
    def add_files_from_finders(self) -> None:
        key = (
            self.static_prefix,
            tuple(str(entry) for entry in settings.STATICFILES_DIRS),
            tuple(settings.STATICFILES_FINDERS),
            tuple(settings.INSTALLED_APPS),
        )
        scanned = _SCANNED.get(key)
        if scanned is None:
            files_before, directories_before = dict(self.files), list(self.directories)
            super().add_files_from_finders()
            scanned = (
                {url: f for url, f in self.files.items() if files_before.get(url) is not f},
                [entry for entry in self.directories if entry not in directories_before],
            )
            _SCANNED[key] = scanned
            return
        files, directories = scanned
        self.files.update(files)
        for root, prefix in reversed(directories):
            self.insert_directory(root, prefix)
