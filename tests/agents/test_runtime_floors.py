# ruff: noqa: F811 - the fixtures imported from tests.console.agents_setup are parameters here
"""The runtime's floors, walked: an IM message from the webhook to the reply, and a web-chat
turn, each visit the runtime's floors in order, once — lifecycle, then the engine, then steps,
then records — and never climb back up.

A profiler (sys.setprofile, and threading.setprofile for the websocket's event loop) notes, for
every Python call whose code lives in a floor module, the floors of the floor frames already on
that thread's stack. `cadre.agents.tasks` is the lifecycle's (Celery's adapters). Hooks and tools
are no floor: they run inside steps and may call records (or steps' own context) below them.
The import contract ("runtime-floors") keeps imports one-directional; this keeps calls so,
callbacks and ports included.
"""

from __future__ import annotations

import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync
from django.test import Client
from django.urls import reverse

import cadre.agents.runtime
import cadre.agents.tasks
from cadre.agents import services as agent_services
from cadre.agents.models import Run, Session
from cadre.agents.runtime.lifecycle import execution
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.agents.runtime.steps import assembly
from cadre.tenancy.actors import member_actor
from connectors.models import InboundEvent
from connectors.tests.fakes import FakePlatformServer
from connectors.tests.helpers import make_connector, webhook_post
from tests.console.agents_setup import (  # noqa: F401 - fixtures (offline, no embedding hooks)
    alice_agent,
    bob_agent,
    deployment,
    owner,
    published,
    sales,
    template,
)
from tests.factories import IMIdentityFactory

FLOORS = ("records", "steps", "engine", "lifecycle")  # bottom to top
ORDER = ("lifecycle", "engine", "steps", "records")  # a walk from outside, top to bottom


def floor_files() -> dict[str, str]:
    """{real path of a module file: its floor}."""
    root = Path(cadre.agents.runtime.__file__).resolve().parent
    files = {str(root / "engine.py"): "engine"}
    for floor in ("lifecycle", "steps", "records"):
        for path in (root / floor).glob("*.py"):
            files[str(path)] = floor
    files[str(Path(cadre.agents.tasks.__file__).resolve())] = "lifecycle"
    return files


@dataclass
class Walk:
    """What the profiler saw: per call into a floor, the floors on the stack (outermost
    first, one entry per block of consecutive frames of a floor, this call's last)."""

    chains: list[tuple[str, ...]] = field(default_factory=list)
    climbs: list[str] = field(default_factory=list)  # calls into a floor above one on the stack
    entries: list[str] = field(default_factory=list)  # floors entered from outside the runtime
    engine_entries: int = 0  # calls into the engine from outside the engine

    def assert_in_order(self) -> None:
        assert self.climbs == [], "a floor was entered above a lower one:\n" + "\n".join(
            self.climbs[:10]
        )
        for chain in set(self.chains):
            # Each floor once per stack, as one block, in order (a floor may be skipped).
            assert list(chain) == [floor for floor in ORDER if floor in chain], chain
        assert ORDER in set(self.chains), sorted(set(self.chains))
        assert self.entries[0] == "lifecycle", self.entries[:5]
        assert self.engine_entries == 1  # one execution of the turn


@contextmanager
def walked():
    """Record the floors of every call made inside the block (this thread and new ones)."""
    files = floor_files()
    rank = {floor: FLOORS.index(floor) for floor in FLOORS}
    code_floor: dict[object, str | None] = {}
    walk = Walk()
    lock = threading.Lock()

    def floor_of(code) -> str | None:
        found = code_floor.get(code, ...)
        if found is ...:
            found = files.get(str(Path(code.co_filename).resolve()))
            code_floor[code] = found
        return found

    def profile(frame, event, arg):
        if event != "call":
            return
        floor = floor_of(frame.f_code)
        if floor is None:
            return
        outer = []  # floors of the floor frames on the stack, innermost first
        caller = frame.f_back
        while caller is not None:
            above = floor_of(caller.f_code)
            if above is not None:
                outer.append(above)
            caller = caller.f_back
        chain: list[str] = []
        for name in [*reversed(outer), floor]:
            if not chain or chain[-1] != name:
                chain.append(name)
        with lock:
            walk.chains.append(tuple(chain))
            if not outer:
                walk.entries.append(floor)
            if floor == "engine" and (not outer or outer[0] != "engine"):
                walk.engine_entries += 1
            lower = [name for name in outer if rank[name] < rank[floor]]
            if lower:
                where = f"{frame.f_code.co_filename}:{frame.f_code.co_name}"
                walk.climbs.append(f"{floor} ({where}) under {' < '.join(outer)}")

    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        yield walk
    finally:
        sys.setprofile(None)
        threading.setprofile(None)


# --- an IM message: webhook → inbound → run → reply at the platform -------------------------


@pytest.fixture
def fake_api():
    server = FakePlatformServer().start()
    yield server
    server.stop()


@pytest.fixture
def eager():
    """Runs execute in the process that queues them (as a worker would, minus the broker)."""
    from cadre.celery import app

    saved = (app.conf.task_always_eager, app.conf.task_eager_propagates)
    app.conf.task_always_eager = True
    app.conf.task_eager_propagates = True
    yield
    app.conf.task_always_eager, app.conf.task_eager_propagates = saved


@pytest.fixture
def im_agent(owner, template, published, sales, bob):
    bob.positions.add(sales)
    deployment = agent_services.deployment_create(
        actor=owner,
        name="Sales agents on IM",
        template=template,
        version=published,
        positions=[sales],
        channels=["console", "webhook"],
    )
    return deployment.agents.get(member=bob)


@pytest.mark.django_db
def test_an_im_message_walks_the_floors_in_order_once(
    alice, bob, im_agent, fake_api, eager, django_capture_on_commit_callbacks
):
    fake_api.route("POST", "/callback", lambda request: (200, {"ok": True}))
    connector = make_connector(
        alice,
        "webhook",
        {"signing_secret": "whsec-test"},
        {"callback_url": f"{fake_api.url}/callback"},
    )
    IMIdentityFactory(member=bob, platform="webhook", platform_user_id="u-bob")
    message = {
        "event_id": "evt-floors",
        "type": "message",
        "text": "What is the standard discount?",
        "user": {"id": "u-bob"},
        "chat": {"id": "chat-1", "type": "p2p"},
    }
    with walked() as walk, django_capture_on_commit_callbacks(execute=True):
        response = webhook_post(Client(), connector, message)
    assert response.status_code == 200, response.content
    event = InboundEvent.objects.get(connector=connector, kind="message")
    run = Run.objects.get(pk=int(event.run_ref))
    assert run.status == Run.Status.COMPLETED
    replies = [r.json() for r in fake_api.calls("/callback") if r.json()["type"] == "text"]
    assert [reply["text"] for reply in replies] == [run.output["text"]]
    walk.assert_in_order()


# --- a web-chat turn: the console's websocket → run → events streamed back ----------------


@pytest.mark.django_db(transaction=True)
def test_a_web_chat_turn_walks_the_floors_in_order_once(eager, bob, bob_agent):
    from tests.agents.test_web_chat import browser, finished, frames_until, socket

    client = browser(bob)
    client.post(reverse("console:chat_agent", args=[bob_agent.pk]), {"text": "hello there"})
    session = Session.objects.get(agent=bob_agent)

    async def scenario():
        communicator = socket(client, session.pk)
        connected, _ = await communicator.connect(timeout=30)
        assert connected
        await communicator.receive_json_from(timeout=30)  # ready
        await communicator.send_json_to(
            {"type": "message", "text": "What is the standard discount?"}
        )
        frames = await frames_until(
            communicator, lambda f: f.get("type") == "accepted" or f.get("type") == "error"
        )
        accepted = frames[-1]
        assert accepted["type"] == "accepted", frames
        await frames_until(communicator, finished(accepted["run"]))
        await communicator.disconnect()
        return accepted["run"]

    with walked() as walk:
        run_id = async_to_sync(scenario)()
    assert Run.objects.get(pk=run_id).status == Run.Status.COMPLETED
    walk.assert_in_order()


# --- the check can fail ----------------------------------------------------------------------


@pytest.mark.django_db
def test_a_step_calling_up_into_the_lifecycle_is_caught(bob, bob_agent, monkeypatch):
    recent_turns = assembly.recent_turns

    def climbing(run):  # a step that asks the lifecycle something: a floor walked back up
        runtime.check_runnable(run.agent)
        return recent_turns(run)

    monkeypatch.setattr(assembly, "recent_turns", climbing)
    run = runtime.run_start(actor=member_actor(bob), agent=bob_agent, text="hello")
    with walked() as walk:
        assert execution.run_execute(run.pk) == Run.Status.COMPLETED
    assert any(climb.startswith("lifecycle") for climb in walk.climbs)
    with pytest.raises(AssertionError, match="a floor was entered above a lower one"):
        walk.assert_in_order()
