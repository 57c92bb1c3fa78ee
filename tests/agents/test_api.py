"""REST API: templates and versions, presets, providers, deployments and rollouts, agents,
runs (create, get, cancel, resume, SSE events) — roles allowed, denied, and outsiders 404."""

from __future__ import annotations

import json

import pytest

from cadre.agents.models import Agent, AgentTemplate, Run, TemplateVersion, Wait
from cadre.agents.runtime.lifecycle import execution as engine
from cadre.governance.models import Confirmation, ConfirmationVote
from tests.refusals import nothing_changes

pytestmark = pytest.mark.django_db


def sse_events(response) -> list[tuple[str, dict]]:
    from asgiref.sync import async_to_sync

    async def collect() -> bytes:  # the stream is an async iterator (served by ASGI)
        return b"".join([chunk async for chunk in response.streaming_content])

    body = async_to_sync(collect)().decode()
    events = []
    for block in body.split("\n\n"):
        fields = dict(
            line.split(": ", 1)
            for line in block.splitlines()
            if ": " in line and not line.startswith(":")
        )
        if "event" in fields:
            events.append((fields["event"], json.loads(fields["data"])))
    return events


def test_template_lifecycle_through_the_api(client_for, alice):
    api = client_for(alice)
    created = api.post(
        "/api/v1/templates/",
        {"name": "CS", "code": "cs", "preset": "customer_service"},
        format="json",
    )
    assert created.status_code == 201, created.json()
    version_id = created.json()["versions"][0]["id"]
    patched = api.patch(
        f"/api/v1/template-versions/{version_id}/",
        {"sop": "# SOP\n- Greet the customer."},
        format="json",
    )
    assert patched.status_code == 200 and patched.json()["sop"].startswith("# SOP")
    bad = api.patch(
        f"/api/v1/template-versions/{version_id}/",
        {"tool_permissions": {"nope": {}}},
        format="json",
    )
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid"
    assert api.post(f"/api/v1/template-versions/{version_id}/submit/").status_code == 200
    published = api.post(
        f"/api/v1/template-versions/{version_id}/publish/", {"reason": "ok"}, format="json"
    )
    assert published.json()["status"] == "published"
    again = api.patch(f"/api/v1/template-versions/{version_id}/", {"sop": "x"}, format="json")
    assert again.status_code == 409 and again.json()["error"]["code"] == "not_draft"
    template_id = created.json()["id"]
    draft = api.post(f"/api/v1/templates/{template_id}/draft/")
    assert draft.status_code == 201 and draft.json()["number"] == 2
    api.patch(
        f"/api/v1/template-versions/{draft.json()['id']}/",
        {"sop": "# SOP\n- Greet the customer warmly."},
        format="json",
    )
    diff = api.get(f"/api/v1/templates/{template_id}/diff/?from=1&to=2")
    assert diff.status_code == 200
    assert "+- Greet the customer warmly." in diff.json()["changes"]["sop"]
    assert api.get(f"/api/v1/templates/{template_id}/diff/?from=1&to=9").status_code == 404


def test_presets_are_listed(client_for, bob):
    response = client_for(bob).get("/api/v1/template-presets/")
    assert response.status_code == 200
    assert "it_operations" in {row["key"] for row in response.json()}


def test_employee_reads_templates_but_cannot_change_them(client_for, bob, template):
    api = client_for(bob)
    assert api.get("/api/v1/templates/").json()["count"] == 1
    with nothing_changes(AgentTemplate):
        assert (
            api.post("/api/v1/templates/", {"name": "x", "code": "x"}, format="json").status_code
            == 403
        )
    version = template.versions.get()
    with nothing_changes(version):
        assert api.post(f"/api/v1/template-versions/{version.pk}/submit/").status_code == 403


def test_outsider_gets_404_on_templates_agents_and_runs(
    client_for, charlie, bob, bob_agent, template
):
    from cadre.agents.runtime.lifecycle import services as runtime
    from cadre.tenancy.actors import member_actor

    run = runtime.run_start(actor=member_actor(bob), agent=bob_agent, text="hi")
    api = client_for(charlie)
    for url in (
        f"/api/v1/templates/{template.pk}/",
        f"/api/v1/agents/{bob_agent.pk}/",
        f"/api/v1/runs/{run.pk}/",
        f"/api/v1/sessions/{run.session_id}/",
        f"/api/v1/deployments/{bob_agent.deployment_id}/",
        f"/api/v1/template-versions/{template.versions.get().pk}/",
    ):
        assert api.get(url).status_code == 404, url
    assert api.post(f"/api/v1/runs/{run.pk}/cancel/").status_code == 404
    assert api.get("/api/v1/runs/").json()["count"] == 0


def test_provider_api_key_is_write_only(client_for, alice):
    api = client_for(alice)
    response = api.post(
        "/api/v1/model-providers/",
        {
            "name": "DeepSeek",
            "kind": "openai_compatible",
            "base_url": "https://api.deepseek.example/v1",
            "api_key": "sk-very-secret",
            "default_model": "deepseek-chat",
        },
        format="json",
    )
    assert response.status_code == 201, response.json()
    assert "api_key" not in response.json() and response.json()["api_key_set"] is True
    assert "sk-very-secret" not in api.get("/api/v1/model-providers/").content.decode()


def test_deploy_rollout_and_rollback_through_the_api(
    client_for, alice, bob, template, published, sales, owner
):
    from cadre.agents import services

    bob.positions.add(sales)
    api = client_for(alice)
    created = api.post(
        "/api/v1/deployments/",
        {"name": "Sales", "template": template.pk, "positions": [sales.pk]},
        format="json",
    )
    assert created.status_code == 201, created.json()
    deployment_id = created.json()["id"]
    assert created.json()["agent_count"] == 1
    draft = services.version_draft(actor=owner, template=template)
    services.version_submit(actor=owner, version=draft)
    services.version_publish(actor=owner, version=draft)
    rollout = api.post(
        f"/api/v1/deployments/{deployment_id}/rollout/",
        {"version": draft.pk, "strategy": "all"},
        format="json",
    )
    assert rollout.status_code == 201, rollout.json()
    assert rollout.json()["progress"] == {"total": 1, "on_new_version": 1}
    back = api.post(
        f"/api/v1/rollouts/{rollout.json()['id']}/rollback/", {"reason": "oops"}, format="json"
    )
    assert back.json()["status"] == "rolled_back"
    assert Agent.objects.get().version_id == published.pk
    assert client_for(bob).get("/api/v1/deployments/").status_code == 403


def test_a_deployment_has_no_policy_of_its_own(client_for, alice, template, published, sales):
    """What agents may do is the template's and the policy chain's: a deployment neither stores
    nor shows a `policy`, and the schema offers none."""
    from cadre.agents.models import Deployment

    created = client_for(alice).post(
        "/api/v1/deployments/",
        {
            "name": "Sales",
            "template": template.pk,
            "positions": [sales.pk],
            "policy": {"tools": {"deny": ["http_request"]}},
        },
        format="json",
    )
    assert created.status_code == 201, created.json()
    assert "policy" not in created.json()
    assert "policy" not in {field.name for field in Deployment._meta.get_fields()}
    fetched = client_for(alice).get(f"/api/v1/deployments/{created.json()['id']}/").json()
    assert "policy" not in fetched
    schema = client_for(alice).get("/api/schema/", {"format": "json"}).json()["components"]
    for name in ("Deployment", "DeploymentCreate", "DeploymentCreateRequest"):
        assert "policy" not in schema["schemas"].get(name, {}).get("properties", {}), name


def test_employee_sees_and_edits_only_their_own_agents(client_for, bob, alice, deployment):
    api = client_for(bob)
    listed = api.get("/api/v1/agents/").json()
    assert [row["member"] for row in listed["results"]] == [bob.pk]
    alice_agent = deployment.agents.get(member=alice)
    assert api.get(f"/api/v1/agents/{alice_agent.pk}/").status_code == 404
    mine = listed["results"][0]["id"]
    edited = api.patch(f"/api/v1/agents/{mine}/", {"user_md": "Call me B."}, format="json")
    assert edited.status_code == 200 and edited.json()["user_md"] == "Call me B."
    assert client_for(alice).get("/api/v1/agents/").json()["count"] == 2  # agent.view


def test_message_run_state_events_and_cancel(client_for, bob, alice, bob_agent, deployment):
    api = client_for(bob)
    accepted = api.post(
        "/api/v1/runs/",
        {"agent": bob_agent.pk, "text": "What is the standard discount?"},
        format="json",
    )
    assert accepted.status_code == 202, accepted.json()
    run_id = accepted.json()["id"]
    assert accepted.json()["status"] == "queued"
    engine.run_execute(run_id)  # what the worker does
    state = api.get(f"/api/v1/runs/{run_id}/").json()
    assert state["status"] == "completed"
    assert [step["kind"] for step in state["steps"]] == ["hook", "hook", "model_call"]
    events = sse_events(api.get(f"/api/v1/runs/{run_id}/events/", HTTP_ACCEPT="text/event-stream"))
    kinds = [kind for kind, _ in events]
    assert kinds[0] == "status" and kinds[-1] == "end"
    reply = next(data for kind, data in events if kind == "reply")
    assert "5 percent" in reply["text"]
    # Resuming after the last event id gives only what is new (here: nothing but the end).
    last_id = Run.objects.get(pk=run_id).events.order_by("-id").first().pk
    tail = sse_events(api.get(f"/api/v1/runs/{run_id}/events/", HTTP_LAST_EVENT_ID=str(last_id)))
    assert [kind for kind, _ in tail] == ["end"]
    # A timeout that is not a number of seconds would never reach its deadline: refused.
    for timeout in ("nan", "NaN", "x"):
        refused = api.get(f"/api/v1/runs/{run_id}/events/", {"timeout": timeout})
        assert refused.status_code == 400, timeout
        assert refused.json()["error"]["code"] == "invalid"
    # Someone else's agent is not a valid target.
    alice_agent = deployment.agents.get(member=alice)
    denied = api.post("/api/v1/runs/", {"agent": alice_agent.pk, "text": "hi"}, format="json")
    assert denied.status_code == 400
    waiting = api.post(
        "/api/v1/runs/", {"agent": bob_agent.pk, "text": "wait for x"}, format="json"
    ).json()
    engine.run_execute(waiting["id"])
    cancelled = api.post(f"/api/v1/runs/{waiting['id']}/cancel/", {"reason": "no"}, format="json")
    assert cancelled.json()["status"] == "cancelled"
    with nothing_changes(Run.objects.get(pk=waiting["id"])):
        assert api.post(f"/api/v1/runs/{waiting['id']}/cancel/").status_code == 409


def test_confirmation_resume_through_the_api(client_for, bob, alice, bob_agent):
    api = client_for(bob)
    run = api.post(
        "/api/v1/runs/",
        {"agent": bob_agent.pk, "text": "send hello to group:everyone"},
        format="json",
    ).json()
    engine.run_execute(run["id"])
    resume = f"/api/v1/runs/{run['id']}/resume/"
    # Bob confirms his own sends (console, IM card), not through this admin's route; the
    # owner may use the route but is not this confirmation's decider.
    with nothing_changes(Wait, Confirmation, ConfirmationVote):
        for who in (bob, alice):
            response = client_for(who).post(resume, {"payload": {"approved": True}}, format="json")
            assert response.status_code == 403, response.content
    assert Run.objects.get(pk=run["id"]).status == "waiting"


def test_resuming_a_run_decides_its_confirmation_by_the_confirmations_rules(
    client_for, bob, alice, bob_agent, make_member, org_a, im_channel
):
    """The run's resume route is the confirmation's decision: someone who may not decide it
    cannot approve it through the run, and an approval counts towards its quorum."""
    org_a.settings = {
        **(org_a.settings or {}),
        "confirmation_rules": {"high": {"deciders": ["role:owner"], "approvals": 2}},
    }
    org_a.save(update_fields=["settings"])
    other_owner = make_member(roles=["owner"])
    ivan = make_member(roles=["it_admin"])  # holds confirmation.decide, not a decider here
    run = (
        client_for(bob)
        .post(
            "/api/v1/runs/",
            {"agent": bob_agent.pk, "text": "send hello to group:everyone"},
            format="json",
        )
        .json()
    )
    engine.run_execute(run["id"])
    confirmation = Confirmation.objects.get(run_id=run["id"])
    assert ivan.pk not in confirmation.decider_ids
    resume = f"/api/v1/runs/{run['id']}/resume/"
    with nothing_changes(Wait, Confirmation, ConfirmationVote):
        forged = client_for(ivan).post(resume, {"payload": {"approved": True}}, format="json")
        assert forged.status_code == 403, forged.content
        malformed = client_for(alice).post(resume, {"payload": {"ok": 1}}, format="json")
        assert malformed.status_code == 400, malformed.content
    first = client_for(alice).post(resume, {"payload": {"approved": True}}, format="json")
    assert first.status_code == 200 and first.json()["status"] == "pending"  # one of two
    assert engine.run_execute(run["id"]) == "waiting" and not im_channel.messages
    second = client_for(other_owner).post(resume, {"payload": {"approved": True}}, format="json")
    assert second.status_code == 200 and second.json()["status"] == "resolved"
    confirmation.refresh_from_db()
    assert confirmation.status == Confirmation.Status.APPROVED
    assert set(confirmation.votes.values_list("via", flat=True)) == {"api"}
    assert engine.run_execute(run["id"]) == "completed"


def test_template_generation_offline_from_documents(client_for, alice, template):
    from django.core.files.uploadedfile import SimpleUploadedFile

    TemplateVersion.objects.filter(template=template).update(status="published")
    doc = SimpleUploadedFile(
        "playbook.md",
        b"# Visits\n- Prepare the account history\n"
        b"## Discounts\n- Never promise more than 10 percent\n",
    )
    response = client_for(alice).post(
        f"/api/v1/templates/{template.pk}/generate/",
        {"files": [doc], "notes": "- Log every call"},
        format="multipart",
    )
    assert response.status_code == 201, response.json()
    version = response.json()
    assert version["status"] == "draft" and version["generated_from"]["mode"] == "offline"
    assert "Offline draft" in version["sop"] and "### Discounts" in version["sop"]
    assert "- Never promise more than 10 percent" in version["agent_md"]  # a boundary
    assert "Log every call" in version["sop"]
