"""Who may read and build evaluation, and what a case may reach: evaluation is an admin's tool
(employees and their keys read none of it), a case reads only scopes and memories its author
may read, a replay runs as the case's author, and a colleague's turn becomes a case only for
them or a holder of `memory.personal`, masked."""

from __future__ import annotations

import io
import json

import pytest

from cadre.agents.evaluation import services
from cadre.agents.evaluation.models import EvalCase, EvalResult, EvalRun
from cadre.agents.runtime.lifecycle import execution as engine
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.errors import InvalidInput, NotFound, NotPermitted
from cadre.tenancy.actors import member_actor
from tests.refusals import nothing_changes

pytestmark = pytest.mark.django_db

SECRET = "Bob's locker code is 4417 and he is allergic to penicillin"


def _personal_memory(member, content: str = SECRET):
    from cadre.memory import services as memory_services

    return memory_services.memory_add(
        actor=member_actor(member),
        scope="user",
        scope_id=member.pk,
        kind="fact",
        content=content,
        source_kind="user_statement",
    )


@pytest.fixture
def business_admin(make_member):
    return make_member(roles=["business_admin"], display_name="Bea")


@pytest.fixture
def replayed(owner, alice, bob):
    """A retrieval suite with a case on bob's personal scope (alice holds `memory.personal`)
    and a finished replay of it."""
    memory = _personal_memory(bob)
    suite = services.suite_create(actor=owner, name="Retrieval", kind="retrieval")
    case = services.case_create(
        actor=owner,
        suite=suite,
        data={
            "input": "What is Bob's locker code?",
            "scopes": [memory.scope_key],
            "expected_memories": [memory.pk],
        },
    )
    run = services.eval_run_start(actor=owner, suite=suite, candidate={"kind": "current"})
    services.eval_run_execute(run.pk)
    return {"suite": suite, "case": case, "run": run, "memory": memory}


def _reads(replayed) -> list[str]:
    suite, case, run = replayed["suite"], replayed["case"], replayed["run"]
    return [
        "/api/v1/evaluation/suites/",
        f"/api/v1/evaluation/suites/{suite.pk}/",
        "/api/v1/evaluation/cases/",
        f"/api/v1/evaluation/cases/{case.pk}/",
        "/api/v1/evaluation/runs/",
        f"/api/v1/evaluation/runs/{run.pk}/",
        f"/api/v1/evaluation/runs/{run.pk}/results/",
        "/api/v1/evaluation/gates/",
    ]


# --- finding 4: every employee read the evaluation area -------------------------------------


def test_an_employee_reads_no_evaluation(bob, client_for, replayed):
    client = client_for(bob)
    for url in _reads(replayed):
        response = client.get(url)
        assert response.status_code == 403, (url, response.status_code)
        assert response.json()["error"]["code"] == "permission_denied"
        assert SECRET not in response.content.decode()


def test_an_employee_capped_key_reads_no_evaluation(make_member, key_client, replayed):
    creator = make_member(roles=["it_admin"])
    client = key_client(creator, ["templates:write"])
    assert client.get("/api/v1/evaluation/suites/").status_code == 200  # the key works
    creator.roles = ["employee"]
    creator.save(update_fields=["roles"])
    personal_case = f"/api/v1/evaluation/cases/{replayed['case'].pk}/"
    for url in _reads(replayed):
        response = client.get(url)
        # the case reads bob's personal scope: not found, not forbidden (issue 29's rule)
        expected = 404 if url == personal_case else 403
        assert response.status_code == expected, (url, response.status_code)
        assert SECRET not in response.content.decode()


def test_an_employee_sees_no_evaluation_in_the_console(bob, client, replayed):
    client.force_login(bob.user)
    for url in (
        "/evaluation/",
        f"/evaluation/suites/{replayed['suite'].pk}/",
        f"/evaluation/runs/{replayed['run'].pk}/",
    ):
        response = client.get(url)
        assert response.status_code in (403, 404), (url, response.status_code)
        assert SECRET not in response.content.decode()


def test_the_roles_that_read_evaluation():
    from cadre.tenancy.roles import ROLES

    readers = {name for name, role in ROLES.items() if "evaluation.view" in role.permissions}
    builders = {name for name, role in ROLES.items() if "evaluation.manage" in role.permissions}
    assert readers == {"owner", "it_admin", "business_admin", "auditor"}
    assert builders == {"owner", "it_admin", "business_admin"}


# --- finding 3: a case read any member's personal memory ------------------------------------


def test_a_case_on_another_members_personal_scope_is_refused(
    business_admin, bob, client_for, key_client, make_member, owner
):
    memory = _personal_memory(bob)
    suite = services.suite_create(actor=owner, name="Retrieval", kind="retrieval")
    body = {"suite": suite.pk, "input": "locker code?", "scopes": [memory.scope_key]}
    # no key reads personal memory (no scope carries `memory.personal`), an IT admin's neither
    key = key_client(make_member(roles=["it_admin"]), ["templates:write", "memory:read"])
    for client in (client_for(business_admin), key):
        with nothing_changes(EvalCase):
            response = client.post("/api/v1/evaluation/cases/", body, format="json")
        assert response.status_code == 400, response.content
        assert memory.scope_key in json.dumps(response.json()["error"]["details"])
    upload = io.BytesIO(json.dumps({"input": "x", "scopes": [memory.scope_key]}).encode())
    upload.name = "cases.jsonl"
    with nothing_changes(EvalCase):
        response = client_for(business_admin).post(
            "/api/v1/evaluation/cases/import/",
            {"suite": suite.pk, "file": upload},
            format="multipart",
        )
    assert response.status_code == 400
    # the author's own reach is theirs to test
    own = _personal_memory(business_admin, "Bea parks on level 2")
    response = client_for(business_admin).post(
        "/api/v1/evaluation/cases/",
        {**body, "scopes": [own.scope_key, "organization"]},
        format="json",
    )
    assert response.status_code == 201, response.content


def test_expected_memories_are_no_oracle(business_admin, bob, owner):
    memory = _personal_memory(bob)
    suite = services.suite_create(actor=owner, name="Retrieval", kind="retrieval")
    author = member_actor(business_admin)
    answers = []
    for memory_id in (memory.pk, memory.pk + 10_000):  # another's, and none at all
        with nothing_changes(EvalCase), pytest.raises(InvalidInput) as refused:
            services.case_create(
                actor=author,
                suite=suite,
                data={"input": "x", "scopes": ["organization"], "expected_memories": [memory_id]},
            )
        answers.append(json.dumps(refused.value.details).replace(str(memory_id), "<id>"))
    assert answers[0] == answers[1]  # an unreadable memory and a missing one answer alike


def test_a_replay_runs_as_the_cases_author(bob, make_member, owner):
    """The author may read bob's personal scope when the case is written; once they may not,
    the replay does not reach it either (and a case stored with a scope its author never
    could read reaches nothing there)."""
    memory = _personal_memory(bob)
    admin = make_member(roles=["it_admin"])
    suite = services.suite_create(actor=owner, name="Retrieval", kind="retrieval")
    case = services.case_create(
        actor=member_actor(admin),
        suite=suite,
        data={"input": "What is Bob's locker code?", "scopes": [memory.scope_key]},
    )
    first = services.eval_run_start(actor=owner, suite=suite, candidate={"kind": "current"})
    services.eval_run_execute(first.pk)
    assert memory.pk in [m["id"] for m in EvalResult.objects.get(run=first).baseline["memories"]]

    admin.roles = ["business_admin"]
    admin.save(update_fields=["roles"])
    planted = EvalCase.objects.create(  # as an older release stored it, unchecked
        organization=suite.organization,
        suite=suite,
        input_text="What is Bob's locker code?",
        scopes=[memory.scope_key],
        created_by=make_member(roles=["business_admin"]),
    )
    second = services.eval_run_start(actor=owner, suite=suite, candidate={"kind": "current"})
    services.eval_run_execute(second.pk)
    for result in EvalResult.objects.filter(run=second, case__in=[case, planted]):
        for side in (result.baseline, result.candidate):
            assert side["memories"] == []
            assert "4417" not in json.dumps(side)


def test_a_replay_of_a_case_without_an_author_reaches_no_personal_memory(bob, owner):
    memory = _personal_memory(bob)
    suite = services.suite_create(actor=owner, name="Retrieval", kind="retrieval")
    EvalCase.objects.create(
        organization=suite.organization,
        suite=suite,
        input_text="What is Bob's locker code?",
        scopes=[memory.scope_key],
        created_by=None,
    )
    run = services.eval_run_start(actor=owner, suite=suite, candidate={"kind": "current"})
    services.eval_run_execute(run.pk)
    result = EvalResult.objects.get(run=run)
    assert result.baseline["memories"] == [] and "4417" not in json.dumps(result.baseline)


# --- saving a colleague's turn --------------------------------------------------------------


@pytest.fixture
def bobs_turn(bob, bob_agent):
    run = runtime.run_start(
        actor=member_actor(bob),
        agent=bob_agent,
        text="Please mail bob.private@example.com, my phone is 13812345678",
    )
    assert engine.run_execute(run.pk) == "completed"
    run.refresh_from_db()
    return run


def test_a_colleagues_turn_needs_personal_access_to_become_a_case(
    business_admin, bobs_turn, client_for, owner
):
    suite = services.suite_create(actor=owner, name="Turns")
    with nothing_changes(EvalCase), pytest.raises(NotPermitted):
        services.case_from_turn(actor=member_actor(business_admin), suite=suite, run=bobs_turn)
    with nothing_changes(EvalCase):
        response = client_for(business_admin).post(
            "/api/v1/evaluation/cases/from-turn/",
            {"suite": suite.pk, "run": bobs_turn.pk},
            format="json",
        )
    assert response.status_code == 403
    with nothing_changes(EvalCase):
        response = client_for(business_admin).post(
            "/evaluation/cases/from-turn/", {"suite": suite.pk, "run": bobs_turn.pk}
        )
    assert response.status_code in (302, 403)


def test_a_turn_saved_as_a_case_is_masked(bobs_turn, owner):
    suite = services.suite_create(actor=owner, name="Turns")
    case = services.case_from_turn(
        actor=owner, suite=suite, run=bobs_turn, title="bob.private@example.com asked"
    )
    stored = json.dumps(
        [case.title, case.input_text, case.conversation, case.tool_results, case.expectations],
        ensure_ascii=False,
    )
    assert "bob.private@example.com" not in stored and "13812345678" not in stored
    assert case.member_id == bobs_turn.member_id


def test_a_turn_case_is_404_to_an_admin_without_personal_access(
    bobs_turn, business_admin, client_for, owner
):
    suite = services.suite_create(actor=owner, name="Turns")
    case = services.case_from_turn(actor=owner, suite=suite, run=bobs_turn)
    services.case_create(actor=owner, suite=suite, data={"input": "hello"})
    run = services.eval_run_start(actor=owner, suite=suite, candidate={"kind": "current"})
    services.eval_run_execute(run.pk)
    client = client_for(business_admin)
    assert client.get(f"/api/v1/evaluation/cases/{case.pk}/").status_code == 404
    listed = [c["id"] for c in client.get("/api/v1/evaluation/cases/").json()["results"]]
    assert case.pk not in listed and len(listed) == 1
    results = client.get(f"/api/v1/evaluation/runs/{run.pk}/results/").json()["results"]
    assert [r["case"] for r in results] != [] and case.pk not in [r["case"] for r in results]
    page = client.get(f"/evaluation/runs/{run.pk}/")
    assert page.status_code == 200 and "Please mail" not in page.content.decode()
    # the owner (memory.personal) still reads it
    assert client_for(owner.member).get(f"/api/v1/evaluation/cases/{case.pk}/").status_code == 200


# --- finding 10 -------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["²", "١٢", "99999999999999999999999", "1e309", "\x00"])
def test_a_hostile_version_is_a_400(alice, client_for, owner, version):
    suite = services.suite_create(actor=owner, name="Turns")
    services.case_create(actor=owner, suite=suite, data={"input": "hello"})
    with nothing_changes(EvalRun):
        response = client_for(alice).post(
            "/api/v1/evaluation/runs/",
            {"suite": suite.pk, "candidate": {"kind": "template_version", "version": version}},
            format="json",
        )
    assert response.status_code == 400, response.content
    # a NUL is refused at the edge by the bounded JSON parser (cadre.api.parsers)
    expected = "parse_error" if "\x00" in version else "invalid_side"
    assert response.json()["error"]["code"] == expected


def test_hostile_case_fields_are_a_400(alice, client_for, owner):
    suite = services.suite_create(actor=owner, name="Turns")
    for body in (
        {"input": "x", "scopes": ["user:²"]},
        {"input": "x", "scopes": ["user:\x00"]},
        {"input": "x", "scopes": ["nonsense"]},
        {"input": "x", "expectations": {"expected_memories": [10**30]}},
        {"input": "x", "expectations": {"expected_memories": [1.5, "²"]}},
        {"input": "x", "as_of": "2024-13-45T10:00:00"},
        {"input": "x", "tool_results": [{"name": "t", "result": {"a": "\x00"}}]},
    ):
        with nothing_changes(EvalCase):
            response = client_for(alice).post(
                "/api/v1/evaluation/cases/", {"suite": suite.pk, **body}, format="json"
            )
        assert response.status_code == 400, (body, response.content)


def test_not_found_is_the_answer_for_another_organizations_turn(charlie, bobs_turn, org_b):
    from cadre.agents.evaluation.services import suite_create

    outsider = member_actor(charlie)
    suite = suite_create(actor=outsider, name="Mine")
    with nothing_changes(EvalCase), pytest.raises(NotFound):
        services.case_from_turn(actor=outsider, suite=suite, run=bobs_turn)


def test_hostile_jsonl_lines_are_a_400(alice, client_for, owner):
    suite = services.suite_create(actor=owner, name="Turns")
    for line in (
        "[" * 50_000,
        '{"input": "x\\u0000y"}',
        '{"input": "x\\ud800"}',
        '{"input": "x", "tool_results": [{"name": "t", "result": 1e309}]}',
        '{"input": "x", "scopes": ["user:\\u00b2"]}',
        '{"input": "x", "member": 99999999999999999999999}',
        '{"input": "x", "as_of": "2024-02-30T10:00:00"}',
        '{"input": "x", "conversation": ' + "[" * 40 + "]" * 40 + "}",
    ):
        upload = io.BytesIO(line.encode())
        upload.name = "cases.jsonl"
        with nothing_changes(EvalCase):
            response = client_for(alice).post(
                "/api/v1/evaluation/cases/import/",
                {"suite": suite.pk, "file": upload},
                format="multipart",
            )
        assert response.status_code == 400, (line[:80], response.content)
        assert response.json()["error"]["code"] == "invalid_jsonl"


@pytest.mark.parametrize(
    "candidate",
    [
        {"kind": "embedding", "embedding_model": "a\x00b"},
        {"kind": "model", "model_settings": {"model": "m\x00"}},
        {"kind": "model", "model_settings": {"model": "m", "temperature": 1e309}},
        {"kind": ["template_version"]},
        {"kind": "template_version", "version": True},
    ],
)
def test_a_hostile_side_is_a_400(alice, client_for, owner, candidate):
    suite = services.suite_create(actor=owner, name="Turns")
    services.case_create(actor=owner, suite=suite, data={"input": "hello"})
    # as a client sends it: 1e309 is a literal in the body (Python's encoder writes Infinity)
    body = json.dumps({"suite": suite.pk, "candidate": candidate}).replace("Infinity", "1e309")
    with nothing_changes(EvalRun):
        response = client_for(alice).post(
            "/api/v1/evaluation/runs/", body, content_type="application/json"
        )
    assert response.status_code == 400, response.content
