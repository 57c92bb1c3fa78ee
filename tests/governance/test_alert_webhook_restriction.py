"""Alert webhook URLs: http(s) only, never an internal address (SSRF) unless allowed by
CADRE_ALERT_WEBHOOK_ALLOWED_HOSTS (link-local and metadata addresses never); checked when a rule
is saved and again at every send, in the connection."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from cadre import outbound
from cadre.governance import alerts, notifications
from cadre.governance.models import Alert, AlertRule, PolicyDecision
from cadre.outbound import OutboundRefused as WebhookRefused
from cadre.tenancy.actors import member_actor


def validate_webhook_url(url):
    """What an alert rule's save checks."""
    return outbound.check_url(
        url, allow_setting=outbound.ALERT_WEBHOOKS, code=outbound.WEBHOOK_URL_REFUSED
    )


@pytest.fixture(autouse=True)
def nothing_allowed(settings):
    """The default of a fresh install: no internal destination is allowed."""
    settings.CADRE_ALERT_WEBHOOK_ALLOWED_HOSTS = []


@pytest.fixture
def dns(monkeypatch):
    """Answers for made-up host names (the machine has no DNS); other names resolve normally."""
    answers: dict[str, str] = {}
    real = socket.getaddrinfo

    def getaddrinfo(host, port, *args, **kwargs):
        if host in answers:
            family = socket.AF_INET6 if ":" in answers[host] else socket.AF_INET
            return [(family, socket.SOCK_STREAM, 6, "", (answers[host], port))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return answers


class _Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.received.append((dict(self.headers), body))
        redirect = getattr(self.server, "redirect_to", None)
        self.send_response(302 if redirect else 204)
        if redirect:
            self.send_header("Location", redirect)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def receiver():
    servers = []

    def start(redirect_to=None):
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
        server.received, server.redirect_to = [], redirect_to
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.shutdown()


def _rule(member, url, name="hook"):
    return alerts.alert_rule_create(
        actor=member_actor(member),
        name=name,
        kind="denied_spike",
        params={"threshold": 0},
        channels=[{"kind": "webhook", "url": url, "secret": "s3cret"}],
    )


def _fire(rule) -> Alert:
    PolicyDecision.objects.create(
        organization=rule.organization, stage="tool_call", plugin="tool_access", action="deny"
    )
    [alert] = alerts.alert_rule_evaluate(rule)
    return alert


# --- at save time ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    ["ftp://hooks.example.com/x", "file:///etc/passwd", "javascript:alert(1)", "gopher://a/", ""],
)
def test_non_http_schemes_are_refused(url):
    with pytest.raises(WebhookRefused) as refused:
        validate_webhook_url(url)
    assert refused.value.code == "webhook_url_refused" and refused.value.status == 400


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8000/hook",
        "http://localhost/hook",
        "http://10.1.2.3/hook",
        "https://192.168.0.10/hook",
        "http://172.16.5.4/hook",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]/hook",
        "http://[::ffff:127.0.0.1]/hook",
        "http://[fd00::1]/hook",
        "http://0.0.0.0/hook",
        "http://100.64.0.1/hook",
    ],
)
def test_internal_destinations_are_refused_by_default(url):
    with pytest.raises(WebhookRefused) as refused:
        validate_webhook_url(url)
    assert "internal address" in refused.value.message


def test_a_name_resolving_to_an_internal_address_is_refused(dns):
    dns["hooks.example.net"] = "10.0.0.7"
    with pytest.raises(WebhookRefused, match=r"10\.0\.0\.7"):
        validate_webhook_url("https://hooks.example.net/alerts")
    dns["public.example.net"] = "93.184.216.34"
    assert validate_webhook_url("https://public.example.net/alerts") == (
        "https://public.example.net/alerts"
    )


def test_the_allow_list_admits_named_hosts_addresses_and_networks(settings, dns):
    dns["hooks.corp.internal"] = "10.20.0.5"
    settings.CADRE_ALERT_WEBHOOK_ALLOWED_HOSTS = ["hooks.corp.internal", "127.0.0.1", "10.9.0.0/16"]
    validate_webhook_url("https://hooks.corp.internal/a")
    validate_webhook_url("http://127.0.0.1:9000/a")
    validate_webhook_url("http://10.9.3.4/a")
    with pytest.raises(WebhookRefused):
        validate_webhook_url("http://10.8.3.4/a")  # outside the allowed network
    with pytest.raises(WebhookRefused):
        validate_webhook_url("http://169.254.169.254/")
    settings.CADRE_ALERT_WEBHOOK_ALLOWED_HOSTS = ["*", "169.254.0.0/16"]
    validate_webhook_url("http://10.8.3.4/a")
    with pytest.raises(WebhookRefused, match="never calls"):
        validate_webhook_url("http://169.254.169.254/")  # metadata: no setting allows it
    with pytest.raises(WebhookRefused):
        validate_webhook_url("ftp://127.0.0.1/")  # the scheme rule holds regardless


def test_the_service_refuses_internal_webhooks_and_stores_nothing(alice):
    for url in ("http://127.0.0.1/x", "http://10.0.0.1/x", "http://169.254.169.254/x"):
        with pytest.raises(WebhookRefused):
            _rule(alice, url)
    assert not AlertRule.objects.exists()


def test_the_api_answers_400_with_the_error_code(alice, client_for, settings):
    client = client_for(alice)
    for url in ("http://10.1.1.1/h", "http://169.254.169.254/", "http://127.0.0.1:1/h", "ftp://x/"):
        response = client.post(
            "/api/v1/alert-rules/",
            {
                "name": f"rule {url}",
                "kind": "denied_spike",
                "channels": [{"kind": "webhook", "url": url}],
            },
            format="json",
        )
        assert response.status_code == 400, (url, response.content)
        assert response.json()["error"]["code"] == "webhook_url_refused"
    settings.CADRE_ALERT_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    allowed = client.post(
        "/api/v1/alert-rules/",
        {
            "name": "internal",
            "kind": "denied_spike",
            "channels": [{"kind": "webhook", "url": "http://127.0.0.1:1/h"}],
        },
        format="json",
    )
    assert allowed.status_code == 201


def test_rule_update_checks_webhook_urls_too(alice, settings):
    settings.CADRE_ALERT_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    rule = _rule(alice, "http://127.0.0.1:1/h")
    settings.CADRE_ALERT_WEBHOOK_ALLOWED_HOSTS = []
    with pytest.raises(WebhookRefused):
        alerts.alert_rule_update(
            actor=member_actor(alice),
            rule=rule,
            channels=[{"kind": "webhook", "url": "http://10.0.0.2/h"}],
        )
    rule.refresh_from_db()
    assert rule.channels[0]["url"] == "http://127.0.0.1:1/h"


# --- at send time ---------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_delivery_rechecks_the_destination(alice, settings, receiver):
    server = receiver()
    url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    settings.CADRE_ALERT_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    alert = _fire(_rule(alice, url))
    assert notifications.alert_deliver(alert_id=alert.pk, channel_index=0) == "webhook"
    assert len(server.received) == 1
    # the payload links to the alert's console page
    assert json.loads(server.received[0][1])["url"] == f"http://testserver/alerts/{alert.pk}/"
    # The allowance is withdrawn after the rule was saved: the next send is refused.
    settings.CADRE_ALERT_WEBHOOK_ALLOWED_HOSTS = []
    assert notifications.alert_deliver(alert_id=alert.pk, channel_index=0) == "refused"
    assert len(server.received) == 1


@pytest.mark.django_db(transaction=True)
def test_a_name_that_now_resolves_internally_is_refused_at_send_time(alice, dns, receiver):
    server = receiver()
    port = server.server_address[1]
    dns["hooks.example.net"] = "93.184.216.34"  # public when the rule is saved
    alert = _fire(_rule(alice, f"http://hooks.example.net:{port}/hook"))
    dns["hooks.example.net"] = "127.0.0.1"  # rebound to loopback afterwards
    with pytest.raises(WebhookRefused):
        notifications.send_webhook(f"http://hooks.example.net:{port}/hook", "s", {"a": 1})
    assert notifications.alert_deliver(alert_id=alert.pk, channel_index=0) == "refused"
    assert server.received == []


@pytest.mark.django_db(transaction=True)
def test_the_request_goes_to_the_checked_address_with_the_host_name(settings, dns, receiver):
    server = receiver()
    port = server.server_address[1]
    dns["hooks.corp.internal"] = "127.0.0.1"
    settings.CADRE_ALERT_WEBHOOK_ALLOWED_HOSTS = ["hooks.corp.internal"]
    status = notifications.send_webhook(f"http://hooks.corp.internal:{port}/in?x=1", "k", {"a": 1})
    assert status == 204
    [(headers, body)] = server.received
    assert headers["Host"] == f"hooks.corp.internal:{port}"
    assert headers["X-Cadre-Signature"] == notifications.webhook_signature(
        "k", headers["X-Cadre-Timestamp"], body
    )


@pytest.mark.django_db(transaction=True)
def test_redirects_are_not_followed(settings, receiver):
    target = receiver()
    redirecting = receiver(redirect_to=f"http://127.0.0.1:{target.server_address[1]}/stolen")
    settings.CADRE_ALERT_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    url = f"http://127.0.0.1:{redirecting.server_address[1]}/hook"
    assert notifications.send_webhook(url, "k", {"a": 1}) == 302
    assert len(redirecting.received) == 1 and target.received == []
