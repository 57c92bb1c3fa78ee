# ruff: noqa: F811 - the fixtures imported from other test modules are parameters here
"""The learning loop walked with a model as memory's judge (issue 31's "Done when": "with the
rules judge and with a model"; the rules walk, in a browser, is
tests/console/test_learning_loop.py).

The same walk through the public REST API (`/api/v1/…`), each turn run by a real Celery worker:
memory's provider (`CADRE_MEMORY_PROVIDER_*`) is a loopback OpenAI-compatible server answering
in the chat-completions format with what a model would: the extraction's memories, the dedup
judge's decision and the feedback judge's `{"affected", "content"}`. The agent itself runs the
offline model. In order:

1. a preference stated in a message is extracted by the model and kept as alice's memory;
2. a new session recalls it (the `memory_search` tool and retrieval), which records the tool
   call and the run as memories quoting it;
3. a correction in the same session is judged by the model: the preference is superseded by the
   model's corrected sentence (which keeps what the correction did not touch), the run's derived
   records are not — not even when the judge names one —, the person is told, and the next
   session recalls the correction;
4. deleting the corrected memory leaves its text in no memory;
5. a lesson in chat becomes a proposal drafted as an instruction; alice confirms it, edits it
   as the (sole) reviewer and approves it; one install puts it in her template, the next run
   loads her edit, and she is told it is live.
"""

from __future__ import annotations

import re
import time

import pytest

from cadre.agents import services as agent_services
from cadre.agents.models import Run, RunEvent, Step
from cadre.governance.models import UsageRecord
from cadre.memory.dedup import JUDGE_PROMPT
from cadre.memory.extraction import EXTRACTION_PROMPT
from cadre.memory.models import DERIVED_KINDS, Memory, MemoryVersion
from cadre.memory.services.feedback import FEEDBACK_PROMPT
from cadre.skills.models import SkillCandidate, SkillProposal
from cadre.tenancy.models import Notice
from hub.models import SkillUsage, SkillVersion
from tests.agents.conftest import publish
from tests.agents.test_worker_e2e import wait_for, worker  # noqa: F401 - fixture
from tests.console.agents_setup import TOOLS
from tests.memory.conftest import FakeModelServer

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PREFERENCE = "From now on, always write reports in bullet points, and my manager is Li Wei."
# What the model extracts from it, and what it makes of the correction: the part the
# correction does not touch (the manager) is kept.
EXTRACTED = "Always write reports in bullet points; my manager is Li Wei."
JUDGED = "Always write reports in numbered lists; my manager is Li Wei."
RECALL = "What do you remember about my reports?"
FEEDBACK = "Actually, use numbered lists instead of bullet points."
REQUEST = "Prepare the project update for the Shanghai launch."
LESSON = "You forgot the risks section; next time also include one."
NEXT_REQUEST = "Prepare the project update for the Beijing launch."
EDITED_STEP = "Give each risk an owner and a mitigation."
JUSTIFICATION = "I am the only admin of this organization; nobody else can review."


class Judge:
    """What memory's model answers, by the prompt it is given (as a model would read it);
    `also` are ids the feedback judge names besides the memories that say "bullet points"."""

    def __init__(self):
        self.also: list[int] = []
        self.feedback_listings: list[str] = []

    def __call__(self, body: dict) -> dict:
        system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
        if system == EXTRACTION_PROMPT:
            said = [line for line in user.splitlines() if line.startswith("[0] user:")]
            if said and "from now on" in said[0].lower():
                return {"memories": [{"kind": "requirement", "content": EXTRACTED}]}
            return {"memories": []}
        if system == JUDGE_PROMPT:
            return {"decision": "new", "target_id": None, "reason": "nothing like it"}
        if system == FEEDBACK_PROMPT:
            self.feedback_listings.append(user)
            named = [int(i) for i in re.findall(r"^- id (\d+): .*bullet points", user, re.M)]
            return {"affected": named + self.also, "content": JUDGED}
        return {}


@pytest.fixture
def judge(monkeypatch):
    """Memory's provider is the loopback judge for the test (the worker runs in this process
    and reads the configuration at call time)."""
    answers = Judge()
    server = FakeModelServer(answers)
    monkeypatch.setenv("CADRE_MEMORY_PROVIDER_KIND", "openai_compatible")
    monkeypatch.setenv("CADRE_MEMORY_PROVIDER_BASE_URL", server.base_url)
    monkeypatch.setenv("CADRE_MEMORY_PROVIDER_MODEL", "fake-judge")
    monkeypatch.setenv("CADRE_MEMORY_PROVIDER_API_KEY", "sk-test-key")
    yield answers
    server.close()


@pytest.fixture
def alice_agent(owner, alice):
    template = agent_services.template_create(
        actor=owner,
        name="Project assistant",
        code="project-assistant",
        sop="# SOP\n## Updates\nA project update names the goal, the status and next steps.\n",
        tool_permissions=TOOLS,
        model_settings={"provider": "offline", "model": "offline-1", "budget": {"max_steps": 6}},
        memory_policy={"read_scopes": ["agent", "user"], "write_scopes": ["agent"]},
    )
    version = publish(owner, template.versions.get())
    deployment = agent_services.deployment_create(
        actor=owner, name="Project agents", template=template, version=version, members=[alice]
    )
    return deployment.agents.get(member=alice)


def turn(api, agent, text: str, session: int | None = None) -> Run:
    """A message through the runs API, answered by the worker; its run once the after-run
    hooks (memory writing, experience, skill backflow) are done."""
    body = {"agent": agent.pk, "text": text, **({"session": session} if session else {})}
    accepted = api.post("/api/v1/runs/", body, format="json")
    assert accepted.status_code == 202, accepted.content
    run = wait_for(accepted.json()["id"], seconds=120)
    assert run.status == Run.Status.COMPLETED, run.error
    deadline = time.monotonic() + 60
    wanted = {"process_memory:memory_write", "post_process:skill_backflow"}
    while not wanted <= set(
        Step.objects.filter(run=run, status=Step.Status.COMPLETED).values_list("name", flat=True)
    ):
        assert time.monotonic() < deadline, f"the after-run hooks of run {run.pk} did not finish"
        time.sleep(0.1)
    return run


def sent_to_the_model(api, run: Run) -> str:
    body = api.get(f"/api/v1/runs/{run.pk}/").json()
    return "\n".join(
        message["content"] or ""
        for step in body["steps"]
        if step["kind"] == "model_call"
        for message in step["input"]["messages"]
        if message["role"] == "system"
    )


def test_the_learning_loop_with_a_model_as_the_judge(worker, judge, alice, alice_agent, client_for):
    api = client_for(alice)

    # 1. The model extracts the preference: alice's memory.
    stated = turn(api, alice_agent, PREFERENCE)
    [memory] = [
        m for m in api.get("/api/v1/memories/").json()["results"] if "Li Wei" in m["content"]
    ]
    assert (memory["content"], memory["scope_label"]) == (EXTRACTED, "You")
    memory = Memory.objects.get(pk=memory["id"])
    assert memory.attributes.get("model") == "fake-judge"

    # 2. A new session recalls it; the tool call and the run are recorded quoting it.
    recalled = turn(api, alice_agent, RECALL)
    assert recalled.session_id != stated.session_id
    assert "bullet points" in recalled.output["text"]
    assert EXTRACTED in sent_to_the_model(api, recalled)
    derived = list(
        Memory.objects.filter(
            kind__in=DERIVED_KINDS, status=Memory.Status.ACTIVE, content__contains=EXTRACTED
        ).values_list("pk", flat=True)
    )
    assert derived, "the recall left no derived record"

    # 3. The correction, judged by the model — which also names a derived record: only the
    # statement is superseded, by the model's sentence; the person is told.
    judge.also = derived
    corrected_run = turn(api, alice_agent, FEEDBACK, session=recalled.session_id)
    [listing] = judge.feedback_listings
    assert f"id {memory.pk}: {EXTRACTED}" in listing
    assert not any(f"id {pk}:" in listing for pk in derived)  # never a candidate
    memory.refresh_from_db()
    assert memory.status == Memory.Status.SUPERSEDED
    corrected = Memory.objects.get(pk=memory.superseded_by_id)
    assert (corrected.content, corrected.kind, corrected.scope_key) == (
        JUDGED,
        memory.kind,
        memory.scope_key,
    )
    assert Memory.objects.filter(pk__in=derived, status=Memory.Status.ACTIVE).count() == len(
        derived
    )
    assert not MemoryVersion.objects.filter(
        memory_id__in=derived, change=MemoryVersion.Change.CORRECTION
    ).exists()
    # The judge's call is metered, charged to the run that caused it.
    charged = UsageRecord.objects.filter(purpose="memory.feedback", model="fake-judge")
    assert list(charged.values_list("run_id", "member_id")) == [(corrected_run.pk, alice.pk)]
    told = RunEvent.objects.get(run=corrected_run, kind="memory_feedback").data
    assert told["message"] == f"Updated memory: “{EXTRACTED}” → “{JUDGED}”"
    assert told["superseded"] == [memory.pk] and told["created"] == [corrected.pk]
    page = api.get(f"/chat/sessions/{recalled.session_id}/")
    assert told["message"] in page.content.decode()

    after = turn(api, alice_agent, RECALL)
    assert "numbered lists" in after.output["text"] and "Li Wei" in after.output["text"]
    context = sent_to_the_model(api, after)
    assert JUDGED in context and EXTRACTED not in context

    # 4. Deleted: its text is in no memory (the recall's trajectory and experience redacted).
    assert Memory.objects.filter(kind__in=DERIVED_KINDS, content__contains=JUDGED).exists()
    deleted = api.delete(f"/api/v1/memories/{corrected.pk}/")
    assert deleted.status_code in (200, 204), deleted.content
    report = api.get(f"/api/v1/memories/{corrected.pk}/deletion/").json()
    assert report["redaction"]["status"] == "complete", report
    copies = report["redaction"]["derived"]["copies"]
    assert copies["experiences"] and copies["tool_trajectories"], copies
    assert not Memory.objects.filter(content__contains=JUDGED).exclude(pk=corrected.pk).exists()
    assert corrected.pk not in [
        hit["memory"]["id"]
        for hit in api.post(
            "/api/v1/memories/search/", {"query": "reports numbered lists"}, format="json"
        ).json()["hits"]
    ]

    # 5. A lesson becomes a proposal drafted as an instruction; confirmed, edited, approved,
    # installed in one call; the next run loads the edit and alice is told it is live.
    first = turn(api, alice_agent, REQUEST)
    lesson = turn(api, alice_agent, LESSON, session=first.session_id)
    proposal = SkillProposal.objects.get(run=lesson)
    assert "1. Include the risks section." in proposal.files["SKILL.md"]
    assert "forgot" not in proposal.files["SKILL.md"].lower()
    confirmed = api.post(f"/api/v1/skills/proposals/{proposal.pk}/confirm/")
    assert confirmed.status_code == 201, confirmed.content
    candidate = confirmed.json()["id"]
    skill = api.get(f"/api/v1/skills/candidates/{candidate}/").json()["skill"]
    edited = api.post(
        f"/api/v1/skills/candidates/{candidate}/edit/",
        {"body": skill["body"].rstrip() + f"\n2. {EDITED_STEP}\n", "revision": 1},
        format="json",
    )
    assert edited.status_code == 200 and edited.json()["revision"] == 2, edited.content
    decided = api.post(
        f"/api/v1/skills/candidates/{candidate}/decisions/",
        {"decision": "approve", "sole_reviewer_justification": JUSTIFICATION, "revision": 2},
        format="json",
    )
    assert decided.status_code == 200 and decided.json()["status"] == "published", decided.content
    version = SkillVersion.objects.get(
        pk=SkillCandidate.objects.get(pk=candidate).published_version_id
    )
    assert f"2. {EDITED_STEP}" in version.body
    package = version.package
    installed = api.post(
        f"/api/v1/hub/skills/{package.namespace.handle}/{package.name}/templates/",
        {"template": alice_agent.deployment.template_id},
        format="json",
    )
    assert installed.status_code == 201, installed.content
    assert installed.json()["template_version"] == 2 and installed.json()["agents"] == 1

    loaded = turn(api, alice_agent, NEXT_REQUEST)
    usage = SkillUsage.objects.get(run=loaded)
    assert (usage.version_id, usage.body_loaded) == (version.pk, True)
    assert EDITED_STEP in sent_to_the_model(api, loaded)
    notice = Notice.objects.get(member=alice, kind="hub.skill_live")
    assert notice.title == f"Your skill {package.name} is live"
