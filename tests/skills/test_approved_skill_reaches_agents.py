"""An approved skill reaches the agents of the template that taught it (issue #31): an employee
corrects their agent, confirms the drafted skill, a reviewer approves it — and then, by the
organization's `approved_skills` setting, the template's next version references it and is rolled
out on its own ("automatic", through the template's publish gates), or the skill's page and the
review offer "Install into <template> and roll out" ("offer", the default). The employee who
taught it gets a notice in the console and over IM once agents run it."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from cadre.agents import services as agent_services
from cadre.agents.evaluation.gates import evaluation_gates_set
from cadre.agents.models import Rollout, TemplateVersion
from cadre.agents.runtime.lifecycle.after import run_after_hooks
from cadre.errors import Conflict
from cadre.governance.models import AuditEvent
from cadre.skills.models import SkillProposal
from cadre.tenancy.actors import member_actor
from cadre.tenancy.models import Notice, Organization
from connectors.feishu.tests.fake_api import APP_ID, APP_SECRET, FakeFeishu
from connectors.models import Delivery
from connectors.tests.fakes import FakePlatformServer
from connectors.tests.helpers import make_connector
from hub import distribution
from hub.models import SkillInstall, SkillUsage
from hub.tests.agent_setup import completed_run, deploy, template_with_skills
from hub.tests.factories import publish
from tests.factories import IMIdentityFactory

pytestmark = pytest.mark.django_db

REQUEST = "Prepare the trade show plan for the Shanghai expo."
CORRECTION = "Next time, also include the booth budget and the follow-up list."


@pytest.fixture
def celery_eager():
    """Tasks run in-process on commit (the same code a worker runs); restored afterwards."""
    from cadre.celery import app

    saved = (app.conf.task_always_eager, app.conf.task_eager_propagates)
    app.conf.task_always_eager = app.conf.task_eager_propagates = True
    yield
    app.conf.task_always_eager, app.conf.task_eager_propagates = saved


@pytest.fixture
def feishu(alice, bob):
    """bob is reachable on a loopback Feishu: the organization's active connector."""
    server = FakePlatformServer().start()
    make_connector(
        alice,
        "feishu",
        {"app_id": APP_ID, "app_secret": APP_SECRET},
        {"api_base_url": server.url, "max_attempts": 1},
    )
    IMIdentityFactory(member=bob, platform="feishu", platform_user_id="ou_bob")
    yield FakeFeishu(server)
    server.stop()


def _texts(feishu) -> list[tuple[str, str]]:
    return [
        (request.json()["receive_id"], json.loads(request.json()["content"])["text"])
        for request in feishu.sent()
    ]


def _taught(alice, bob, client_for, capture):
    """bob's agent (of a template that loads Hub skills) is corrected; bob confirms the
    drafted skill. Returns (template, deployment, agent, proposal, candidate id)."""
    template = template_with_skills(alice, [])
    deployment, by_member = deploy(alice, template, bob)
    agent = by_member[bob.pk]
    first = completed_run(bob, agent, REQUEST)
    second = completed_run(bob, agent, CORRECTION, session=first.session)
    with capture(execute=True):
        run_after_hooks(second.pk)
    proposal = SkillProposal.objects.get(run=second)
    confirmed = client_for(bob).post(f"/api/v1/skills/proposals/{proposal.pk}/confirm/")
    assert confirmed.status_code == 201, confirmed.content
    return template, deployment, agent, proposal, confirmed.json()["id"]


def _approve(client, candidate_id, capture) -> dict:
    with capture(execute=True):
        response = client.post(
            f"/api/v1/skills/candidates/{candidate_id}/decisions/",
            {"decision": "approve"},
            format="json",
        )
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "published"
    return response.json()


def _package_url(proposal) -> str:
    proposal.refresh_from_db()
    package = proposal.candidate.package
    return f"/api/v1/hub/skills/{package.namespace.handle}/{package.name}/templates/"


def test_automatic_an_approved_skill_is_in_the_templates_next_version_and_its_agents_run_it(
    alice, bob, client_for, celery_eager, feishu, django_capture_on_commit_callbacks
):
    capture = django_capture_on_commit_callbacks
    setting = client_for(alice).patch(
        "/api/v1/organization/", {"approved_skills": "automatic"}, format="json"
    )
    assert setting.status_code == 200 and setting.json()["approved_skills"] == "automatic"
    template, deployment, agent, proposal, candidate_id = _taught(alice, bob, client_for, capture)
    assert not SkillInstall.objects.filter(agent=agent).exists()

    _approve(client_for(alice), candidate_id, capture)

    proposal.refresh_from_db()
    published = proposal.candidate.published_version
    package = published.package
    current = template.published_version
    assert current.number == 2 and current.status == TemplateVersion.Status.PUBLISHED
    assert current.skills == [
        {"package": package.full_name, "range": f"^{published.version}", "policy": "auto"}
    ]
    assert "skills" in [entry["name"] for entry in current.hooks["assemble_context"]]
    deployment.refresh_from_db()
    agent.refresh_from_db()
    assert deployment.version == current and agent.version == current
    rollout = Rollout.objects.get(deployment=deployment)
    assert rollout.to_version == current and rollout.status == Rollout.Status.COMPLETED
    install = SkillInstall.objects.get(agent=agent)
    assert install.package == package and install.version == published
    # Published the way a person publishes: each step audited, by the approved-skills actor.
    actions = list(
        AuditEvent.objects.filter(target_id=str(current.pk), target_type="templateversion")
        .order_by("pk")
        .values_list("action", flat=True)
    )
    assert actions == [
        "template.version_draft",
        "template.version_update",
        "template.submit",
        "template.publish",
    ]
    installed = AuditEvent.objects.get(action="hub.template_install")
    assert installed.actor_label == "approved skills"
    assert installed.changes["template_version"] == 2 and installed.changes["agents"] == 1

    # bob's agent runs with the skill: its next run has it in context.
    run = completed_run(bob, agent, "Plan the booth budget for the Berlin fair.")
    usage = SkillUsage.objects.get(run=run)
    assert usage.loaded and usage.version == published

    # bob, who taught it, is told: in the console and over IM, once.
    notice = Notice.objects.get(member=bob)
    assert notice.kind == "hub.skill_live" and package.name in notice.title
    assert template.name in notice.body and notice.url.endswith(f"/{package.name}/")
    assert [recipient for recipient, _ in _texts(feishu)] == ["ou_bob"]
    assert notice.title in _texts(feishu)[0][1]
    assert Delivery.objects.get().idempotency_key.startswith(f"notice:{notice.pk}:")
    page = client_for(bob).get(reverse("console:skill_proposals"))
    assert notice.title in page.content.decode()
    assert not Notice.objects.filter(member=alice).exists()


def test_automatic_install_goes_through_the_publish_gate_and_keeps_the_offer_when_held(
    alice, bob, client_for, celery_eager, django_capture_on_commit_callbacks
):
    capture = django_capture_on_commit_callbacks
    Organization.objects.filter(pk=alice.organization_id).update(approved_skills="automatic")
    template, _deployment, agent, proposal, candidate_id = _taught(alice, bob, client_for, capture)
    evaluation_gates_set(actor=member_actor(alice), gates={"template_publish": True})

    _approve(client_for(alice), candidate_id, capture)

    # No passing replay of the new version: nothing was published, drafted or rolled out.
    assert list(template.versions.values_list("number", flat=True)) == [1]
    assert not Rollout.objects.exists() and not SkillInstall.objects.filter(agent=agent).exists()
    held = AuditEvent.objects.get(action="hub.template_install.held")
    assert held.changes["code"] == "evaluation_gate" and held.changes["template"] == template.pk
    assert not Notice.objects.exists()
    rows = client_for(alice).get(_package_url(proposal)).json()["results"]
    assert [(r["template"], r["taught"], r["offer"], r["can_install"]) for r in rows] == [
        (template.pk, True, True, True)
    ]
    # The one-click install meets the same gate, and an override reason lets it through.
    url = _package_url(proposal)
    refused = client_for(alice).post(url, {"template": template.pk}, format="json")
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "evaluation_gate"
    with capture(execute=True):
        done = client_for(alice).post(
            url, {"template": template.pk, "override_gate": "urgent fix"}, format="json"
        )
    assert done.status_code == 201, done.content
    assert AuditEvent.objects.filter(action="evaluation.gate.override").count() == 1
    assert SkillInstall.objects.get(agent=agent).version == proposal.candidate.published_version


def test_offer_by_default_one_click_installs_into_the_template_and_tells_the_teacher(
    alice, bob, charlie, make_member, client_for, celery_eager, django_capture_on_commit_callbacks
):
    capture = django_capture_on_commit_callbacks
    template, _deployment, agent, proposal, candidate_id = _taught(alice, bob, client_for, capture)
    _approve(client_for(alice), candidate_id, capture)
    # Offered, not installed: the template is unchanged and its agents lack the skill.
    assert list(template.versions.values_list("number", flat=True)) == [1]
    assert not SkillInstall.objects.filter(agent=agent).exists()
    url = _package_url(proposal)
    rows = client_for(alice).get(url).json()["results"]
    assert [(r["template_name"], r["taught"], r["offer"], r["agents"]) for r in rows] == [
        (template.name, True, True, 0)
    ]

    # Who may not install it changes nothing: an employee, a skill reviewer, an outsider.
    reviewer = make_member(roles=["skill_reviewer"])
    for member, status in ((bob, 403), (reviewer, 403), (charlie, 404)):
        response = client_for(member).post(url, {"template": template.pk}, format="json")
        assert response.status_code == status, (member, response.content)
    console_url = reverse(
        "console:hub_template_install",
        args=[proposal.candidate.package.namespace.handle, proposal.candidate.package.name],
    )
    refused = client_for(bob).post(console_url, {"template": template.pk}, format="multipart")
    assert refused.status_code == 403
    assert list(template.versions.values_list("number", flat=True)) == [1]
    assert not Rollout.objects.exists() and not Notice.objects.exists()
    assert not AuditEvent.objects.filter(action__startswith="hub.template_install").exists()

    with capture(execute=True):
        response = client_for(alice).post(url, {"template": template.pk}, format="json")
    assert response.status_code == 201, response.content
    result = response.json()
    assert result["new_template_version"] and result["template_version"] == 2
    assert result["agents"] == 1 and len(result["rollouts"]) == 1
    agent.refresh_from_db()
    assert agent.version.number == 2
    assert SkillInstall.objects.get(agent=agent).version == proposal.candidate.published_version
    assert Notice.objects.filter(member=bob, kind="hub.skill_live").count() == 1
    rows = client_for(alice).get(url).json()["results"]
    assert [(r["offer"], r["agents"], r["version"]) for r in rows] == [(False, 1, 2)]

    # A second click finds it done and creates nothing; bob is not told twice.
    again = client_for(alice).post(url, {"template": template.pk}, format="json")
    assert again.status_code == 409 and again.json()["error"]["code"] == "already_installed"
    assert template.versions.count() == 2 and Notice.objects.count() == 1


def test_the_package_page_and_the_review_offer_the_install_to_those_allowed(
    alice, bob, client_for, celery_eager, django_capture_on_commit_callbacks
):
    capture = django_capture_on_commit_callbacks
    template, _deployment, agent, proposal, candidate_id = _taught(alice, bob, client_for, capture)
    _approve(client_for(alice), candidate_id, capture)
    proposal.refresh_from_db()
    package = proposal.candidate.package
    page_url = reverse("console:hub_package", args=[package.namespace.handle, package.name])
    button = f"Install into {template.name} and roll out"
    owner_page = client_for(alice).get(page_url).content.decode()
    assert button in owner_page and "taught it" in owner_page
    assert button not in client_for(bob).get(page_url).content.decode()
    review = client_for(alice).get(reverse("console:skill_review", args=[candidate_id]))
    assert button in review.content.decode()

    with capture(execute=True):
        response = client_for(alice).post(
            reverse("console:hub_template_install", args=[package.namespace.handle, package.name]),
            {"template": template.pk},
            format="multipart",
        )
    assert response.status_code == 302 and response["Location"] == page_url
    assert SkillInstall.objects.get(agent=agent).version == proposal.candidate.published_version
    after = client_for(alice).get(page_url).content.decode()
    assert button not in after and "Installed on agents" in after
    assert agent.name in after


def test_the_setting_is_the_organizations_offer_by_default_and_changed_by_its_managers(
    alice, bob, charlie, client_for
):
    url = "/api/v1/organization/"
    assert client_for(alice).get(url).json()["approved_skills"] == "offer"
    refused = client_for(bob).patch(url, {"approved_skills": "automatic"}, format="json")
    assert refused.status_code == 403
    bad = client_for(alice).patch(url, {"approved_skills": "sometimes"}, format="json")
    assert bad.status_code == 400 and "approved_skills" in bad.json()["error"]["details"]
    alice.organization.refresh_from_db()
    assert alice.organization.approved_skills == "offer"

    form = {"name": "Acme", "locale": "en", "time_zone": "UTC", "approved_skills": "automatic"}
    saved = client_for(alice).post(reverse("console:organization"), form, format="multipart")
    assert saved.status_code == 302
    alice.organization.refresh_from_db()
    charlie.organization.refresh_from_db()
    assert alice.organization.approved_skills == "automatic"
    assert charlie.organization.approved_skills == "offer"  # another organization's is its own
    event = AuditEvent.objects.filter(action="organization.update").latest("pk")
    assert event.changes["after"]["approved_skills"] == "automatic"


def test_a_template_whose_range_selects_the_version_moves_its_agents_without_a_new_version(
    alice, bob
):
    first = publish(alice, version="1.0.0")
    template = template_with_skills(
        alice, [{"package": first.package.full_name, "range": "^1.0.0", "policy": "auto"}]
    )
    _deployment, by_member = deploy(alice, template, bob)
    install = SkillInstall.objects.get(agent=by_member[bob.pk])
    minor = publish(alice, version="1.1.0")
    install.refresh_from_db()
    assert install.version == first and install.pending_version == minor  # only offered

    result = distribution.template_skill_install(
        actor=member_actor(alice), package=minor.package, template=template
    )
    assert not result["new_template_version"] and result["agents"] == 1
    install.refresh_from_db()
    assert install.version == minor and install.pending_version is None
    assert template.versions.count() == 1

    # While someone edits a draft of the template, the install waits for them.
    agent_services.version_draft(actor=member_actor(alice), template=template)
    later = publish(alice, version="2.0.0")
    with pytest.raises(Conflict) as refused:
        distribution.template_skill_install(
            actor=member_actor(alice), package=later.package, template=template
        )
    assert refused.value.code == "draft_exists"
    assert template.versions.filter(status=TemplateVersion.Status.PUBLISHED).count() == 1
