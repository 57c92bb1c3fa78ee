"""Distribution: agents' installs resolve at deployment, follow new versions per their update
policy (auto patches, offered minors, pinned), and roll back; audited and visible per agent."""

from __future__ import annotations

import pytest

from cadre.agents import services as agents
from cadre.agents.models import Run
from cadre.agents.runtime.lifecycle import execution as engine
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.errors import Conflict, InvalidInput, NotPermitted
from cadre.governance.models import AuditEvent
from cadre.tenancy.actors import member_actor
from hub import distribution, services
from hub.models import SkillInstall, SkillInstallEvent, SkillUsage
from hub.tests.agent_setup import deploy, template_with_skills
from hub.tests.factories import publish
from tests.refusals import nothing_changes

pytestmark = pytest.mark.django_db

PDF = "@acme/pdf-tools"


def _install(agent) -> SkillInstall:
    return SkillInstall.objects.select_related("version", "pending_version").get(agent=agent)


def _deployed(alice, bob, policy: str, requested: dict | None = None):
    template = template_with_skills(
        alice, [{"package": PDF, **(requested or {"range": "^1.0.0"}), "policy": policy}]
    )
    _, by_member = deploy(alice, template, bob)
    return by_member[bob.pk]


def test_deployment_resolves_each_agent_install_to_the_highest_version_in_range(alice, bob):
    publish(alice, version="1.0.0")
    publish(alice, version="1.2.0")
    publish(alice, version="2.0.0")
    agent = _deployed(alice, bob, "auto")
    install = _install(agent)
    assert install.version.version == "1.2.0"  # ^1.0.0 excludes 2.0.0
    assert install.requested == "^1.0.0" and install.policy == "auto"
    assert list(install.events.values_list("action", flat=True)) == ["install"]
    event = AuditEvent.objects.filter(action="hub.install.sync").get()
    assert event.changes["versions"] == ["1.2.0"] and agent.pk in event.changes["agents"]


def test_auto_policy_applies_a_patch_and_only_offers_a_minor(alice, bob):
    publish(alice, version="1.0.0")
    agent = _deployed(alice, bob, "auto")
    publish(alice, version="1.0.1")
    install = _install(agent)
    assert install.version.version == "1.0.1" and install.pending_version is None
    publish(alice, version="1.1.0")
    install = _install(agent)
    assert install.version.version == "1.0.1"  # not applied
    assert install.pending_version.version == "1.1.0"  # offered
    actions = list(install.events.order_by("created_at", "id").values_list("action", flat=True))
    assert actions == ["install", "update", "offer"]
    audit = AuditEvent.objects.filter(action="hub.install.distribute").order_by("sequence")
    assert [e.changes["updated"] for e in audit] == [1, 0]
    assert [e.changes["offered"] for e in audit] == [0, 1]


def test_manual_policy_offers_even_a_patch_without_applying_it(alice, bob):
    publish(alice, version="1.0.0")
    agent = _deployed(alice, bob, "manual")
    publish(alice, version="1.0.1")
    install = _install(agent)
    assert install.version.version == "1.0.0"
    assert install.pending_version.version == "1.0.1"


def test_pinned_install_never_moves_and_is_offered_nothing(alice, bob):
    publish(alice, version="1.0.0")
    agent = _deployed(alice, bob, "pinned")
    for number in ("1.0.1", "1.1.0", "1.9.9"):
        publish(alice, version=number)
    install = _install(agent)
    assert install.version.version == "1.0.0" and install.pending_version is None
    assert list(install.events.values_list("action", flat=True)) == ["install"]


def test_a_version_outside_the_range_is_neither_applied_nor_offered(alice, bob):
    publish(alice, version="1.0.0")
    agent = _deployed(alice, bob, "manual", {"range": "~1.0"})
    publish(alice, version="1.1.0")
    install = _install(agent)
    assert install.version.version == "1.0.0" and install.pending_version is None


def test_applying_an_offered_update_moves_the_install_and_is_audited(alice, bob):
    publish(alice, version="1.0.0")
    agent = _deployed(alice, bob, "auto")
    publish(alice, version="1.1.0")
    install = distribution.install_apply_update(actor=member_actor(alice), install=_install(agent))
    assert install.version.version == "1.1.0" and install.pending_version is None
    event = AuditEvent.objects.filter(action="hub.install.apply").get()
    assert event.changes == {"before": {"version": "1.0.0"}, "after": {"version": "1.1.0"}}
    with pytest.raises(Conflict):
        distribution.install_apply_update(actor=member_actor(alice), install=install)


def test_rollback_returns_to_the_previous_version_and_is_recorded(alice, bob):
    publish(alice, version="1.0.0")
    agent = _deployed(alice, bob, "auto")
    publish(alice, version="1.0.1")
    install = distribution.install_rollback(
        actor=member_actor(alice), install=_install(agent), reason="1.0.1 breaks forms"
    )
    assert install.version.version == "1.0.0"
    last = install.events.first()
    assert (last.action, last.from_version.version, last.to_version.version) == (
        "rollback",
        "1.0.1",
        "1.0.0",
    )
    event = AuditEvent.objects.filter(action="hub.install.rollback").get()
    assert event.reason == "1.0.1 breaks forms"
    # A newer patch moves it on again (the rollback held until then).
    publish(alice, version="1.0.2")
    assert _install(agent).version.version == "1.0.2"


def test_rollback_without_history_and_by_an_employee_is_refused(alice, bob):
    publish(alice, version="1.0.0")
    agent = _deployed(alice, bob, "auto")
    with pytest.raises(Conflict):
        distribution.install_rollback(actor=member_actor(alice), install=_install(agent))
    publish(alice, version="1.0.1")
    with pytest.raises(NotPermitted):
        distribution.install_rollback(actor=member_actor(bob), install=_install(agent))
    assert _install(agent).version.version == "1.0.1"


def test_a_dist_tag_move_reaches_agents_that_follow_the_tag(alice, bob):
    first = publish(alice, version="1.0.0")
    actor = member_actor(alice)
    services.dist_tag_set(actor=actor, package=first.package, tag="stable", version=first)
    agent = _deployed(alice, bob, "auto", {"tag": "stable"})
    patch = publish(alice, version="1.0.1")
    assert _install(agent).version.version == "1.0.0"  # stable still points at 1.0.0
    services.dist_tag_set(actor=actor, package=first.package, tag="stable", version=patch)
    assert _install(agent).version.version == "1.0.1"


def test_rolling_out_a_template_version_with_another_range_re_resolves(alice, bob):
    publish(alice, version="1.0.0")
    publish(alice, version="2.0.0")
    template = template_with_skills(alice, [{"package": PDF, "range": "^1.0.0"}])
    deployment, by_member = deploy(alice, template, bob)
    agent = by_member[bob.pk]
    assert _install(agent).version.version == "1.0.0"
    actor = member_actor(alice)
    draft = agents.version_draft(actor=actor, template=template)
    draft = agents.version_update(
        actor=actor, version=draft, skills=[{"package": PDF, "range": "^2"}]
    )
    draft = agents.version_submit(actor=actor, version=draft)
    draft = agents.version_publish(actor=actor, version=draft, reason="skills v2")
    rollout = agents.rollout_start(actor=actor, deployment=deployment, version=draft)
    install = _install(agent)
    assert install.version.version == "2.0.0" and install.requested == "^2"
    assert install.events.first().action == SkillInstallEvent.Action.CHANGE
    agents.rollout_rollback(actor=actor, rollout=rollout, reason="back")
    assert _install(agent).version.version == "1.0.0"


def test_agents_deployed_before_the_skill_existed_install_it_on_first_publish(alice, bob):
    agent = _deployed(alice, bob, "auto")
    assert not SkillInstall.objects.filter(agent=agent).exists()
    publish(alice, version="1.0.0")
    assert _install(agent).version.version == "1.0.0"


def test_another_organizations_private_skill_is_never_installed(alice, charlie):
    publish(alice, version="1.0.0")  # organization visibility: Acme only
    template = template_with_skills(charlie, [{"package": PDF, "range": "^1"}])
    _, by_member = deploy(charlie, template, charlie)
    assert not SkillInstall.objects.filter(agent=by_member[charlie.pk]).exists()


def test_a_template_with_an_unknown_update_policy_is_refused(alice):
    with pytest.raises(InvalidInput) as caught:
        template_with_skills(alice, [{"package": PDF, "range": "^1", "policy": "sometimes"}])
    assert "policy" in caught.value.details["skills"]


def test_installs_api_lists_own_agents_and_applies_updates_for_managers(
    client_for, alice, bob, charlie
):
    publish(alice, version="1.0.0")
    template = template_with_skills(alice, [{"package": PDF, "range": "^1"}])
    _, by_member = deploy(alice, template, alice, bob)
    publish(alice, version="1.1.0")
    listed = client_for(bob).get("/api/v1/hub/installs/").json()["results"]
    assert [row["agent"] for row in listed] == [by_member[bob.pk].pk]  # only bob's own agent
    assert listed[0]["version"] == "1.0.0" and listed[0]["pending_version"] == "1.1.0"
    pending = client_for(alice).get("/api/v1/hub/installs/", {"pending": "1"}).json()
    assert pending["count"] == 2
    url = f"/api/v1/hub/installs/{listed[0]['id']}/"
    assert client_for(bob).post(url + "apply/").status_code == 403
    assert client_for(charlie).post(url + "apply/").status_code == 404
    applied = client_for(alice).post(url + "apply/")
    assert applied.status_code == 200 and applied.json()["version"] == "1.1.0"
    assert [e["action"] for e in applied.json()["history"]] == ["apply", "offer", "install"]
    assert applied.json()["rollback_to"] == "1.0.0"
    again = client_for(alice).post(url + "apply/")
    assert again.status_code == 409 and again.json()["error"]["code"] == "no_pending_update"
    back = client_for(alice).post(url + "rollback/", {"reason": "regression"}, format="json")
    assert back.status_code == 200 and back.json()["version"] == "1.0.0"


def test_agents_get_no_installs_when_nothing_listens_for_provisioned_agents(alice, bob):
    publish(alice, version="1.0.0")
    assert distribution.installs_sync in list(agents.AGENTS_PROVISIONED)
    with agents.AGENTS_PROVISIONED.overridden():
        agent = _deployed(alice, bob, "auto")
    assert agent.version.skills and not SkillInstall.objects.filter(agent=agent).exists()
    assert not AuditEvent.objects.filter(action="hub.install.sync").exists()


def test_a_rollout_tells_the_provisioned_listeners_which_agents_moved(alice, bob):
    template = template_with_skills(alice, [{"package": PDF, "range": "^1.0.0"}])
    deployment, by_member = deploy(alice, template, bob)
    actor = member_actor(alice)
    draft = agents.version_draft(actor=actor, template=template)
    draft = agents.version_submit(actor=actor, version=draft)
    draft = agents.version_publish(actor=actor, version=draft, reason="v2")
    told: list[list[int]] = []
    with agents.AGENTS_PROVISIONED.overridden([lambda *, agent_ids: told.append(agent_ids)]):
        agents.rollout_start(actor=actor, deployment=deployment, version=draft)
    assert told == [[by_member[bob.pk].pk]]


# --- a run's skills: personal data, read by whoever may read the run's transcript -----------


def _run_with_skills(alice, bob) -> Run:
    publish(alice, version="1.0.0")
    agent = _deployed(alice, bob, "auto")
    run = runtime.run_start(actor=member_actor(bob), agent=agent, text="merge my divorce papers")
    assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    assert SkillUsage.objects.filter(run=run).exists()
    return run


def test_a_runs_skills_are_404_to_those_who_may_not_read_its_transcript(
    client_for, alice, bob, make_member
):
    run = _run_with_skills(alice, bob)
    url = f"/api/v1/hub/runs/{run.pk}/skills/"
    for reader in (bob, alice):  # the person it served; an owner holds memory.personal
        [skill] = client_for(reader).get(url).json()["results"]
        assert skill["package"] == PDF
    for role in ("auditor", "business_admin"):  # agent.view alone
        client = client_for(make_member(roles=[role]))
        assert client.get(f"/api/v1/runs/{run.pk}/").status_code == 404
        response = client.get(url)
        assert response.status_code == 404
        assert response.json() == client.get("/api/v1/hub/runs/999999/skills/").json()


def test_run_feedback_follows_the_runs_rating_and_shows_skills_only_to_readers(
    client_for, alice, bob, make_member
):
    run = _run_with_skills(alice, bob)
    url = f"/api/v1/hub/runs/{run.pk}/feedback/"
    auditor = client_for(make_member(roles=["auditor"]))
    with nothing_changes(run, SkillUsage.objects.exclude(feedback="")):
        refused = auditor.post(url, {"outcome": "failure"}, format="json")
    assert refused.status_code == 404
    assert refused.json()["error"]["code"] == "run_not_found"
    # A deployment manager rates any run, as through the runs API, without reading it.
    manager = client_for(make_member(roles=["business_admin"]))
    rated = manager.post(url, {"outcome": "failure"}, format="json")
    assert rated.status_code == 200 and rated.json()["skills"] == []
    run.refresh_from_db()
    assert run.rating == "failure"
    assert SkillUsage.objects.get(run=run).feedback == "failure"
    own = client_for(bob).post(url, {"outcome": "success"}, format="json")
    assert [skill["package"] for skill in own.json()["skills"]] == [PDF]
