"""What the console asks for and tells, per IM platform: credential and setting fields with
their names on the platform's console, and the exact values to paste there."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from django.conf import settings

from connectors.base import registry
from connectors.models import Connector
from connectors.webhook.inbound import EVENT_ID_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER

# The platform console's own names for Cadre's credential keys.
CREDENTIAL_LABELS = {
    "feishu": {
        "app_id": ("App ID", "Credentials & Basic Info → App ID (cli_…)."),
        "app_secret": ("App Secret", "Credentials & Basic Info → App Secret."),
        "encrypt_key": (
            "Encrypt Key",
            "Events & Callbacks → Encryption strategy. Recommended: events are then encrypted "
            "and signed.",
        ),
        "verification_token": ("Verification Token", "Events & Callbacks → Encryption strategy."),
    },
    "wecom": {
        "corp_id": ("Corp ID", "My Company → Company information → Corp ID (ww…)."),
        "corp_secret": ("Secret", "App Management → your app → Secret."),
        "token": ("Token", "Receive messages → Set API receive → Token."),
        "encoding_aes_key": (
            "EncodingAESKey",
            "Receive messages → Set API receive → EncodingAESKey (43 characters).",
        ),
    },
    "dingtalk": {
        "app_key": ("Client ID (AppKey)", "Developer console → your app → Credentials."),
        "app_secret": ("Client Secret (AppSecret)", "Developer console → your app → Credentials."),
    },
    "slack": {
        "bot_token": (
            "Bot User OAuth Token",
            "OAuth & Permissions → Bot User OAuth Token (xoxb-…).",
        ),
        "signing_secret": ("Signing Secret", "Basic Information → App Credentials."),
    },
    "webhook": {
        "signing_secret": (
            "Signing secret",
            "The sending system signs every event with it. Use a long random value.",
        ),
        "callback_secret": (
            "Callback signing secret",
            "Cadre signs replies to your callback URL with it (default: the signing secret).",
        ),
    },
}


@dataclass(frozen=True)
class SettingField:
    name: str
    label: str
    help: str = ""
    choices: tuple[tuple[str, str], ...] = ()
    required: bool = False
    kind: str = "text"  # text, url, integer


SETTING_FIELDS: dict[str, tuple[SettingField, ...]] = {
    "feishu": (
        SettingField(
            "domain", "Domain", choices=(("feishu", "Feishu (China)"), ("lark", "Lark (global)"))
        ),
        SettingField(
            "mode",
            "How events arrive",
            choices=(
                ("webhook", "HTTP callbacks to this server"),
                ("long_connection", "Long connection (no public URL needed)"),
            ),
        ),
    ),
    "wecom": (
        SettingField(
            "agent_id",
            "AgentId",
            "App Management → your app → AgentId; needed to send replies.",
            required=True,
            kind="integer",
        ),
    ),
    "dingtalk": (
        SettingField(
            "mode",
            "How events arrive",
            "Stream mode is recommended: messages arrive over a connection Cadre opens with the "
            "app credentials, and no public URL is exposed. An HTTP callback's sign covers only "
            "its timestamp, not the message, so Cadre accepts each sign once and replies only "
            "through DingTalk's own hosts.",
            choices=(
                ("stream", "Stream mode (recommended; no public URL needed)"),
                ("webhook", "HTTP callbacks to this server"),
            ),
        ),
        SettingField("robot_code", "Robot code", "Defaults to the Client ID."),
        SettingField(
            "card_template_id",
            "Card template id",
            "An interactive card template from the card platform, for confirmation cards.",
        ),
    ),
    "slack": (SettingField("team_id", "Team id", "Your workspace id (T…), optional."),),
    "webhook": (
        SettingField(
            "callback_url",
            "Callback URL",
            "Where Cadre POSTs replies and cards (signed).",
            kind="url",
        ),
    ),
}
# Every platform may point at another API host (a proxy, a private deployment, a test server).
API_BASE_FIELD = SettingField(
    "api_base_url", "API base URL", "Leave empty for the platform's public API.", kind="url"
)
STREAM_MODES = ("long_connection", "stream")


def credential_fields(platform: str) -> list[tuple[str, str, str, bool]]:
    """(key, label, help, required) for each credential of the platform, required first."""
    platform_class = registry()[platform]
    labels = CREDENTIAL_LABELS.get(platform, {})
    fields = []
    for key in platform_class.credential_fields:
        label, help_text = labels.get(key, (key.replace("_", " ").capitalize(), ""))
        fields.append((key, label, help_text, True))
    for key in platform_class.optional_credential_fields:
        label, help_text = labels.get(key, (key.replace("_", " ").capitalize(), ""))
        fields.append((key, label, help_text, False))
    return fields


def setting_fields(platform: str) -> tuple[SettingField, ...]:
    return (*SETTING_FIELDS.get(platform, ()), API_BASE_FIELD)


@dataclass(frozen=True)
class Extra:
    """An optional SDK: whether it is installed and what it is needed for."""

    installed: bool
    module: str
    command: str
    consequence: str  # what is missing without it


EXTRA_CONSEQUENCES = {
    "feishu": "Long-connection mode is unavailable until it is installed; HTTP callbacks work "
    "without it.",
    "dingtalk": "Stream mode is unavailable until it is installed; HTTP callbacks work without it.",
    "slack": "Nothing is lost: Cadre verifies Slack signatures itself without it.",
}


def extra_for(platform: str) -> Extra | None:
    platform_class = registry()[platform]
    if not platform_class.extra:
        return None
    return Extra(
        installed=platform_class.extra_installed(),
        module=platform_class.extra_module,
        command=f'pip install "cadre[{platform_class.extra}]"',
        consequence=EXTRA_CONSEQUENCES.get(platform, "Some optional features are unavailable."),
    )


def callback_url(connector: Connector) -> str:
    return f"{settings.CADRE_BASE_URL}{connector.callback_path}"


# Platforms whose events can arrive over a connection Cadre opens itself: no public URL.
OUTBOUND_MODES = {"feishu": "long-connection mode", "dingtalk": "stream mode"}


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
    how = (
        "Set CADRE_BASE_URL to an address the platform can reach (this server's public host "
        "name, or a tunnel to it) and restart Cadre"
    )
    outbound = OUTBOUND_MODES.get(connector.platform)
    if outbound:
        how += f", or switch this connector to {outbound}, which needs no public URL"
    return (
        f"{host} is an address only this machine or its network can reach: "
        f"{connector.get_platform_display()}'s servers cannot deliver events to it. {how}."
    )


@dataclass
class Guide:
    """The values to paste into the platform's console, and the steps around them."""

    values: list[tuple[str, str]] = field(default_factory=list)  # (name there, value)
    steps: list[str] = field(default_factory=list)
    lists: list[tuple[str, list[str]]] = field(default_factory=list)  # (title, items)


def setup_guide(connector: Connector) -> Guide:
    """The exact settings for the platform's console, for this connector."""
    url = callback_url(connector)
    mode = (connector.settings or {}).get("mode", "webhook")
    builder = {
        "feishu": _feishu,
        "wecom": _wecom,
        "dingtalk": _dingtalk,
        "slack": _slack,
        "webhook": _webhook,
    }.get(connector.platform)
    if builder is None:
        guide = Guide(values=[("Callback URL", url)])
        guide.steps = registry()[connector.platform](connector).setup_instructions(url)
        return guide
    return builder(connector, url, mode)


def _feishu(connector: Connector, url: str, mode: str) -> Guide:
    lark = (connector.settings or {}).get("domain") == "lark"
    console = "Lark Developer (open.larksuite.com/app)" if lark else "open.feishu.cn/app"
    guide = Guide()
    if mode == "long_connection":
        guide.steps = [
            f"In {console}, open your app → Events & Callbacks → Event configuration.",
            "Subscription mode: “Receive events through persistent connection”. No request "
            "URL is needed.",
            "Callback configuration: also choose the persistent connection.",
        ]
    else:
        guide.values = [
            ("Event configuration → Request URL", url),
            ("Callback configuration → Request URL", url),
        ]
        guide.steps = [
            f"In {console}, open your app → Events & Callbacks.",
            "Event configuration: choose “Send events to developer server” and paste the "
            "request URL; Feishu checks it at once (Cadre answers the challenge).",
            "Callback configuration: paste the same URL for card callbacks.",
            "Encryption strategy: copy the Encrypt Key and the Verification Token into this "
            "connector (Rotate credentials) — with an Encrypt Key every event is signed.",
        ]
    guide.lists = [
        ("Events to add", ["im.message.receive_v1 (Receive messages)"]),
        ("Callbacks to add", ["card.action.trigger (Card action)"]),
        (
            "Permissions",
            [
                "im:message (read and send messages in chats)",
                "im:message:send_as_bot (send messages as the app)",
                "contact:user.email:readonly (optional: match people by email)",
            ],
        ),
        ("Then", ["Enable the Bot capability and publish a new app version."]),
    ]
    return guide


def _wecom(connector: Connector, url: str, mode: str) -> Guide:
    return Guide(
        values=[
            ("URL", url),
            ("Token", "the Token stored in this connector"),
            ("EncodingAESKey", "the EncodingAESKey stored in this connector"),
        ],
        steps=[
            "WeCom admin console → App Management → your app → Receive messages → Set API receive.",
            "Paste the URL. Generate the Token and the EncodingAESKey there (or type your own) "
            "and store the same values in this connector — WeCom checks the URL by sending an "
            "encrypted echo that only those values can answer.",
            "Set this connector's AgentId and Secret from the app's page.",
            "Add this server's public IP to the app's trusted IP list (WeCom refuses API calls "
            "from other addresses).",
        ],
    )


def _dingtalk(connector: Connector, url: str, mode: str) -> Guide:
    if mode == "stream":
        return Guide(
            values=[("Message receiving mode", "Stream mode")],
            steps=[
                "DingTalk developer console → your app → Add capability → Robot → configure.",
                "Message receiving mode: Stream mode. No public URL is needed.",
                f'Install the SDK on this server: pip install "cadre[dingtalk]", then run '
                f"python manage.py connectors_stream {connector.public_id}",
            ],
        )
    return Guide(
        values=[("Message receiving address", url)],
        steps=[
            "DingTalk developer console → your app → Add capability → Robot → configure.",
            "Message receiving mode: HTTP mode; paste the message receiving address.",
            "Publish the robot. Cadre checks each callback's timestamp and sign with the "
            "Client Secret.",
        ],
        lists=[
            (
                "Permissions",
                [
                    "Robot: send 1:1 and group messages (qyapi_robot_sendmsg)",
                    "Card.Instance.Write (interactive confirmation cards)",
                ],
            )
        ],
    )


def _slack(connector: Connector, url: str, mode: str) -> Guide:
    return Guide(
        values=[
            ("Event Subscriptions → Request URL", url),
            ("Interactivity & Shortcuts → Request URL", url),
        ],
        steps=[
            "api.slack.com/apps → your app → Event Subscriptions: enable and paste the "
            "request URL (Slack verifies it at once).",
            "Interactivity & Shortcuts: enable and paste the same URL (confirmation buttons).",
            "OAuth & Permissions: add the bot scopes below, install the app to the workspace, "
            "and store the Bot User OAuth Token here.",
            "App Home: allow users to send messages to the app (Messages tab).",
        ],
        lists=[
            ("Bot events to subscribe", ["message.im", "app_mention"]),
            (
                "Bot token scopes",
                ["chat:write", "im:history", "app_mentions:read", "users:read", "users:read.email"],
            ),
        ],
    )


def _webhook(connector: Connector, url: str, mode: str) -> Guide:
    return Guide(
        values=[
            ("Endpoint (POST, JSON)", url),
            ("Timestamp header", f"{TIMESTAMP_HEADER}: <unix seconds>"),
            ("Signature header", f"{SIGNATURE_HEADER}: v1=<hex digest>"),
            ("Event id header (optional)", f"{EVENT_ID_HEADER}: <unique id>"),
            ("Signature", 'v1=hex(HMAC-SHA256(signing secret, "<timestamp>." + raw body))'),
        ],
        steps=[
            "POST each event as JSON to the endpoint, signed with the signing secret. Requests "
            "older than 5 minutes or with a wrong signature are refused with 401.",
            "Give every event a unique event_id: redeliveries with the same id are ignored.",
            "Replies and cards are POSTed to this connector's callback URL, signed the same "
            "way with the callback signing secret.",
        ],
        lists=[
            (
                "Event body",
                [
                    '{"event_id": "…", "type": "message", "text": "…", '
                    '"user": {"id": "…", "email": "…"}, "chat": {"id": "…", "type": "p2p"}}',
                    '"type": "card_action" with "action": the button value Cadre sent',
                ],
            )
        ],
    )
