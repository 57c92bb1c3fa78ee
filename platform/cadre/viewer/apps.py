"""The Memory Viewer's read model (timeline, heatmap, quality, vector map, trail) and its API."""

from django.apps import AppConfig


class ViewerConfig(AppConfig):
    name = "cadre.viewer"
    label = "viewer"
    verbose_name = "Memory Viewer"

    def ready(self) -> None:
        # lazy: ready() — both import models, which load only once the apps are.
        from cadre.agents.runtime.lifecycle.services import RUN_RATED
        from cadre.viewer import cache

        # Memory writes and run ratings change the figures: the cached ones are not served.
        cache.connect_signals()
        RUN_RATED.register(cache.run_rated)
