"""Organizations, departments, positions, members, IM identities, API keys and roles."""

from django.apps import AppConfig


class TenancyConfig(AppConfig):
    name = "cadre.tenancy"
    label = "tenancy"
    verbose_name = "Tenancy"
