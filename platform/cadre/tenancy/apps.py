"""Organizations, departments, positions, members, IM identities, API keys and roles."""

from django.apps import AppConfig


class TenancyConfig(AppConfig):
    name = "cadre.tenancy"
    label = "tenancy"
    verbose_name = "Tenancy"

    def ready(self):
        from axes.signals import user_locked_out
        from django.contrib.auth.signals import user_login_failed

        # lazy: ready() — the sign-in services need the loaded apps (the models).
        from cadre.tenancy.services import signin

        user_login_failed.connect(signin.on_login_failed, dispatch_uid="cadre-signin-failed")
        user_locked_out.connect(signin.on_locked_out, dispatch_uid="cadre-signin-locked")
