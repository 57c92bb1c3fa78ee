"""The one outbound guard: every server-side fetch Cadre makes to a URL someone configured
(model providers, OIDC discovery and keys, SAML metadata, MCP servers, alert and connector
webhooks, the IM platforms' APIs, the agents' http_request tool) resolves the host, checks
every address, and connects to the address it checked.

A URL is a request made on behalf of whoever configured it, so by default it may reach only
public addresses. Two classes of address are refused:

- never, whatever the settings say: unspecified (0.0.0.0/8, ::), link-local (169.254.0.0/16,
  fe80::/10, where the clouds' metadata services live), the metadata endpoints outside those
  ranges (fd00:ec2::/64, 100.100.100.200, 192.0.0.192, 168.63.129.16), multicast and broadcast;
- unless the instance allows them: every other non-public address (loopback, private, shared,
  reserved). Each kind of caller has its own allow-list setting (host names, addresses or
  networks, "*" for every such address): a self-hosted model on the same machine is legitimate,
  an alert webhook to the database's port usually is not.

An address carrying an IPv4 address inside IPv6 (::ffff:a.b.c.d, ::a.b.c.d, 64:ff9b::/96,
6to4, Teredo) is judged by both. A URL is checked when it is saved (a clear 400 at once) and
again at every connection, in the connection itself: the address that passed is the address
the socket connects to, so a name that resolves elsewhere the second time (DNS rebinding) gains
nothing. TLS still verifies the certificate for the host name, and redirects are not followed.
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpcore
import httpx
from django.conf import settings

from cadre.env import env_list
from cadre.errors import InvalidInput
from cadre.languages import gettext_or_message as _

# The allow-list setting of each kind of caller (the surfaces the guard protects).
ALERT_WEBHOOKS = "CADRE_ALERT_WEBHOOK_ALLOWED_HOSTS"
CONNECTOR_WEBHOOKS = "CADRE_CONNECTOR_WEBHOOK_ALLOWED_HOSTS"
MCP_SERVERS = "CADRE_MCP_ALLOWED_HOSTS"
SAML_METADATA = "CADRE_SAML_METADATA_ALLOWED_HOSTS"
OIDC_PROVIDERS = "CADRE_OIDC_ALLOWED_HOSTS"
MODEL_PROVIDERS = "CADRE_MODEL_PROVIDER_ALLOWED_HOSTS"
# The IM platforms' APIs: connectors' API base URLs, directory reads, file downloads, DingTalk
# sessionWebhooks and IM logins (a login and a connector of a private deployment reach the same
# host).
CONNECTOR_APIS = "CADRE_CONNECTOR_ALLOWED_HOSTS"
# The agents' http_request tool: the internal hosts agents may call (beside each tool rule's own
# host names).
AGENT_HTTP = "CADRE_AGENT_HTTP_ALLOWED_HOSTS"
SURFACES = (
    ALERT_WEBHOOKS,
    CONNECTOR_WEBHOOKS,
    MCP_SERVERS,
    SAML_METADATA,
    OIDC_PROVIDERS,
    MODEL_PROVIDERS,
    CONNECTOR_APIS,
    AGENT_HTTP,
)

# The error code of a refused webhook or MCP server URL (alert rules, connectors, MCP).
WEBHOOK_URL_REFUSED = "webhook_url_refused"
SCHEMES = ("http", "https")
MAX_URL = 2000

# Refused whatever an allow-list says: no legitimate integration lives there, and the cloud
# metadata services (credentials of the machine) do.
_NEVER = tuple(
    ipaddress.ip_network(network)
    for network in (
        "0.0.0.0/8",  # "this network": 0.0.0.0 connects to the local machine
        "169.254.0.0/16",  # link-local: AWS, Azure, GCP, OpenStack metadata at .169.254
        "224.0.0.0/4",  # multicast
        "255.255.255.255/32",  # broadcast
        "100.100.100.200/32",  # Alibaba Cloud metadata (inside the shared 100.64/10)
        "192.0.0.192/32",  # Oracle Cloud metadata
        "168.63.129.16/32",  # Azure's host endpoint (a public address)
        "::/128",  # unspecified
        "fe80::/10",  # link-local
        "ff00::/8",  # multicast
        "fd00:ec2::/64",  # AWS metadata, DNS and NTP over IPv6 (fd00:ec2::254 …)
    )
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_HOST_NAME = re.compile(r"[a-z0-9._-]+")
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")


class OutboundRefused(InvalidInput):
    """A URL Cadre will not call: not http(s), malformed, or a destination the guard refuses
    (HTTP 400). Callers give it their own code and field."""

    code = "url_refused"


@dataclass(frozen=True)
class Destination:
    scheme: str
    host: str  # lower-case, IDNA-encoded, no trailing dot, no brackets
    port: int


# --- the check ----------------------------------------------------------------------------


def _allow_list(setting: str) -> tuple[bool, set[str], list]:
    """(every internal address allowed, host names, networks) from an allow-list setting."""
    names: set[str] = set()
    networks: list = []
    if settings.configured or os.environ.get("DJANGO_SETTINGS_MODULE"):
        entries = getattr(settings, setting, None) or []
    else:  # a script using the model client without Django: the environment itself
        entries = env_list(setting, [])
    for entry in entries:
        entry = str(entry).strip().lower()
        if not entry:
            continue
        if entry == "*":
            return True, names, networks
        try:
            networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
        except ValueError:
            names.add(entry.rstrip("."))
    return False, names, networks


def _embedded(address) -> list:
    """The address and any IPv4 address it carries (a NAT64 gateway or the kernel reaches that
    one)."""
    found = [address]
    if address.version == 6:
        if address.ipv4_mapped is not None:
            found.append(address.ipv4_mapped)
        elif address in _NAT64 or (address in _IPV4_COMPATIBLE and int(address) > 1):
            found.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
        if address.sixtofour is not None:
            found.append(address.sixtofour)
        if address.teredo is not None:
            found.append(address.teredo[1])
    return found


def _never(address) -> bool:
    return any(
        candidate.version == network.version and candidate in network
        for candidate in _embedded(address)
        for network in _NEVER
    )


def _internal(address) -> bool:
    """Not a public unicast address: loopback, private, shared, reserved, …"""
    return any(
        not candidate.is_global or candidate.is_multicast for candidate in _embedded(address)
    )


def check_addresses(host: str, addresses: Iterable, *, allow_setting: str) -> None:
    """Refuse (OutboundRefused) when any address `host` resolves to may not be called."""
    everything, names, networks = _allow_list(allow_setting)
    for address in addresses:
        if _never(address):
            raise OutboundRefused(
                _(
                    "The host %(host)r resolves to the internal address %(address)s, which Cadre "
                    "never calls (unspecified, link-local or a cloud metadata service; no "
                    "setting allows it)."
                )
                % {"host": host, "address": address},
                details={"url": [_("%(host)s resolves to a refused address.") % {"host": host}]},
            )
        if everything or host in names or not _internal(address):
            continue
        if any(
            candidate.version == network.version and candidate in network
            for candidate in _embedded(address)
            for network in networks
        ):
            continue
        raise OutboundRefused(
            _(
                "The host %(host)r resolves to the internal address %(address)s; Cadre calls only "
                "public addresses here (an administrator can allow internal hosts with "
                "%(setting)s)."
            )
            % {"host": host, "address": address, "setting": allow_setting},
            details={
                "url": [
                    _("%(host)s resolves to an internal address (%(address)s).")
                    % {"host": host, "address": address}
                ]
            },
        )


def _canonical_host(host: str) -> str:
    host = host.strip("[]").rstrip(".").lower()
    if not host:
        raise ValueError("no host")
    if ":" in host:  # an IPv6 literal (urlsplit already dropped its brackets)
        return str(ipaddress.ip_address(host.split("%")[0]))
    # The name the resolver will be asked: what IDNA makes of it ("①②⑦.0.0.1" is 127.0.0.1).
    host = host.encode("idna").decode("ascii").lower()
    if not _HOST_NAME.fullmatch(host):
        raise ValueError(f"{host!r} is not a host name")
    return host


def parse_url(url) -> Destination:
    """The scheme, host and port of an acceptable-looking URL, else OutboundRefused."""
    if not isinstance(url, str) or not url.strip() or len(url) > MAX_URL:
        raise OutboundRefused(
            _("A URL is needed (at most 2,000 characters)."),
            details={"url": [_("Enter an http:// or https:// URL.")]},
        )
    try:
        parts = urlsplit(url.strip())
        port = parts.port
        scheme = parts.scheme.lower()
        if scheme not in SCHEMES:
            raise OutboundRefused(
                _("URLs must use http or https, not %(scheme)r.")
                % {"scheme": scheme or _("no scheme")},
                details={"url": [_("Only http:// and https:// URLs are accepted.")]},
            )
        if not parts.hostname:
            raise OutboundRefused(
                _("The URL has no host."), details={"url": [_("Enter a URL with a host name.")]}
            )
        host = _canonical_host(parts.hostname)
    except (ValueError, UnicodeError) as error:
        raise OutboundRefused(
            _("The URL is malformed (%(error)s).") % {"error": error},
            details={"url": [str(error)]},
        ) from None
    return Destination(scheme, host, port or (443 if scheme == "https" else 80))


def _literal(host: str):
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def resolve(host: str, port: int) -> list:
    """Every address `host` resolves to, in the resolver's order (OSError when none)."""
    literal = _literal(host.strip("[]"))
    if literal is not None:
        return [literal]
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    addresses = list(
        dict.fromkeys(ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos)
    )
    if not addresses:
        raise OSError(f"{host} has no address")
    return addresses


def resolve_checked(host: str, port: int, *, allow_setting: str) -> list:
    """Resolve once and check every answer: the addresses a connection may use (all of them
    passed), else OutboundRefused; resolver failures are OSError."""
    try:
        host = _canonical_host(host)
    except (ValueError, UnicodeError) as error:
        raise OutboundRefused(_("The host %(host)r is malformed.") % {"host": host}) from error
    addresses = resolve(host, port)
    check_addresses(host, addresses, allow_setting=allow_setting)
    return addresses


def check_url(url, *, allow_setting: str, code: str | None = None, field: str = "url") -> str:
    """Check a URL when it is saved: returns it stripped, or raises OutboundRefused (400, with
    `code` and the message under `field`). A host that does not resolve right now is accepted:
    the check at connection time decides."""
    try:
        destination = parse_url(url)
        literal = _literal(destination.host)
        if literal is not None:
            addresses = [literal]
        else:
            try:
                addresses = resolve(destination.host, destination.port)
            except (OSError, UnicodeError):
                addresses = []
        check_addresses(destination.host, addresses, allow_setting=allow_setting)
    except OutboundRefused as refused:
        raise OutboundRefused(
            refused.message, code=code or refused.code, details={field: [refused.message]}
        ) from None
    return url.strip()


# --- connecting to the checked address ------------------------------------------------------
# The SDKs Cadre calls through are built on two forks of one HTTP client: httpx (the openai SDK,
# the connectors) and httpx2 (the anthropic and MCP SDKs, Authlib). Each gets the same network
# backend: httpcore's connection pool calls `connect_tcp(host, port)` for every new connection,
# and there the guard resolves once, checks, and opens the socket to an address that passed.
# TLS then runs over that socket with the host name (SNI and certificate check), and the Host
# header is the URL's, so nothing but the address is pinned.


def _libraries(library: str):
    if library == "httpx":
        return httpx, httpcore
    if library == "httpx2":
        import httpcore2
        import httpx2

        return httpx2, httpcore2
    raise ValueError(f"unknown HTTP library {library!r}")


class _GuardedBackend:
    """An httpcore (or httpcore2) network backend with the guard in `connect_tcp`."""

    def __init__(self, allow_setting: str, core):
        self.allow_setting = allow_setting
        self._core = core
        self._inner = core.SyncBackend()

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        try:
            addresses = resolve_checked(host, port, allow_setting=self.allow_setting)
        except OSError as error:
            raise self._core.ConnectError(f"{host}: {error}") from error
        failure: Exception | None = None
        for address in addresses:
            try:
                return self._inner.connect_tcp(
                    str(address), port, timeout, local_address, socket_options
                )
            except self._core.ConnectError as error:
                failure = error  # the next address, as create_connection would
        raise failure  # type: ignore[misc]

    def connect_unix_socket(self, path, timeout=None, socket_options=None):
        raise OutboundRefused(_("Unix sockets are not an outbound destination."))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class _AsyncGuardedBackend:
    """The same for async clients (httpcore2 on anyio: the MCP SDK)."""

    def __init__(self, allow_setting: str, core):
        self.allow_setting = allow_setting
        self._core = core
        self._inner = core.AnyIOBackend()

    async def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        import anyio

        try:
            addresses = await anyio.to_thread.run_sync(
                lambda: resolve_checked(host, port, allow_setting=self.allow_setting)
            )
        except OSError as error:
            raise self._core.ConnectError(f"{host}: {error}") from error
        failure: Exception | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(
                    str(address), port, timeout, local_address, socket_options
                )
            except self._core.ConnectError as error:
                failure = error
        raise failure  # type: ignore[misc]

    async def connect_unix_socket(self, path, timeout=None, socket_options=None):
        raise OutboundRefused(_("Unix sockets are not an outbound destination."))

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def transport(*, allow_setting: str, library: str = "httpx"):
    """An HTTP transport whose every connection goes through the guard, for a client built
    elsewhere (Authlib's). No proxy: a proxy would resolve the name itself."""
    http, core = _libraries(library)
    guarded = http.HTTPTransport()
    # The transport builds its pool with no way to name the network backend: replace it.
    guarded._pool = core.ConnectionPool(
        ssl_context=http.create_ssl_context(), network_backend=_GuardedBackend(allow_setting, core)
    )
    return guarded


def http_client(*, allow_setting: str, library: str = "httpx", timeout: float = 10.0, **options):
    """A client (httpx.Client, or httpx2.Client for the SDKs built on it) for URLs someone
    configured: every connection checked and pinned, no redirects followed, no proxy from the
    environment."""
    http, _core = _libraries(library)
    options.setdefault("follow_redirects", False)
    return http.Client(
        transport=transport(allow_setting=allow_setting, library=library),
        timeout=timeout,
        trust_env=False,
        **options,
    )


def async_http_client(*, allow_setting: str, timeout: float = 10.0, **options):
    """The same for async code: an httpx2.AsyncClient (the MCP SDK's client)."""
    http, core = _libraries("httpx2")
    guarded = http.AsyncHTTPTransport()
    guarded._pool = core.AsyncConnectionPool(
        ssl_context=http.create_ssl_context(),
        network_backend=_AsyncGuardedBackend(allow_setting, core),
    )
    options.setdefault("follow_redirects", False)
    return http.AsyncClient(transport=guarded, timeout=timeout, trust_env=False, **options)
