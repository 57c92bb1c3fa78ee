"""The one outbound guard (cadre.outbound): the loopback, private and metadata forms an outsider
tries, refused for every kind of caller; what an allow-list admits and what it never can; and
connections that go to the address that was checked, once (DNS rebinding gains nothing)."""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from cadre import outbound
from cadre.outbound import OutboundRefused

# Forms of loopback and private addresses: refused unless the caller's setting allows them.
INTERNAL = [
    "http://127.0.0.1/",
    "http://127.0.0.1:8000/v1",
    "http://127.1/",
    "http://0177.0.0.1/",  # octal
    "http://0x7f.0.0.1/",  # hex
    "http://0x7f000001/",
    "http://2130706433/",  # decimal
    "http://017700000001/",
    "http://localhost/",
    "http://LOCALHOST./",
    "http://①②⑦.0.0.1/",  # IDNA makes it 127.0.0.1
    "http://[::1]/",
    "http://[0:0:0:0:0:0:0:1]/",
    "http://[::ffff:127.0.0.1]/",  # IPv4-mapped
    "http://[::ffff:7f00:1]/",
    "http://[::127.0.0.1]/",  # IPv4-compatible
    "http://[64:ff9b::7f00:1]/",  # NAT64
    "http://[2002:7f00:1::]/",  # 6to4
    "http://10.0.0.1/",
    "http://192.168.1.1/",
    "http://172.16.0.1/",
    "http://100.64.0.1/",  # shared (carrier-grade NAT)
    "http://[fd12:3456::1]/",  # unique local
]
# Refused whatever the settings say: unspecified, link-local, cloud metadata.
NEVER = [
    "http://0.0.0.0/",
    "http://0/",
    "http://0.1.2.3/",
    "http://[::]/",
    "http://169.254.169.254/latest/meta-data/",
    "http://2852039166/",  # 169.254.169.254, decimal
    "http://0xa9fea9fe/",  # hex
    "http://0251.0376.0251.0376/",  # octal
    "http://169.254.170.2/v2/credentials",  # ECS task credentials
    "http://[::ffff:169.254.169.254]/",
    "http://[::ffff:a9fe:a9fe]/",
    "http://[64:ff9b::a9fe:a9fe]/",
    "http://[fd00:ec2::254]/latest/meta-data/",
    "http://[fe80::1]/",
    "http://100.100.100.200/latest/meta-data/",  # Alibaba Cloud
    "http://192.0.0.192/opc/v1/instance/",  # Oracle Cloud
    "http://168.63.129.16/machine",  # Azure host endpoint
    "http://metadata.google.internal/computeMetadata/v1/",  # resolves link-local (dns below)
    "http://224.0.0.1/",
]


@pytest.fixture(autouse=True)
def nothing_allowed(settings):
    for setting in outbound.SURFACES:
        setattr(settings, setting, [])


@pytest.fixture
def dns(monkeypatch):
    """Answers for made-up names (the machine has no DNS): a name maps to a list of answers,
    one per lookup (the last repeats); every lookup is recorded. Other names resolve normally."""
    answers: dict[str, list[str]] = {"metadata.google.internal": ["169.254.169.254"]}
    asked: list[str] = []
    real = socket.getaddrinfo

    def getaddrinfo(host, port, *args, **kwargs):
        host = host.decode() if isinstance(host, bytes) else host
        if host in answers:
            asked.append(host)
            queue = answers[host]
            address = queue.pop(0) if len(queue) > 1 else queue[0]
            family = socket.AF_INET6 if ":" in address else socket.AF_INET
            return [(family, socket.SOCK_STREAM, 6, "", (address, port))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return _Dns(answers, asked)


class _Dns:
    def __init__(self, answers: dict, asked: list):
        self.answers, self.asked = answers, asked

    def __setitem__(self, host: str, addresses) -> None:
        self.answers[host] = [addresses] if isinstance(addresses, str) else list(addresses)


class _Receiver(BaseHTTPRequestHandler):
    def do_GET(self):
        self.server.received.append(dict(self.headers))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args):
        pass


@pytest.fixture
def receiver():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    server.received = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


# --- when a URL is saved ----------------------------------------------------------------------


@pytest.mark.parametrize("setting", outbound.SURFACES)
@pytest.mark.parametrize("url", INTERNAL + NEVER)
def test_every_loopback_private_and_metadata_form_is_refused_for_every_caller(setting, url, dns):
    with pytest.raises(OutboundRefused) as refused:
        outbound.check_url(url, allow_setting=setting, code="x_refused")
    assert refused.value.status == 400 and refused.value.code == "x_refused"
    assert "internal address" in refused.value.message


@pytest.mark.parametrize("url", NEVER)
def test_link_local_metadata_and_unspecified_addresses_are_refused_whatever_is_allowed(
    url, dns, settings
):
    settings.CADRE_MODEL_PROVIDER_ALLOWED_HOSTS = [
        "*",
        "0.0.0.0/0",
        "::/0",
        "metadata.google.internal",
    ]
    with pytest.raises(OutboundRefused, match="never calls"):
        outbound.check_url(url, allow_setting=outbound.MODEL_PROVIDERS)


@pytest.mark.parametrize("url", INTERNAL)
def test_an_instance_setting_admits_loopback_and_private_addresses(url, settings):
    settings.CADRE_MODEL_PROVIDER_ALLOWED_HOSTS = ["*"]
    assert outbound.check_url(url, allow_setting=outbound.MODEL_PROVIDERS) == url
    # …for its own kind of caller only.
    with pytest.raises(OutboundRefused):
        outbound.check_url(url, allow_setting=outbound.MCP_SERVERS)


def test_the_allow_list_admits_named_hosts_addresses_and_networks(settings, dns):
    dns["models.corp.internal"] = "10.20.0.5"
    allowed = ["models.corp.internal", "localhost", "10.9.0.0/16"]
    settings.CADRE_MODEL_PROVIDER_ALLOWED_HOSTS = allowed
    for url in ("http://models.corp.internal/v1", "http://localhost:11434/v1", "http://10.9.3.4/"):
        outbound.check_url(url, allow_setting=outbound.MODEL_PROVIDERS)
    for url in ("http://10.8.3.4/", "http://127.0.0.1:11434/v1"):
        with pytest.raises(OutboundRefused):
            outbound.check_url(url, allow_setting=outbound.MODEL_PROVIDERS)


@pytest.mark.parametrize(
    "url",
    ["ftp://example.com/", "file:///etc/passwd", "gopher://x/", "http://", "", "x" * 3000, None],
)
def test_only_http_urls_with_a_host_are_accepted(url):
    with pytest.raises(OutboundRefused):
        outbound.check_url(url, allow_setting=outbound.MODEL_PROVIDERS)


@pytest.mark.parametrize(
    "url",
    ["http://exa\x00mple.com/", "http://[::1/", "http://example.com:99999/", "http://\ud800/"],
)
def test_hostile_urls_are_refused_not_crashed_on(url):
    with pytest.raises(OutboundRefused):
        outbound.check_url(url, allow_setting=outbound.MODEL_PROVIDERS)


def test_a_public_name_is_accepted_and_a_name_not_resolving_now_is_left_to_the_connection(dns):
    dns["api.example.net"] = "93.184.216.34"
    assert outbound.check_url("https://api.example.net/v1", allow_setting=outbound.MODEL_PROVIDERS)
    assert outbound.check_url("https://nowhere.invalid/", allow_setting=outbound.MODEL_PROVIDERS)


# --- when connecting ---------------------------------------------------------------------------


def test_the_connection_itself_refuses_an_internal_address(receiver):
    url = f"http://127.0.0.1:{receiver.server_address[1]}/x"
    with (
        outbound.http_client(allow_setting=outbound.MODEL_PROVIDERS) as client,
        pytest.raises(OutboundRefused),
    ):
        client.get(url)
    assert receiver.received == []


def test_dns_rebinding_after_the_check_reaches_nothing(receiver, dns):
    port = receiver.server_address[1]
    # Public when the URL is saved, loopback by the time the request is made.
    dns["rebind.example.net"] = ["93.184.216.34", "127.0.0.1"]
    url = f"http://rebind.example.net:{port}/x"
    outbound.check_url(url, allow_setting=outbound.MODEL_PROVIDERS)
    with (
        outbound.http_client(allow_setting=outbound.MODEL_PROVIDERS) as client,
        pytest.raises(OutboundRefused),
    ):
        client.get(url)
    assert receiver.received == []


def test_a_connection_goes_to_the_address_it_checked_after_one_lookup(receiver, dns, settings):
    port = receiver.server_address[1]
    settings.CADRE_MODEL_PROVIDER_ALLOWED_HOSTS = ["127.0.0.0/8"]
    # The first answer is checked and used; a later one (nothing listens there) never is.
    dns["models.example.net"] = ["127.0.0.1", "127.0.0.2"]
    with outbound.http_client(allow_setting=outbound.MODEL_PROVIDERS) as client:
        response = client.get(f"http://models.example.net:{port}/x")
    assert response.status_code == 200
    assert dns.asked == ["models.example.net"]
    [headers] = receiver.received
    assert headers["Host"] == f"models.example.net:{port}"  # the name, not the address


def test_redirects_are_not_followed(receiver, settings):
    settings.CADRE_MODEL_PROVIDER_ALLOWED_HOSTS = ["127.0.0.1"]
    with outbound.http_client(allow_setting=outbound.MODEL_PROVIDERS) as client:
        assert client.follow_redirects is False


def test_a_name_that_does_not_resolve_is_a_connect_error(dns):
    with (
        outbound.http_client(allow_setting=outbound.MODEL_PROVIDERS) as client,
        pytest.raises(httpx.ConnectError),
    ):
        client.get("http://nowhere.invalid/")


@pytest.mark.django_db
def test_the_async_client_refuses_at_connection_time_too(receiver):
    import asyncio

    url = f"http://127.0.0.1:{receiver.server_address[1]}/x"

    async def fetch():
        async with outbound.async_http_client(allow_setting=outbound.MCP_SERVERS) as client:
            await client.get(url)

    with pytest.raises(OutboundRefused):
        asyncio.run(fetch())
    assert receiver.received == []
