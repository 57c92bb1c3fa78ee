# ruff: noqa: F811 - the fixtures imported from other test modules are parameters here
"""The learning loop walked as one person does it, end to end (issue 13's "Tests").

A single-admin organization (alice, its owner, is its only member) and her agent on the offline
model. A real browser (Playwright on Debian's Chromium) on pages served by uvicorn, a real
Celery worker running the turns and their after-run hooks, PostgreSQL and Redis; the public API
(`/api/v1/…`) for what a client would read. In order:

1. a preference stated in web chat becomes alice's memory (user scope, "You"), listed on the
   Memory page and by `GET /api/v1/memories/`;
2. a new session uses it: its model call's context record lists it as sent;
3. she corrects it in the console; the next session's model call is sent the correction
   (context record at the new version, the model payload with the new text, not the old);
4. she deletes it: gone from the API list, search and the Memory page; the sessions that
   carried it show "[memory N deleted on …]" in place of its text;
5. a correction in chat ("You forgot the risks section; next time also include one") shows a
   proposal card; "Save as skill" sends it to review;
6. alice, the only member who could review, approves as sole reviewer with a justification;
   the Hub version is published and signed (the download verifies against the instance's key,
   as the Hub's own tests check) and its page says how it was reviewed;
7. the skill, added to her agent's template, loads in the next run: SkillUsage, the context
   record's skills and the model call's system prompt name the version.

Screenshots of each console step go to var/screenshots/loop-*.png (git-ignored)."""

from __future__ import annotations

import io
import re
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from django.db import connections
from django.urls import reverse
from rest_framework.test import APIClient

from cadre.agents import services as agent_services
from cadre.agents.models import Run, Step
from cadre.memory.models import Memory
from cadre.tenancy.models import Member
from hub.integrity import verify_files
from tests.agents.test_worker_e2e import wait_for, worker  # noqa: F401 - fixture
from tests.console.agents_setup import TOOLS, owner, published, sales  # noqa: F401 - fixtures
from tests.console.test_browser_chat import (  # noqa: F401 - fixtures and helpers
    agent_bubble,
    browser_page,
    chromium,
    expect,
    live,
    live_server_url,
    sign_in,
    start_conversation,
)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
SHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"
PREFERENCE = "From now on, always write reports in bullet points, and my manager is Li Wei."
QUESTION = "Who is my manager for the reports?"
CORRECTED = "Always write reports in bullet points; my manager is Zhang Min."
REQUEST = "Prepare the project update for the Shanghai launch."
CORRECTION = "You forgot the risks section; next time also include one."
NEXT_REQUEST = "Prepare the project update for the Beijing launch."
REPLY_MS = 120_000
JUSTIFICATION = "I am the only admin of this organization; nobody else can review."


@pytest.fixture
def template(owner):
    """Every built-in hook on (memory retrieval and writing, skills, backflow); offline model."""
    return agent_services.template_create(
        actor=owner,
        name="Project assistant",
        code="project-assistant",
        agent_md="# Persona\nYou help {{member.display_name}} run projects.",
        sop="# SOP\n## Updates\nA project update names the goal, the status and next steps.\n",
        tool_permissions=TOOLS,
        model_settings={"provider": "offline", "model": "offline-1", "budget": {"max_steps": 6}},
        memory_policy={"read_scopes": ["agent", "user"], "write_scopes": ["agent"]},
    )


@pytest.fixture
def deployment(owner, template, published, alice):
    return agent_services.deployment_create(
        actor=owner, name="Project agents", template=template, version=published, members=[alice]
    )


@pytest.fixture
def alice_agent(deployment, alice):
    return deployment.agents.get(member=alice)


def shot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    # From the top: a full-page capture of a scrolled page paints the fixed sidebar mid-page.
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=str(SHOTS / f"loop-{name}.png"), full_page=True)


def say(page, text: str, *, new: bool = False) -> Run:
    """Send `text` (as a new conversation when `new`) and wait for the reply; its run."""
    if new:
        start_conversation(page, text)
        live(page)
    else:
        count = page.locator("#chat-log .bubble.agent").count()
        page.locator("#chat-form textarea[name=text]").fill(text)
        page.get_by_role("button", name="Send").click()
        expect(page.locator("#chat-log .bubble.agent")).to_have_count(count + 1)
    # The first retrieval with something to find loads the local embedding model in the
    # worker (tens of seconds on a busy machine): a bound, not a timing.
    expect(agent_bubble(page).locator(".meta")).to_contain_text("Completed", timeout=REPLY_MS)
    return Run.objects.get(pk=agent_bubble(page).get_attribute("data-run"))


def after_hooks_done(run: Run, seconds: float = 60) -> None:
    """The worker runs memory writing and skill backflow after the reply."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        names = set(
            Step.objects.filter(run=run, status=Step.Status.COMPLETED).values_list(
                "name", flat=True
            )
        )
        if {"process_memory:memory_write", "post_process:skill_backflow"} <= names:
            return
        time.sleep(0.1)
    raise AssertionError(f"the after-run hooks of run {run.pk} did not finish: {names}")


def model_payloads(api, run: Run) -> list[str]:
    """The system context of each model call of `run` (its system messages: the stable ones
    and this request's memories after the turns), read through the runs API."""
    body = api.get(f"/api/v1/runs/{run.pk}/").json()
    return [
        "\n\n".join(m["content"] for m in step["input"]["messages"] if m["role"] == "system")
        for step in body["steps"]
        if step["kind"] == "model_call"
    ]


def records_of(api, memory_id: int) -> list[dict]:
    response = api.get(f"/api/v1/memories/{memory_id}/context-records/")
    assert response.status_code == 200, response.content
    return response.json()["results"]


class ApiFromAThread:
    """The API client, each call made from a thread of its own: Playwright's event loop runs in
    this one, and Django cannot adapt the async static-files middleware (ServeStatic) to a sync
    call in a thread whose loop is running."""

    def __init__(self, client: APIClient):
        self.client = client

    def __getattr__(self, name):
        method = getattr(self.client, name)

        def call(*args, **kwargs):
            def run():
                try:
                    return method(*args, **kwargs)
                finally:
                    connections.close_all()  # the thread's own; the test database is dropped

            with ThreadPoolExecutor(max_workers=1) as pool:
                return pool.submit(run).result()

        return call


def test_the_learning_loop_as_a_person_walks_it(
    chromium, live_server_url, worker, alice, alice_agent, template, deployment
):
    from cadre.skills.models import SkillCandidate, SkillProposal
    from hub.models import SkillUsage, SkillVersion

    # A single-admin organization: alice, its owner, is its only member.
    assert Member.objects.filter(organization=alice.organization).count() == 1
    api = ApiFromAThread(APIClient())
    api.force_login(alice.user)

    with browser_page(chromium, live_server_url) as page:
        # 1. A preference stated in web chat is alice's memory, in the API and the console.
        sign_in(page, alice)
        stated = say(page, PREFERENCE, new=True)
        after_hooks_done(stated)
        memory = Memory.objects.get(
            subject=alice, status=Memory.Status.ACTIVE, content__icontains="bullet points"
        )
        assert memory.scope_key == f"user:{alice.pk}"
        shot(page, "01-preference-in-chat")
        rows = api.get("/api/v1/memories/").json()["results"]
        assert [(r["id"], r["scope_label"]) for r in rows if "Li Wei" in r["content"]] == [
            (memory.pk, "You")
        ]

        page.goto("/memory/")
        row = page.locator("tr", has_text="bullet points")
        expect(row).to_have_count(1)
        expect(row.get_by_test_id("scope")).to_contain_text("You")
        shot(page, "02-memory-list")

        # 2. A new session uses it: the model call's context record lists it as sent.
        page.goto(f"/chat/agents/{alice_agent.pk}/")
        second = say(page, QUESTION, new=True)
        assert second.session_id != stated.session_id
        expect(agent_bubble(page)).to_contain_text("Li Wei")
        shot(page, "03-new-session-uses-it")
        (record,) = [r for r in records_of(api, memory.pk) if r["run_id"] == str(second.pk)]
        (item,) = [i for i in record["items"] if i["memory"] == memory.pk]
        assert (item["status"], item["source"], item["memory_version"]) == (
            "sent",
            "retrieval",
            1,
        )
        assert any(PREFERENCE in system for system in model_payloads(api, second))
        after_hooks_done(second)

        # 3. She corrects it in the console; the next session is sent the correction.
        page.goto(f"/memory/{memory.pk}/")
        expect(page.get_by_test_id("scope")).to_have_text("You")
        expect(page.locator("body")).to_contain_text(f"{second.pk} / ")  # "used in" this run
        shot(page, "04-memory-detail-used-in")
        page.get_by_role("link", name="Correct").click()
        page.get_by_label("Content").fill(CORRECTED)
        page.get_by_label("Reason").fill("My manager changed")
        shot(page, "05-correct-form")
        page.get_by_role("button", name="Save correction").click()
        page.wait_for_url(re.compile(rf"/memory/{memory.pk}/$"))
        expect(page.locator("body")).to_contain_text("Zhang Min")
        shot(page, "06-corrected")
        memory.refresh_from_db()
        assert memory.content == CORRECTED and memory.version == 2

        page.goto(f"/chat/agents/{alice_agent.pk}/")
        third = say(page, QUESTION, new=True)
        expect(agent_bubble(page)).to_contain_text("Zhang Min")
        expect(agent_bubble(page)).not_to_contain_text("Li Wei")
        shot(page, "07-next-session-uses-the-correction")
        (record,) = [r for r in records_of(api, memory.pk) if r["run_id"] == str(third.pk)]
        (item,) = [i for i in record["items"] if i["memory"] == memory.pk]
        assert (item["status"], item["memory_version"]) == ("sent", 2)
        systems = model_payloads(api, third)
        assert any(CORRECTED in system for system in systems)
        assert not any("Li Wei" in system for system in systems)
        after_hooks_done(third)

        # 4. She deletes it: gone from every read path; the sessions that carried it redacted.
        page.goto(f"/memory/{memory.pk}/")
        page.get_by_role("link", name="Delete").click()
        shot(page, "08-delete-confirm")
        page.get_by_role("button", name="Delete memory").click()
        page.wait_for_url(re.compile(r"/memory/$"))
        expect(page.locator("tr", has_text="bullet points")).to_have_count(0)
        shot(page, "09-memory-list-after-delete")
        assert page.goto(f"/memory/{memory.pk}/").status == 404

        assert memory.pk not in [r["id"] for r in api.get("/api/v1/memories/").json()["results"]]
        assert api.get(f"/api/v1/memories/{memory.pk}/").status_code == 404
        hits = api.post(
            "/api/v1/memories/search/",
            {"query": "manager reports bullet points Zhang Min Li Wei"},
            format="json",
        ).json()["hits"]
        assert memory.pk not in [hit["memory"]["id"] for hit in hits]
        report = api.get(f"/api/v1/memories/{memory.pk}/deletion/").json()
        marker = report["marker"]
        assert re.fullmatch(rf"\[memory {memory.pk} deleted on \d{{4}}-\d{{2}}-\d{{2}}\]", marker)
        assert report["redaction"]["status"] == "complete", report
        assert {second.pk, third.pk} <= set(report["redaction"]["runs"])
        for run in (second, third):
            body = str(api.get(f"/api/v1/runs/{run.pk}/").json())
            assert marker in body, run.pk
            for text in ("Zhang Min", "Li Wei", "bullet points"):
                assert text not in body, (run.pk, text)
        page.goto(f"/sessions/{third.session_id}/")
        expect(page.locator("body")).to_contain_text(marker)
        expect(page.locator("body")).not_to_contain_text("Zhang Min")
        # The record's list is a plain list, one line per memory (not a full-page layout)
        # above its score bars ("why retrieved").
        listed = page.locator("ul.bare-list li", has_text=marker).first
        why = listed.locator("[data-why]")
        line = listed.bounding_box()["height"] - why.bounding_box()["height"]
        assert line < 80, (listed.bounding_box(), why.bounding_box())
        shot(page, "10-transcript-redacted")

        # 5. A correction in chat: a proposal card; "Save as skill" sends it to review.
        page.goto(f"/chat/agents/{alice_agent.pk}/")
        say(page, REQUEST, new=True)
        corrected = say(page, CORRECTION)
        card = page.locator("#chat-log .proposal-box")
        expect(card).to_have_count(1)
        expect(card).to_contain_text("Save as a skill?")
        proposal = SkillProposal.objects.get(run=corrected)
        expect(card).to_contain_text(proposal.name)
        shot(page, "11-proposal-card")
        card.get_by_role("button", name="Save as skill").click()
        expect(card).to_contain_text("Saved as a skill")
        shot(page, "12-saved-as-skill")
        proposal.refresh_from_db()
        candidate = SkillCandidate.objects.get(pk=proposal.candidate_id)
        assert candidate.status == SkillCandidate.Status.IN_REVIEW

        # 6. The sole admin reviews it with a justification; a signed Hub version is published.
        card.get_by_role("link", name="Open the review").click()
        page.wait_for_url(re.compile(rf"/skills/reviews/{candidate.pk}/$"))
        expect(page.locator("#sole-reviewer-note")).to_contain_text("sole reviewer")
        page.get_by_label("Approve").check()
        page.get_by_label("Sole reviewer justification").fill(JUSTIFICATION)
        shot(page, "13-sole-reviewer-decision")
        page.get_by_role("button", name="Record decision").click()
        expect(page.locator("h1")).to_contain_text("Published")
        shot(page, "14-published")
        candidate.refresh_from_db()
        assert candidate.status == SkillCandidate.Status.PUBLISHED
        version = SkillVersion.objects.get(pk=candidate.published_version_id)
        package = version.package
        assert version.status == SkillVersion.Status.PUBLISHED and version.signature

        page.goto(
            reverse(
                "console:hub_version",
                args=[package.namespace.handle, package.name, version.version],
            )
        )
        review = page.locator("#version-review")
        expect(review).to_contain_text("decided by the requester, Alice, as sole reviewer")
        expect(review).to_contain_text(JUSTIFICATION)
        expect(page.locator("body")).to_contain_text("Verified")
        shot(page, "15-hub-version")
        _verify_download(api, package.full_name, version.version)

        # 7. Added to her agent's template, the skill loads in the next run.
        draft = api.post(f"/api/v1/templates/{template.pk}/draft/").json()
        changed = api.patch(
            f"/api/v1/template-versions/{draft['id']}/",
            {"skills": [{"package": package.full_name, "range": "^1"}]},
            format="json",
        )
        assert changed.status_code == 200, changed.content
        assert api.post(f"/api/v1/template-versions/{draft['id']}/submit/").status_code == 200
        published_draft = api.post(
            f"/api/v1/template-versions/{draft['id']}/publish/",
            {"reason": "use the risks skill"},
            format="json",
        )
        assert published_draft.status_code == 200, published_draft.content
        rollout = api.post(
            f"/api/v1/deployments/{deployment.pk}/rollout/",
            {"version": draft["id"]},
            format="json",
        )
        assert rollout.status_code == 201, rollout.content
        alice_agent.refresh_from_db()
        assert alice_agent.version_id == draft["id"]

        page.goto(f"/chat/agents/{alice_agent.pk}/")
        next_run = say(page, NEXT_REQUEST, new=True)
        shot(page, "16-next-run")
        usage = SkillUsage.objects.get(run=next_run)
        assert (usage.version_id, usage.loaded, usage.body_loaded) == (version.pk, True, True)
        loaded = api.get(f"/api/v1/hub/runs/{next_run.pk}/skills/")
        assert loaded.status_code == 200, loaded.content
        assert version.version in str(loaded.json()) and package.full_name in str(loaded.json())
        records = api.get("/api/v1/memory-context-records/", {"run_id": str(next_run.pk)}).json()[
            "results"
        ]
        skills = [skill for record in records for skill in record["skills"]]
        assert {
            "name": package.full_name,
            "version": version.version,
            "part": "body",
            "status": "sent",
        } in [{k: s.get(k) for k in ("name", "version", "part", "status")} for s in skills]
        assert any(
            f"# Skill: {package.full_name}@{version.version}" in system
            for system in model_payloads(api, next_run)
        )
        page.goto(f"/sessions/{next_run.session_id}/")
        expect(page.locator("body")).to_contain_text(f"{package.full_name}@{version.version}")
        shot(page, "17-transcript-skill-version")


def _verify_download(api, full_name: str, number: str) -> None:
    """As hub/tests/test_api.py: the bundle's files, fingerprint and signature hold under the
    instance's published signing key."""
    namespace, name = full_name.lstrip("@").split("/")
    response = api.get(f"/api/v1/hub/skills/{namespace}/{name}/download/?version={number}")
    assert response.status_code == 200, response.content
    with zipfile.ZipFile(io.BytesIO(response.content)) as archive:
        files = {entry: archive.read(entry) for entry in archive.namelist()}
    assert "SKILL.md" in files and b"risks" in files["SKILL.md"].lower()
    key = api.get("/api/v1/hub/signing-key/").json()
    assert key["key_id"] == response["X-Cadre-Key-Id"]
    verify_files(
        package=full_name,
        version=response["X-Cadre-Version"],
        files=files,
        fingerprint=response["X-Cadre-Fingerprint"],
        signature=response["X-Cadre-Signature"],
        public_key_pem=key["public_key_pem"],
    )
