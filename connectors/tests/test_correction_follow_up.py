# ruff: noqa: F811 - the fixtures imported from test_end_to_end are parameters here
"""A correction made over IM is acknowledged there, per platform: "No, that's wrong: our
discount limit is 12%, not 10%" supersedes the stored 10% and the conversation gets one line
after the reply saying which memory was updated — once, however often it is handed over."""

from __future__ import annotations

import pytest

from cadre.agents.models import Run
from cadre.agents.runtime.records import delivery
from cadre.memory.models import Memory
from connectors.models import Delivery
from connectors.tests.test_end_to_end import (  # noqa: F401 - fixtures
    bob_agent,
    connector,
    deliver,
    driver,
)

pytestmark = pytest.mark.django_db

TOLD = "Updated memory: “Our discount limit is 10%.” → “our discount limit is 12%, not 10%”"


def test_a_correction_over_im_is_acknowledged_once(
    driver, connector, bob_agent, celery_eager, django_capture_on_commit_callbacks
):
    capture = django_capture_on_commit_callbacks
    deliver(driver, connector, "Our discount limit is 10%.", "evt-fact", capture)
    [stated] = Memory.objects.filter(content="Our discount limit is 10%.", status="active")

    correction = "No, that's wrong: our discount limit is 12%, not 10%"
    event = deliver(driver, connector, correction, "evt-fix", capture)

    run = Run.objects.select_related("session").get(pk=int(event.run_ref))
    stated.refresh_from_db()
    assert stated.status == "superseded"
    replies = driver.replies()
    assert replies.count(TOLD) == 1 and len(replies) == 3  # two answers, one acknowledgement
    with capture(execute=True):  # handed over again: nothing more is sent
        delivery.follow_up_deliver(run, "memory_feedback", TOLD)
    assert driver.replies() == replies
    key = f"run:{run.pk}:follow_up:memory_feedback"
    assert Delivery.objects.filter(idempotency_key=key).count() == 1
