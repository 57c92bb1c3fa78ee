"""IM connectors: Feishu/Lark, WeCom, DingTalk, Slack, webhooks."""

from django.apps import AppConfig


class ConnectorsConfig(AppConfig):
    name = "connectors"
    label = "connectors"
    verbose_name = "Connectors"

    def ready(self) -> None:
        # lazy: ready() — the registries and the modules that fill them need loaded apps
        from cadre.checks import APP_CHECKS
        from cadre.governance.notifications import ALERT_CHANNELS
        from connectors import platforms
        from connectors.base import health, logins
        from connectors.cards import decisions, proposals
        from connectors.outbound import alerts, delivery, notices

        platforms.register()  # each platform folder's descriptor, by name
        delivery.register()  # each platform: an IM platform and the runtime's delivery channel
        decisions.register()  # confirmation cards: sent when created, updated when decided
        proposals.register()  # skill proposal cards: sent to the employee, updated when decided
        logins.register()  # each platform's own OAuth login, for tenancy's sign-in
        APP_CHECKS.register("connectors", health.doctor_checks)
        ALERT_CHANNELS.register("im", alerts.alert_im_deliver)
        notices.register()  # a member's notice (tenancy's notice_sent), texted over IM
