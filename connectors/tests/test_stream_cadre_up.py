"""End to end: `cadre up` notices a Feishu connector switched to long-connection mode, starts its
worker, which connects to a loopback long-connection endpoint and stores an event; Ctrl-C stops
it with everything else, leaving no process behind."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from connectors.feishu.tests.fake_api import APP_ID, APP_SECRET
from connectors.tests.fakes import FakePlatformServer
from tests.runtime.conftest import data_dir  # noqa: F401 - fixture
from tests.runtime.test_cadre_up import (
    Run,
    cadre_command,
    environment,
    free_port,
    group_members,
)

pytestmark = pytest.mark.e2e
pytest.importorskip("lark_oapi")

from connectors.tests.fake_longconn import FakeLongConnection  # noqa: E402

CREATE_CONNECTOR = """
from cadre.tenancy.actors import system_actor
from cadre.tenancy.models import Organization
from connectors.base import services
org = Organization.objects.get(slug="demo")
connector = services.connector_create(
    actor=system_actor(org), platform="feishu", name="Feishu (long connection)",
    credentials={{"app_id": "{app_id}", "app_secret": "{app_secret}"}},
    settings={{"mode": "long_connection", "api_base_url": "{base}"}},
)
print("public-id", connector.public_id)
"""

COUNT_EVENTS = """
from connectors.models import InboundEvent
print("events", list(InboundEvent.objects.values_list("event_key", "payload__text")))
"""


def manage_shell(folder, code: str) -> str:
    done = subprocess.run(
        [*cadre_command(), "manage", "shell", "-c", code],
        env=environment(folder),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_cadre_up_runs_a_long_connection_worker_and_stops_it(data_dir, tmp_path):  # noqa: F811
    api = FakePlatformServer().start()
    endpoint = FakeLongConnection(api, app_id=APP_ID, app_secret=APP_SECRET).start()
    run = Run(data_dir, free_port(), tmp_path / "up.log")
    try:
        run.wait_ready()
        manage_shell(
            data_dir, CREATE_CONNECTOR.format(app_id=APP_ID, app_secret=APP_SECRET, base=api.url)
        )
        # The supervisor re-reads the connectors every 15 s; the worker then imports the SDK.
        run.wait_for("cadre: starting stream Feishu (long connection)", timeout=120)
        assert endpoint.connected.wait(240), run.output()

        answer = endpoint.push(
            {
                "schema": "2.0",
                "header": {"event_id": "e2e-1", "event_type": "im.message.receive_v1"},
                "event": {
                    "sender": {"sender_id": {"open_id": "ou_e2e"}, "sender_type": "user"},
                    "message": {
                        "message_id": "om_e2e",
                        "chat_id": "oc_e2e",
                        "chat_type": "p2p",
                        "message_type": "text",
                        "content": json.dumps({"text": "over the long connection"}),
                    },
                },
            },
            timeout=120,
        )
        assert answer["code"] == 200
        assert "('e2e-1', 'over the long connection')" in manage_shell(data_dir, COUNT_EVENTS)

        record = json.loads((data_dir / "run" / "cadre-up.json").read_text())
        names = [child["name"] for child in record["children"]]
        assert names == ["web", "worker-runs", "worker", "beat", "stream Feishu (long connection)"]
        groups = [child["pid"] for child in record["children"]]

        assert run.stop() == 0
        deadline = time.monotonic() + 30
        while group_members(groups) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert group_members(groups) == []
    finally:
        run.kill()
        endpoint.stop()
        api.stop()
