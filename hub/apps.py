"""The skill registry: packages, versions, dist-tags, bundles, the Hub and ClawHub APIs."""

from django.apps import AppConfig

UPLOAD_BODY_LIMIT = 10 * 1024 * 1024 + 256 * 1024  # a 10 MiB archive plus multipart framing


class HubConfig(AppConfig):
    name = "hub"
    label = "hub"
    verbose_name = "Hub"

    def ready(self) -> None:
        # lazy: ready() — each of these imports models, which load only once the apps are.
        from cadre.agents.runtime.lifecycle.services import RUN_RATED
        from cadre.agents.runtime.lifecycle.warm import NEXT_TURN
        from cadre.agents.services import AGENTS_PROVISIONED
        from cadre.api.middleware import BodySizeLimitMiddleware
        from cadre.governance.alerts import ALERT_EVALUATORS
        from hub import hooks  # registers the hook loading installed skills
        from hub.distribution import installs_sync
        from hub.outcomes import skill_version_drop_alerts, skills_rated

        # Bundle uploads are larger than API JSON: the publish endpoint and ClawHub's
        # per-file upload URLs (/api/v1/hub/uploads/<ticket>) get their own limit.
        BodySizeLimitMiddleware.overrides["/api/v1/hub/publish/"] = UPLOAD_BODY_LIMIT
        BodySizeLimitMiddleware.overrides["/api/v1/hub/uploads/"] = UPLOAD_BODY_LIMIT
        # Provisioned agents get their template version's skills; hub evaluates skill drops.
        AGENTS_PROVISIONED.register(installs_sync)
        ALERT_EVALUATORS.register("skill_version_drop", skill_version_drop_alerts)
        # A topic-shift prefetch predicts the next turn's skills (and keeps their vectors).
        NEXT_TURN.register("skills", hooks.skills_predict)
        # A rated run's skills get its outcome.
        RUN_RATED.register(skills_rated)
