"""Model providers behind the outbound guard (issue #29, finding 7): a base URL on loopback,
link-local or a metadata address is refused when saved (400, nothing stored) and at every
request (nothing sent, the key included), unless the instance allows the host
(CADRE_MODEL_PROVIDER_ALLOWED_HOSTS; metadata never); "test connection" reports status,
latency and the model list, never what the endpoint wrote; an endpoint answering a 200 that is
not JSON is a clear failure, not a 500."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from cadre.agents import providers
from cadre.agents.models import ModelProviderConfig
from cadre.llm import ProviderError
from cadre.llm.anthropic import AnthropicProvider
from cadre.llm.metering import uncharged
from cadre.llm.openai_compatible import OpenAICompatibleProvider
from tests.agents.fake_models import FakeModelServer

pytestmark = pytest.mark.django_db

URL = "/api/v1/model-providers/"
SECRET_REPLY = "listener-secret-7f3a"


@pytest.fixture
def nothing_allowed(settings):
    """A fresh install: no internal model endpoint allowed (the suite allows loopback)."""
    settings.CADRE_MODEL_PROVIDER_ALLOWED_HOSTS = []


def _create(client, base_url: str, **fields):
    return client.post(
        URL,
        {
            "name": fields.pop("name", "Probe"),
            "kind": fields.pop("kind", "openai_compatible"),
            "base_url": base_url,
            "api_key": "sk-stored-key",
            "default_model": "fake-chat",
            **fields,
        },
        format="json",
    )


@pytest.mark.parametrize(
    "base_url",
    [
        "http://127.0.0.1:11434/v1",
        "http://localhost:8000/v1",
        "http://[::1]:8000/v1",
        "http://169.254.169.254/latest/meta-data",
        "http://[fd00:ec2::254]/latest",
        "http://[::ffff:127.0.0.1]/v1",
        "http://0.0.0.0:8000/v1",
        "http://10.0.0.5/v1",
    ],
)
def test_an_internal_base_url_is_refused_when_saved_and_nothing_is_stored(
    alice, client_for, nothing_allowed, base_url
):
    response = _create(client_for(alice), base_url)
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "base_url_refused"
    assert "base_url" in error["details"]
    assert not ModelProviderConfig.objects.exists()


def test_changing_the_base_url_to_an_internal_address_is_refused(owner, nothing_allowed):
    config = providers.provider_config_create(
        actor=owner,
        name="Public",
        kind="openai_compatible",
        base_url="https://api.deepseek.com/v1",
        default_model="m",
    )
    with pytest.raises(providers.InvalidInput) as refused:
        providers.provider_config_update(
            actor=owner, config=config, base_url="http://169.254.169.254/v1"
        )
    assert refused.value.code == "base_url_refused"
    config.refresh_from_db()
    assert config.base_url == "https://api.deepseek.com/v1"


def test_the_instance_setting_allows_a_self_hosted_model_but_never_metadata(
    alice, client_for, settings
):
    settings.CADRE_MODEL_PROVIDER_ALLOWED_HOSTS = ["localhost", "127.0.0.1"]
    client = client_for(alice)
    assert _create(client, "http://localhost:11434/v1", name="Ollama").status_code == 201
    settings.CADRE_MODEL_PROVIDER_ALLOWED_HOSTS = ["*"]
    refused = _create(client, "http://169.254.169.254/v1", name="Metadata")
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "base_url_refused"
    assert list(ModelProviderConfig.objects.values_list("name", flat=True)) == ["Ollama"]


def test_every_request_checks_again_and_sends_nothing_to_a_refused_address(
    alice, client_for, settings
):
    """Saved while the instance allowed loopback, then the allowance is withdrawn: the test
    connection reaches nothing (the stored key is not sent)."""
    with FakeModelServer([{"text": SECRET_REPLY}]) as server:
        created = _create(client_for(alice), server.base_url)
        assert created.status_code == 201
        settings.CADRE_MODEL_PROVIDER_ALLOWED_HOSTS = []
        response = client_for(alice).post(f"{URL}{created.json()['id']}/test/")
    assert response.status_code == 200
    report = response.json()
    assert report["ok"] is False and report["reason"] == "refused"
    assert "internal address" in report["error"]
    assert server.requests == []


def test_a_run_cannot_reach_a_refused_address_either(nothing_allowed):
    with FakeModelServer([{"text": SECRET_REPLY}]) as server:
        for provider in (
            OpenAICompatibleProvider(model="m", base_url=server.base_url, api_key="sk-x"),
            AnthropicProvider(model="m", base_url=server.root_url, api_key="sk-x"),
        ):
            with uncharged(), pytest.raises(ProviderError) as refused:
                provider.chat([{"role": "user", "content": "hi"}])
            assert refused.value.reason == "refused" and not refused.value.transient
    assert server.requests == []


def test_dns_rebinding_after_the_save_reaches_nothing(owner, nothing_allowed, monkeypatch):
    """The name was public when saved and resolves to the loopback listener at request time."""
    with FakeModelServer([{"text": SECRET_REPLY}]) as server:
        port = server.httpd.server_address[1]
        answers = ["93.184.216.34"]
        real = socket.getaddrinfo

        def getaddrinfo(host, *args, **kwargs):
            if host == "models.example.net":
                return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (answers[-1], port))]
            return real(host, *args, **kwargs)

        monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
        config = providers.provider_config_create(
            actor=owner,
            name="Rebinding",
            kind="openai_compatible",
            base_url=f"http://models.example.net:{port}/v1",
            api_key="sk-stored-key",
            default_model="fake-chat",
        )
        answers.append("127.0.0.1")
        report = providers.provider_config_test(actor=owner, config=config)
    assert report["ok"] is False and report["reason"] == "refused"
    assert server.requests == []


def test_the_connection_test_reports_status_latency_and_models_never_the_reply(alice, client_for):
    with FakeModelServer([{"text": SECRET_REPLY}], api_key="sk-stored-key") as server:
        created = _create(client_for(alice), server.base_url)
        response = client_for(alice).post(f"{URL}{created.json()['id']}/test/")
    assert response.status_code == 200
    report = response.json()
    assert report["ok"] is True and report["models"] == ["fake-chat", "fake-large"]
    assert isinstance(report["latency_ms"], int)
    assert SECRET_REPLY not in response.content.decode()


class _NotAModel(BaseHTTPRequestHandler):
    """Answers every request 200 with a page that is not the API's JSON."""

    def _answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        body = b"<html>internal admin page: password=hunter2</html>"
        self.send_response(200)
        self.send_header("Content-Type", self.server.content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *args):
        pass


@pytest.fixture(params=["text/html", "application/json"])
def not_a_model(request):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NotAModel)
    server.content_type = request.param
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("kind", ["openai_compatible", "anthropic"])
def test_a_200_that_is_not_json_is_a_failed_test_not_a_500(alice, client_for, not_a_model, kind):
    base_url = f"{not_a_model}/v1" if kind == "openai_compatible" else not_a_model
    created = _create(client_for(alice), base_url, kind=kind)
    assert created.status_code == 201, created.content
    response = client_for(alice).post(f"{URL}{created.json()['id']}/test/")
    assert response.status_code == 200, response.content
    report = response.json()
    assert report["ok"] is False and report["error"]
    assert "hunter2" not in json.dumps(report)
