# ruff: noqa: F811 - the fixtures imported from other test modules are parameters here
"""The learning loop walked as one person does it, end to end (issue 13's "Tests", issue 31's
"Done when"; the same walk with a model as the judge is tests/memory/test_learning_loop_model.py).

A single-admin organization (alice, its owner, is its only member) and her agent on the offline
model. A real browser (Playwright on Debian's Chromium) on pages served by uvicorn, a real
Celery worker running the turns and their after-run hooks, PostgreSQL and Redis; the public API
(`/api/v1/…`) for what a client would read. In order:

1. a preference stated in web chat becomes alice's memory (user scope, "You"), listed on the
   Memory page and by `GET /api/v1/memories/`;
2. a new session uses it: its model call's context record lists it as sent;
3. she corrects it in the chat ("Actually, use numbered lists instead of bullet points."): the
   rules judge supersedes the preference (never the run's experience record), the chat says
   "Updated memory: …" under the answer, and the next session's model call is sent the
   correction, not the preference;
4. she deletes the corrected memory: gone from the API list, search and the Memory page; the
   sessions that carried it show "[memory N deleted on …]" in place of its text, and no
   memory (experience, trajectory) holds its text any more;
5. a correction in chat ("You forgot the risks section; next time also include one") shows a
   proposal card whose draft reads as an instruction; "Save as skill" sends it to review;
6. alice, the only member who could review, edits the draft in the console, then approves as
   sole reviewer with a justification; the Hub version is published with her edit and signed
   (the download verifies against the instance's key, as the Hub's own tests check) and its
   page says how it was reviewed;
7. one click on the review page ("Install into <template> and roll out") puts the skill in her
   agent's template and rolls it out; the next run loads it (SkillUsage, the context record's
   skills and the model call's system prompt name the version), and her home page says it is
   live.

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
from cadre.memory.models import DERIVED_KINDS, STATEMENT_KINDS, Memory, MemoryVersion
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
PREFERENCE = "From now on, always write reports in bullet points."
QUESTION = "What do you remember about my reports?"  # the memory_search tool, too
FEEDBACK = "Actually, use numbered lists instead of bullet points."
CORRECTED = "use numbered lists instead of bullet points."
REQUEST = "Prepare the project update for the Shanghai launch."
CORRECTION = "You forgot the risks section; next time also include one."
NEXT_REQUEST = "Prepare the project update for the Beijing launch."
REPLY_MS = 120_000
JUSTIFICATION = "I am the only admin of this organization; nobody else can review."
EDITED_STEP = "Give each risk an owner and a mitigation."
CHANGELOG = "Project updates include a risks section, each risk with an owner."


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
            subject=alice,
            status=Memory.Status.ACTIVE,
            kind__in=STATEMENT_KINDS,
            content__icontains="bullet points",
        )
        assert memory.scope_key == f"user:{alice.pk}"
        shot(page, "01-preference-in-chat")
        rows = api.get("/api/v1/memories/").json()["results"]
        assert [(r["id"], r["scope_label"]) for r in rows if "bullet points" in r["content"]] == [
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
        expect(agent_bubble(page)).to_contain_text("bullet points")
        shot(page, "03-new-session-uses-it")
        items = [
            (item["status"], item["source"], item["memory_version"])
            for record in records_of(api, memory.pk)
            if record["run_id"] == str(second.pk)
            for item in record["items"]
            if item["memory"] == memory.pk
        ]
        assert ("sent", "retrieval", 1) in items, items
        assert any(PREFERENCE in system for system in model_payloads(api, second))
        after_hooks_done(second)
        # The tool call and the run are recorded as memories that quote the preference.
        experiences = set(
            Memory.objects.filter(
                kind__in=DERIVED_KINDS,
                status=Memory.Status.ACTIVE,
                content__icontains="bullet points",
            ).values_list("pk", flat=True)
        )

        # 3. She corrects it in the chat: the preference is superseded (the runs' experience
        # records are not), the chat says which memory changed, the next session uses it.
        feedback = say(page, FEEDBACK)
        assert feedback.session_id == second.session_id
        told = page.locator(f'#chat-log [data-memory-feedback="{feedback.pk}"]')
        expect(told).to_have_text(f"Updated memory: “{PREFERENCE}” → “{CORRECTED}”")
        after_hooks_done(feedback)
        memory.refresh_from_db()
        assert memory.status == Memory.Status.SUPERSEDED
        corrected = Memory.objects.get(pk=memory.superseded_by_id)
        assert (corrected.content, corrected.kind, corrected.scope_key, corrected.status) == (
            CORRECTED,
            memory.kind,
            memory.scope_key,
            Memory.Status.ACTIVE,
        )
        assert experiences, "the runs so far left no derived record to leave alone"
        assert (
            set(
                Memory.objects.filter(pk__in=experiences, status=Memory.Status.ACTIVE).values_list(
                    "pk", flat=True
                )
            )
            == experiences
        )
        assert not MemoryVersion.objects.filter(
            memory_id__in=experiences, change=MemoryVersion.Change.CORRECTION
        ).exists()
        shot(page, "04-corrected-in-chat")
        page.reload()  # the server-rendered transcript says it too
        expect(told).to_contain_text("Updated memory:")

        page.goto("/memory/")
        expect(page.locator("tr", has_text="numbered lists")).to_have_count(1)
        expect(page.locator("tr", has_text="From now on")).to_have_count(0)
        shot(page, "05-memory-list-corrected")

        page.goto(f"/chat/agents/{alice_agent.pk}/")
        third = say(page, QUESTION, new=True)
        expect(agent_bubble(page)).to_contain_text("numbered lists")
        expect(agent_bubble(page)).not_to_contain_text(PREFERENCE)
        shot(page, "06-next-session-uses-the-correction")
        items = {
            item["memory"]: item["status"]
            for record in records_of(api, corrected.pk)
            if record["run_id"] == str(third.pk)
            for item in record["items"]
        }
        assert items[corrected.pk] == "sent" and memory.pk not in items, items
        systems = model_payloads(api, third)
        assert any(CORRECTED in system for system in systems)
        assert not any(PREFERENCE in system for system in systems)
        after_hooks_done(third)

        # 4. She deletes it: gone from every read path; the sessions that carried it and the
        # memories derived from them redacted.
        page.goto(f"/memory/{corrected.pk}/")
        expect(page.get_by_test_id("scope")).to_have_text("You")
        expect(page.locator("body")).to_contain_text(f"{third.pk} / ")  # "used in" this run
        page.get_by_role("link", name="Delete").click()
        shot(page, "07-delete-confirm")
        page.get_by_role("button", name="Delete memory").click()
        page.wait_for_url(re.compile(r"/memory/$"))
        expect(page.locator("tr", has_text="numbered lists")).to_have_count(0)
        shot(page, "08-memory-list-after-delete")
        assert page.goto(f"/memory/{corrected.pk}/").status == 404

        assert corrected.pk not in [r["id"] for r in api.get("/api/v1/memories/").json()["results"]]
        assert api.get(f"/api/v1/memories/{corrected.pk}/").status_code == 404
        hits = api.post(
            "/api/v1/memories/search/",
            {"query": "reports numbered lists instead of bullet points"},
            format="json",
        ).json()["hits"]
        assert corrected.pk not in [hit["memory"]["id"] for hit in hits]
        report = api.get(f"/api/v1/memories/{corrected.pk}/deletion/").json()
        marker = report["marker"]
        assert re.fullmatch(
            rf"\[memory {corrected.pk} deleted on \d{{4}}-\d{{2}}-\d{{2}}\]", marker
        )
        assert report["redaction"]["status"] == "complete", report
        assert third.pk in report["redaction"]["runs"]
        body = str(api.get(f"/api/v1/runs/{third.pk}/").json())
        assert marker in body and CORRECTED not in body
        # The derived memories that quoted it (the correction's and the next run's experience)
        # are redacted and listed in the report; no memory's content holds the text.
        derived = report["redaction"]["derived"]
        assert derived["status"] == "complete" and derived["counts"]["experiences"] >= 1, derived
        assert not Memory.objects.filter(
            organization=alice.organization, content__icontains=CORRECTED.rstrip(".")
        ).exclude(pk=corrected.pk)
        assert Memory.objects.filter(pk__in=derived["copies"]["experiences"]).count() == len(
            derived["copies"]["experiences"]
        )
        page.goto(f"/sessions/{third.session_id}/")
        expect(page.locator("body")).to_contain_text(marker)
        expect(page.locator("body")).not_to_contain_text(CORRECTED)
        # The record's list is a plain list, one line per memory (not a full-page layout)
        # above its score bars ("why retrieved").
        listed = page.locator("ul.bare-list li", has_text=marker).first
        why = listed.locator("[data-why]")
        line = listed.bounding_box()["height"] - why.bounding_box()["height"]
        assert line < 80, (listed.bounding_box(), why.bounding_box())
        shot(page, "09-transcript-redacted")

        # 5. A correction in chat: a proposal card, its draft an instruction; "Save as skill"
        # sends it to review.
        page.goto(f"/chat/agents/{alice_agent.pk}/")
        say(page, REQUEST, new=True)
        lesson = say(page, CORRECTION)
        card = page.locator("#chat-log .proposal-box")
        expect(card).to_have_count(1)
        expect(card).to_contain_text("Save as a skill?")
        proposal = SkillProposal.objects.get(run=lesson)
        expect(card).to_contain_text(proposal.name)
        expect(card).to_contain_text("Include the risks section")
        drafted = proposal.files["SKILL.md"]
        assert "1. Include the risks section." in drafted, drafted
        assert "forgot" not in drafted.lower() and "next time" not in drafted.lower(), drafted
        shot(page, "10-proposal-card")
        card.get_by_role("button", name="Save as skill").click()
        expect(card).to_contain_text("Saved as a skill")
        shot(page, "11-saved-as-skill")
        proposal.refresh_from_db()
        candidate = SkillCandidate.objects.get(pk=proposal.candidate_id)
        assert candidate.status == SkillCandidate.Status.IN_REVIEW

        # 6. The sole admin edits the draft, then approves it with a justification; a signed
        # Hub version is published with her edit.
        card.get_by_role("link", name="Open the review").click()
        page.wait_for_url(re.compile(rf"/skills/reviews/{candidate.pk}/$"))
        page.locator("#edit-candidate summary").click()
        edit = page.locator("textarea[name=edit-body]")
        expect(edit).to_contain_text("1. Include the risks section.")
        edit.fill(edit.input_value().rstrip() + f"\n2. {EDITED_STEP}\n")
        page.locator("textarea[name=edit-changelog]").fill(CHANGELOG)
        page.locator("textarea[name=edit-note]").fill("owners make risks actionable")
        shot(page, "12-reviewer-edit")
        page.get_by_role("button", name="Save edit").click()
        expect(page.locator("#candidate-changelog")).to_contain_text(CHANGELOG)
        candidate.refresh_from_db()
        assert candidate.revision == 2
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
        assert f"2. {EDITED_STEP}" in version.body and version.changelog == CHANGELOG

        # 7. One click installs it into her agent's template and rolls it out.
        install = page.get_by_role("button", name=f"Install into {template.name} and roll out")
        expect(install).to_have_count(1)
        install.click()
        package_url = reverse("console:hub_package", args=[package.namespace.handle, package.name])
        page.wait_for_url(re.compile(rf"{re.escape(package_url)}$"))
        expect(page.locator("body")).to_contain_text(alice_agent.name)
        expect(install).to_have_count(0)
        shot(page, "15-installed-into-the-template")
        template.refresh_from_db()
        current = template.published_version
        assert (
            current.number == 2
            and {
                "package": package.full_name,
                "range": f"^{version.version}",
                "policy": "auto",
            }
            in current.skills
        )
        alice_agent.refresh_from_db()
        assert alice_agent.version_id == current.pk

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
        shot(page, "16-hub-version")
        _verify_download(api, package.full_name, version.version)

        page.goto(f"/chat/agents/{alice_agent.pk}/")
        next_run = say(page, NEXT_REQUEST, new=True)
        shot(page, "17-next-run")
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
        systems = model_payloads(api, next_run)
        assert any(f"# Skill: {package.full_name}@{version.version}" in s for s in systems)
        assert any(EDITED_STEP in system for system in systems)
        page.goto(f"/sessions/{next_run.session_id}/")
        expect(page.locator("body")).to_contain_text(f"{package.full_name}@{version.version}")
        shot(page, "18-transcript-skill-version")

        # She taught it: her home page says it is live.
        page.goto("/")
        expect(page.locator("body")).to_contain_text(f"Your skill {package.name} is live")
        expect(page.locator("body")).to_contain_text(template.name)
        shot(page, "19-home-skill-live")


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
