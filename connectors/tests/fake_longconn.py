"""A loopback Feishu long-connection endpoint: the documented two-step contract.

1. `POST /callback/ws/endpoint` with `{"AppID", "AppSecret"}` → `{"code": 0, "data": {"URL":
   "ws://…?device_id=…&service_id=…", "ClientConfig": {…}}}` (served by the shared
   `FakePlatformServer`, next to the Open API routes).
2. A websocket at that URL carrying protobuf `pbbp2.Frame`s: the server pushes DATA frames
   (headers type=event, message_id, sum, seq, trace_id; payload = the event JSON) and the
   client answers each with the same frame whose payload is `{"code": 200, "data":
   base64(answer JSON)}`; CONTROL frames carry pings.

The websocket listens on `host` (loopback unless told: bench/cluster.py binds it, and the
`FakePlatformServer`, to its stand-in IM machine's address).
"""

from __future__ import annotations

import base64
import itertools
import json
import queue
import threading

from websockets.sync.server import serve

from connectors.tests.fakes import FakePlatformServer, Recorded

ENDPOINT_PATH = "/callback/ws/endpoint"


class FakeLongConnection:
    def __init__(
        self,
        api: FakePlatformServer,
        *,
        app_id: str,
        app_secret: str,
        host: str = "127.0.0.1",
    ):
        from lark_oapi.ws.pb.pbbp2_pb2 import Frame

        self.Frame = Frame
        self.app_id, self.app_secret = app_id, app_secret
        self.connected = threading.Event()
        self.answers: dict[str, queue.Queue] = {}
        self.connections: list = []
        self.live = 0  # websockets open now (one per connected client)
        self.most_live = 0  # the most ever open at once
        self.lock = threading.Lock()
        self.handshakes = 0
        self.ids = itertools.count(1)
        self.server = serve(self._session, host, 0)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        api.route("POST", ENDPOINT_PATH, self._endpoint)

    @property
    def ws_url(self) -> str:
        host, port = self.server.socket.getsockname()[:2]
        return f"ws://{host}:{port}/ws"

    def start(self) -> FakeLongConnection:
        self.thread.start()
        return self

    def stop(self) -> None:
        for connection in self.connections:
            connection.close()
        self.server.shutdown()

    # --- step 1: the endpoint ---------------------------------------------------------------

    def _endpoint(self, request: Recorded):
        body = request.json()
        if (body.get("AppID"), body.get("AppSecret")) != (self.app_id, self.app_secret):
            return 200, {"code": 403, "msg": "app id or secret invalid"}
        self.handshakes += 1
        return 200, {
            "code": 0,
            "msg": "ok",
            "data": {
                "URL": f"{self.ws_url}?device_id=dev-{self.handshakes}&service_id=7",
                "ClientConfig": {
                    "ReconnectCount": -1,
                    "ReconnectInterval": 1,
                    "ReconnectNonce": 0,
                    "PingInterval": 120,
                },
            },
        }

    # --- step 2: the websocket --------------------------------------------------------------

    def _session(self, connection) -> None:
        self.connections.append(connection)
        with self.lock:
            self.live += 1
            self.most_live = max(self.most_live, self.live)
        self.connected.set()
        try:
            for message in connection:
                frame = self.Frame()
                frame.ParseFromString(message)
                if frame.method != 1:  # CONTROL: a ping
                    continue
                headers = {h.key: h.value for h in frame.headers}
                answer = json.loads(frame.payload)
                self.answers.setdefault(headers["message_id"], queue.Queue()).put(answer)
        finally:
            with self.lock:
                self.live -= 1

    def push(self, event: dict, *, timeout: float = 60.0) -> dict:
        """Deliver one event as Feishu does; returns the client's answer
        ({"code": 200, "data": <decoded answer or None>})."""
        assert self.connected.wait(timeout), "the client never connected"
        message_id = f"msg-{next(self.ids)}"
        frame = self.Frame()
        frame.SeqID, frame.LogID, frame.service, frame.method = 1, 1, 7, 1
        for key, value in {
            "type": "event",
            "message_id": message_id,
            "sum": "1",
            "seq": "0",
            "trace_id": f"trace-{message_id}",
        }.items():
            header = frame.headers.add()
            header.key, header.value = key, value
        frame.payload = json.dumps(event).encode()
        self.connections[-1].send(frame.SerializeToString())
        answer = self.answers.setdefault(message_id, queue.Queue()).get(timeout=timeout)
        data = answer.get("data")
        return {
            "code": answer.get("code"),
            "data": json.loads(base64.b64decode(data)) if data else None,
        }
