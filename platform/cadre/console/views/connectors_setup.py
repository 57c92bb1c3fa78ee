"""What the console asks for and tells, per IM platform: credential and setting fields with
their names on the platform's console, and the exact values to paste there — each platform
folder of `connectors` says its own (its descriptor and its `console.py`)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from connectors.base import SettingField, SetupGuide, registry
from connectors.models import Connector

# Every platform may point at another API host (a proxy, a private deployment, a test server).
API_BASE_FIELD = SettingField(
    "api_base_url",
    gettext_lazy("API base URL"),
    gettext_lazy("Leave empty for the platform's public API."),
    kind="url",
)
STREAM_MODES = ("long_connection", "stream")
# The platforms' outbound modes (their descriptors' `outbound_mode`), as people read them.
OUTBOUND_MODE_NAMES = {
    "long-connection mode": gettext_lazy("long-connection mode"),
    "stream mode": gettext_lazy("stream mode"),
}


def credential_fields(platform: str) -> list[tuple[str, str, str, bool]]:
    """(key, label, help, required) for each credential of the platform, required first."""
    platform_class = registry()[platform]
    labels = platform_class.credential_labels
    fields = []
    for key in platform_class.credential_fields:
        label, help_text = labels.get(key, (key.replace("_", " ").capitalize(), ""))
        fields.append((key, label, help_text, True))
    for key in platform_class.optional_credential_fields:
        label, help_text = labels.get(key, (key.replace("_", " ").capitalize(), ""))
        fields.append((key, label, help_text, False))
    return fields


def setting_fields(platform: str) -> tuple[SettingField, ...]:
    """The settings the console asks for: the platform's own, then the API base URL."""
    return (*registry()[platform].setting_form(), API_BASE_FIELD)


@dataclass(frozen=True)
class Extra:
    """An optional SDK: whether it is installed and what it is needed for."""

    installed: bool
    module: str
    command: str
    consequence: str  # what is missing without it


def extra_for(platform: str) -> Extra | None:
    platform_class = registry()[platform]
    if not platform_class.extra:
        return None
    return Extra(
        installed=platform_class.extra_installed(),
        module=platform_class.extra_module,
        command=f'pip install "cadre[{platform_class.extra}]"',
        consequence=platform_class.extra_consequence,
    )


def callback_url(connector: Connector) -> str:
    return f"{settings.CADRE_BASE_URL}{connector.callback_path}"


def callback_unreachable(connector: Connector) -> str:
    """Why the platform's servers cannot reach the callback URL ("" when they may): it names a
    loopback or private address, as an install on its defaults (CADRE_BASE_URL unset) does."""
    host = urlsplit(settings.CADRE_BASE_URL).hostname or ""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        private = host == "localhost" or host.endswith((".localhost", ".local", ".internal"))
    else:
        private = not address.is_global
    if not private:
        return ""
    platform_class = registry().get(connector.platform)
    outbound = platform_class.outbound_mode if platform_class is not None else ""
    values = {
        "host": host,
        "platform": connector.get_platform_display(),
        "mode": OUTBOUND_MODE_NAMES.get(outbound, outbound),
    }
    if outbound:
        return (
            _(
                "%(host)s is an address only this machine or its network can reach: "
                "%(platform)s's servers cannot deliver events to it. Set CADRE_BASE_URL to an "
                "address the platform can reach (this server's public host name, or a tunnel "
                "to it) and restart Cadre, or switch this connector to %(mode)s, which needs "
                "no public URL."
            )
            % values
        )
    return (
        _(
            "%(host)s is an address only this machine or its network can reach: "
            "%(platform)s's servers cannot deliver events to it. Set CADRE_BASE_URL to an "
            "address the platform can reach (this server's public host name, or a tunnel to "
            "it) and restart Cadre."
        )
        % values
    )


def setup_guide(connector: Connector) -> SetupGuide:
    """The exact settings for the platform's console, for this connector."""
    mode = (connector.settings or {}).get("mode", "webhook")
    platform_class = registry()[connector.platform]
    return platform_class.setup_guide(connector, callback_url(connector), mode)
