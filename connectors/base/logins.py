"""The platforms' own OAuth logins, registered with tenancy's login-provider port."""

from __future__ import annotations

from cadre.tenancy.services.login_providers import LOGIN_PROVIDERS
from connectors.base import registry


def register() -> None:
    """Register each platform's login under its name, the identity-provider kind it serves
    (called by `ConnectorsConfig.ready()`)."""
    for name, platform in registry().items():
        if platform.login is not None:
            LOGIN_PROVIDERS.register(name, platform.login)
