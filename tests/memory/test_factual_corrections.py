"""A correction updates the statement it contradicts, and says so: "use numbered lists instead
of bullet points" supersedes the bullet-points preference (never the run's experience record),
"our discount limit is 12%, not 10%" the stored 10%, in English and in Chinese, with the
offline rules judge; a correction that contradicts nothing writes nothing and says nothing
was changed."""

from __future__ import annotations

import pytest
from django.urls import reverse

from cadre.agents import services as agent_services
from cadre.agents.models import Run
from cadre.agents.runtime.lifecycle import execution as engine
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.agents.runtime.lifecycle.after import run_after_hooks
from cadre.agents.runtime.records import delivery
from cadre.memory import selectors, services
from cadre.memory.models import Memory, MemoryVersion
from cadre.memory.services.feedback import (
    contradicted_lines,
    correction_claim,
    is_factual_correction,
)
from cadre.skills.models import SkillProposal
from tests.agents.conftest import publish
from tests.memory.conftest import actor


def add(member, content, kind="fact"):
    return services.memory_add(
        actor=actor(member),
        scope="user",
        kind=kind,
        content=content,
        source_kind="user_statement",
    )


def status(memory) -> str:
    memory.refresh_from_db()
    return memory.status


def test_numbered_lists_supersede_the_bullet_points_preference_not_the_experience(bob):
    # As the learning loop leaves them: the stated preference, and the run that stored it
    # recorded as an experience (its task quoting the same words) and a tool trajectory.
    said = "From now on, always write reports in bullet points, and my manager is Li Wei."
    preference = add(bob, said, kind="requirement")
    experience = services.experience_record(
        actor=actor(bob),
        task=said,
        steps=["Use memory_write: content=Always write reports in bullet points"],
        outcome="success",
        run_id=4242,
        scope="user",
        scope_id=bob.pk,
    )
    trajectory = services.tool_trajectory_record(
        actor=actor(bob),
        tool="memory_write",
        parameters={"content": "Always write reports in bullet points"},
        result={"stored": True},
        run_id="4242",
        step_id="1",
        ok=True,
        scope="user",
        scope_id=bob.pk,
    )

    result = services.memory_feedback(
        actor=actor(bob), text="Actually, use numbered lists instead of bullet points."
    )

    assert status(experience) == "active" and status(trajectory) == "active"
    assert not MemoryVersion.objects.filter(
        memory__in=[experience, trajectory], change="correction"
    ).exists()
    assert [memory.pk for memory in result.superseded] == [preference.pk]
    assert status(preference) == "superseded"
    [new] = result.created
    assert new.kind == "requirement"
    # What the preference also said, which the correction does not touch, is kept.
    corrected = "Use numbered lists instead of bullet points. My manager is Li Wei."
    assert new.content == corrected
    assert result.outcome == "updated_memory"
    assert result.message == f"Updated memory: “{said}” → “{corrected}”"
    hits = selectors.memory_search(actor=actor(bob), query="Who is my manager?").hits
    assert corrected in [hit.memory.content for hit in hits]


def test_discount_limit_correction_updates_the_stored_fact_and_says_so(bob, client_for):
    client = client_for(bob)
    stated = client.post(
        "/api/v1/memories/", {"content": "Our discount limit is 10%", "kind": "fact"}, format="json"
    )
    assert stated.status_code == 201, stated.content
    other = add(bob, "Travel expenses may exceed the budget by 10%")

    response = client.post(
        "/api/v1/memories/feedback/",
        {"text": "No, that's wrong: our discount limit is 12%, not 10%"},
        format="json",
    )

    assert response.status_code == 201, response.content
    body = response.json()
    assert [m["content"] for m in body["superseded"]] == ["Our discount limit is 10%"]
    assert [m["content"] for m in body["created"]] == ["our discount limit is 12%, not 10%"]
    assert body["outcome"] == "updated_memory"
    assert body["message"] == (
        "Updated memory: “Our discount limit is 10%” → “our discount limit is 12%, not 10%”"
    )
    assert status(other) == "active"  # another 10% is another matter
    old = Memory.objects.get(pk=stated.json()["id"])
    assert old.status == "superseded" and old.superseded_by_id == body["created"][0]["id"]
    hits = selectors.memory_search(actor=actor(bob), query="discount limit").hits
    assert [hit.memory.content for hit in hits][:1] == ["our discount limit is 12%, not 10%"]
    assert "Our discount limit is 10%" not in [hit.memory.content for hit in hits]


def test_chinese_corrections_update_what_they_contradict(bob):
    limit = add(bob, "我们的折扣上限是10%")
    reimbursement = add(bob, "报销上限是10%")
    bullets = add(bob, "我喜欢用项目符号写周报", kind="preference")

    result = services.memory_feedback(actor=actor(bob), text="不对，我们的折扣上限是12%，不是10%")
    assert [memory.pk for memory in result.superseded] == [limit.pk]
    assert result.created[0].content == "我们的折扣上限是12%，不是10%"
    assert result.message == "已更新记忆：“我们的折扣上限是10%” → “我们的折扣上限是12%，不是10%”"

    result = services.memory_feedback(actor=actor(bob), text="其实用编号列表，不要用项目符号")
    assert [memory.pk for memory in result.superseded] == [bullets.pk]
    assert result.created[0].kind == "preference"
    assert result.message.startswith("已更新记忆：“我喜欢用项目符号写周报”")
    assert status(reimbursement) == "active"


def test_a_correction_with_nothing_to_contradict_writes_nothing_and_says_so(bob, client_for):
    tea = add(bob, "I prefer tea in the afternoon", kind="preference")
    memories, versions = Memory.objects.count(), MemoryVersion.objects.count()

    result = services.memory_feedback(
        actor=actor(bob), text="No, that's wrong: the parking garage closes at 9pm, not 8pm"
    )
    assert result.created == [] and result.superseded == []
    assert result.outcome == "nothing_changed"
    assert result.message == "Nothing was changed: no stored memory says otherwise."

    body = (
        client_for(bob)
        .post("/api/v1/memories/feedback/", {"text": "不对，停车场九点关门"}, format="json")
        .json()
    )
    assert body["created"] == [] and body["superseded"] == []
    assert body["outcome"] == "nothing_changed"
    assert body["message"] == "没有修改任何记忆：没有找到与这条更正相矛盾的记忆。"
    assert (Memory.objects.count(), MemoryVersion.objects.count()) == (memories, versions)
    assert status(tea) == "active"


@pytest.mark.parametrize(
    ("text", "old"),
    [
        ("Our discount limit is 12%, not 10%", "10%"),
        ("Please write it in English, not Chinese", "Chinese"),
        ("Use Slack rather than email for urgent issues", "email for urgent issues"),
        ("No, stop using emojis. Write plainly.", "emojis"),
        ("The report goes to Li Wei, no longer to Zhang San", "to Zhang San"),
        ("其实用编号列表，不要用项目符号", "用项目符号"),
        ("不是张三，是李伟", "张三"),
        ("用编号列表代替项目符号", "项目符号"),
        ("把项目符号改成编号列表", "项目符号"),
    ],
)
def test_a_correction_names_the_value_it_replaces(text, old):
    assert correction_claim(text).old == old
    assert is_factual_correction(text)


@pytest.mark.parametrize(
    "text",
    [
        "I do not like coffee",
        "No problem, thanks!",
        "Actually, can you summarize this?",
        "这不是问题",
        "You forgot the risks section; next time also include one.",
    ],
)
def test_what_is_not_a_correction(text):
    assert not is_factual_correction(text)


def test_sop_lines_a_correction_contradicts():
    sop = "# Discounts\n- Our discount limit is 10% for new customers.\n- Travel is booked by HR."
    assert contradicted_lines("No, our discount limit is 12%, not 10%", sop) == [
        "Our discount limit is 10% for new customers."
    ]
    assert contradicted_lines("No, our discount limit is 12%", sop) == []


# --- in conversation: the same correction, and the person is told ----------------------------


def _agent(alice, bob, sop=""):
    owner = actor(alice)
    template = agent_services.template_create(
        actor=owner,
        name="Sales assistant",
        code="sales-assistant",
        sop=sop,
        model_settings={"provider": "offline", "model": "offline-1"},
        memory_policy={"read_scopes": ["agent", "user"], "write_scopes": ["agent"]},
        hooks={"assemble_context": [{"name": "memory_retrieval", "enabled": False}]},
    )
    publish(owner, template.versions.get())
    deployment = agent_services.deployment_create(
        actor=owner, name="Sales", template=template, members=[bob]
    )
    return deployment.agents.get()


@pytest.fixture
def im_lines():
    """What the IM channel of the conversation was handed: the replies and the lines after."""
    replies: list[delivery.Reply] = []
    channel = delivery.Channel(reply=replies.append, message=lambda message_id: None)
    with delivery.channels.overridden({"feishu": channel}):
        yield replies


@pytest.fixture
def turn(django_capture_on_commit_callbacks, im_lines):
    """One message in an IM conversation, its run and its after-run hooks (and what they
    hand over once they commit)."""

    def send(bob, agent, text, session=None) -> Run:
        with django_capture_on_commit_callbacks(execute=True):
            run = runtime.run_start(
                actor=actor(bob), agent=agent, text=text, session=session, channel="feishu"
            )
            assert engine.run_execute(run.pk) == Run.Status.COMPLETED
            run_after_hooks(run.pk)
        run.refresh_from_db()
        return run

    return send


def test_a_correction_in_chat_updates_the_memory_and_the_person_is_told(
    alice, bob, client_for, im_lines, turn
):
    agent = _agent(alice, bob)
    first = turn(bob, agent, "Our discount limit is 10%.")
    [stated] = Memory.objects.filter(content="Our discount limit is 10%.", status="active")

    second = turn(bob, agent, "No, that's wrong: our discount limit is 12%, not 10%", first.session)

    assert status(stated) == "superseded"
    [new] = Memory.objects.filter(status="active", content__contains="12%")
    assert new.content == "our discount limit is 12%, not 10%" and new.kind == "fact"
    assert new.scope_key == stated.scope_key and stated.superseded_by_id == new.pk
    told = "Updated memory: “Our discount limit is 10%.” → “our discount limit is 12%, not 10%”"
    assert second.events.get(kind="memory_feedback").data["message"] == told
    follow_ups = [reply for reply in im_lines if reply.notice.startswith("follow_up:")]
    assert [(r.run_id, r.text) for r in follow_ups] == [(second.pk, told)]
    page = client_for(bob).get(reverse("console:chat_session", args=[first.session_id]))
    assert told in page.content.decode()

    # Nothing stored says otherwise: nothing is written, and the person hears that too.
    memories = Memory.objects.count()
    third = turn(bob, agent, "不对，停车场九点关门，不是八点", first.session)
    assert Memory.objects.count() == memories
    assert third.events.get(kind="memory_feedback").data["message"] == (
        "没有修改任何记忆：没有找到与这条更正相矛盾的记忆。"
    )


def test_a_correction_of_an_sop_line_proposes_a_change(alice, bob, turn):
    agent = _agent(alice, bob, sop="# Discounts\n- Our discount limit is 10% for new customers.")
    first = turn(bob, agent, "What discount can I give a new customer?")

    second = turn(bob, agent, "No, that's wrong: our discount limit is 12%, not 10%", first.session)

    proposal = SkillProposal.objects.get(run=second)
    assert proposal.member == bob and proposal.status == "pending"
    assert proposal.summary == (
        "Proposed a change to the SOP of Sales assistant: "
        "“Our discount limit is 10% for new customers.” → “our discount limit is 12%, not 10%”"
    )
    assert "Our discount limit is 10% for new customers." in proposal.files["SKILL.md"]
    event = second.events.get(kind="skill_proposal")
    assert event.data["corrects"] == "SOP" and event.data["summary"] == proposal.summary
    # Memory held nothing to correct, and the person is told that as well.
    assert second.events.get(kind="memory_feedback").data["outcome"] == "nothing_changed"


def test_a_lesson_is_still_a_skill_proposal_and_touches_no_memory(alice, bob, turn):
    agent = _agent(alice, bob)
    first = turn(bob, agent, "Prepare the project update for the Shanghai launch.")
    second = turn(
        bob, agent, "You forgot the risks section; next time also include one.", first.session
    )

    proposal = SkillProposal.objects.get(run=second)
    assert proposal.summary.startswith("New skill")
    assert not second.events.filter(kind="memory_feedback").exists()
    assert not Memory.objects.filter(status="superseded").exists()


def test_deleting_a_corrected_memory_deletes_what_it_replaced(bob, alice, client_for):
    """The statement a correction superseded is an earlier form of the memory: deleting the
    memory deletes it too (listed in the report), so its words are not left behind."""
    client = client_for(bob)
    stated = client.post(
        "/api/v1/memories/", {"content": "Our discount limit is 10%", "kind": "fact"}, format="json"
    ).json()
    other = add(bob, "Travel expenses may exceed the budget by 10%")
    corrected = client.post(
        "/api/v1/memories/feedback/",
        {"text": "No, that's wrong: our discount limit is 15%, not 10%"},
        format="json",
    ).json()["created"][0]
    again = client.post(
        "/api/v1/memories/feedback/",
        {"text": "No, that's wrong: our discount limit is 12%, not 15%"},
        format="json",
    ).json()["created"][0]
    assert Memory.objects.get(pk=corrected["id"]).superseded_by_id == again["id"]

    response = client.delete(f"/api/v1/memories/{again['id']}/")

    assert response.status_code == 200, response.content
    report = response.json()
    assert sorted(report["predecessors"]) == sorted([stated["id"], corrected["id"]])
    for pk in (stated["id"], corrected["id"]):
        earlier = Memory.objects.get(pk=pk)
        assert earlier.status == "deleted" and earlier.search_text == ""
        assert earlier.deletion["deleted_with"] == again["id"]
        assert client.get(f"/api/v1/memories/{pk}/").status_code == 404
    listed = client.get("/api/v1/memories/?status=superseded").json()["results"]
    assert not [m for m in listed if "discount limit" in m["content"]]
    assert status(other) == "active"  # not an earlier form of it
