"""Every POST on an /api/v1/ collection takes JSON, form and multipart bodies: 2xx, or a 4xx
with an error code for a body the endpoint does not accept — never a 5xx (issue 14).

Routes are discovered from the URL resolver; one with no body in CREATE_BODIES fails
`test_every_collection_post_has_a_body`, so a new endpoint is never silently left out.
"""

from __future__ import annotations

import hashlib
import io
import itertools
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from cadre.governance.models import AuditEvent
from cadre.memory import services as memory_services
from cadre.tenancy.actors import member_actor
from cadre.tenancy.models import Member
from tests.api.request_bodies import FORMATS, has_file, post_as
from tests.api.tenant_objects import FACTORIES
from tests.api.test_cross_tenant import PLAIN_TEXT_ERROR_PREFIX, api_routes
from tests.factories import DepartmentFactory, MemberFactory, PositionFactory

_serial = itertools.count(1)


@dataclass(frozen=True)
class Body:
    make: Callable[[Member], dict]  # the owner of the organization -> a valid body
    status: int = 201  # what a successful POST answers
    formats: tuple[str, ...] = tuple(FORMATS)  # the encodings it must succeed with
    why: str = ""  # why some encoding is not accepted


def _feedback(owner: Member, stated: str, correction: str) -> dict:
    memory_services.memory_add(
        actor=member_actor(owner),
        scope="user",
        kind="requirement",
        content=stated,
        source_kind="user_statement",
    )
    return {"text": correction}


def _model(name: str):
    return next(model for model in FACTORIES if model.__name__ == name)


def _make(name: str, owner: Member):
    return FACTORIES[_model(name)](owner)


def _bundle(owner: Member) -> io.BytesIO:
    from hub.tests.skill_samples import make_zip, skill_files

    name = f"body-skill-{next(_serial)}"
    archive = io.BytesIO(make_zip(skill_files(name), prefix=f"{name}/"))
    archive.name = f"{name}.zip"
    return archive


def _clawhub_files(owner: Member) -> tuple[str, list[dict]]:
    """Files sent through upload tickets, as `clawhub publish` does before it publishes."""
    from rest_framework.test import APIClient

    from hub.tests.skill_samples import skill_files
    from hub.tests.test_clawhub_api import _upload

    client = APIClient()
    client.force_login(owner.user)
    name = f"claw-skill-{next(_serial)}"
    return name, [_upload(client, path, content) for path, content in skill_files(name).items()]


def _clawhub_publish(owner: Member) -> dict:
    slug, files = _clawhub_files(owner)
    return {"slug": slug, "version": "1.0.0", "files": files}


def _n() -> int:
    return next(_serial)


def _directory_connector(owner: Member):
    """A Feishu connector: a platform with a contact directory (the task is not run here)."""
    from cadre.tenancy.actors import member_actor
    from connectors.base.services import connector_create

    return connector_create(
        actor=member_actor(owner),
        platform="feishu",
        name=f"Directory {_n()}",
        credentials={"app_id": "cli_body", "app_secret": "body-secret"},
    )


CREATE_BODIES: dict[str, Body] = {
    "department-list": Body(lambda o: {"name": f"Dept {_n()}", "code": f"dept-{_n()}"}),
    "position-list": Body(lambda o: {"name": f"Role {_n()}", "code": f"role-{_n()}"}),
    "member-list": Body(
        lambda o: {
            "display_name": "Dana",
            "email": f"dana{_n()}@acme.test",
            "roles": ["employee"],
            "positions": [PositionFactory(organization=o.organization).pk],
        }
    ),
    "member-invite": Body(lambda o: {"email": f"erin{_n()}@acme.test", "roles": ["employee"]}),
    "im-identity-list": Body(
        lambda o: {
            "member": MemberFactory(organization=o.organization).pk,
            "platform": "slack",
            "platform_user_id": f"U{_n():06d}",
        }
    ),
    "api-key-list": Body(lambda o: {"name": f"CI {_n()}", "scopes": ["org:read", "audit:read"]}),
    "grant-list": Body(
        lambda o: {
            "member": MemberFactory(organization=o.organization).pk,
            "permission": "member.manage",
            "target_type": "department",
            "target_id": DepartmentFactory(organization=o.organization).pk,
        }
    ),
    "audit-export-list": Body(
        lambda o: {"formats": ["jsonl", "csv"], "filters": {"action": "department.create"}},
        status=202,
    ),
    "budget-list": Body(
        lambda o: {
            "scope": "organization",
            "period": "monthly",
            "metric": "tokens",
            "limit": "1000",
        }
    ),
    "alert-rule-list": Body(
        lambda o: {"name": f"Spike {_n()}", "kind": "denied_spike", "severity": "critical"}
    ),
    "memory-list": Body(
        lambda o: {
            "content": f"The quarterly report is due on the {_n()}th.",
            "tags": ["reports", "deadlines"],
            "attributes": {"project": "falcon"},
        }
    ),
    "memory-delete-by-filter": Body(lambda o: {"tags": ["nothing-tagged-so"]}, status=200),
    # A correction writes only when it contradicts something: the owner said Erin first.
    "memory-feedback": Body(
        lambda o: _feedback(o, "Reports go to Erin.", "Reports go to Dana, not Erin.")
    ),
    "memory-search": Body(
        lambda o: {"query": "quarterly report", "top_k": 5, "kinds": ["fact"]}, status=200
    ),
    "masking-preview": Body(lambda o: {"text": "Call me on 13800138000."}, status=200),
    "masking-rule-list": Body(
        lambda o: {
            "name": f"Codename {_n()}",
            "entity_type": "PROJECT",
            "kind": "dictionary",
            "terms": ["Falcon", "Osprey"],
            "is_active": True,
        }
    ),
    "agent-template-list": Body(
        lambda o: {
            "name": f"Analyst {_n()}",
            "code": f"analyst-{_n()}",
            "agent_md": "# Persona",
            "target_positions": ["analyst"],
            "model_settings": {"provider": "offline", "model": "offline-1"},
        }
    ),
    "model-provider-list": Body(
        lambda o: {"name": f"Offline {_n()}", "kind": "offline", "timeout_seconds": 30}
    ),
    "mcp-server-list": Body(
        lambda o: {
            "name": f"crm-{_n()}",
            "transport": "streamable_http",
            "url": "https://mcp.example.test/mcp",
            "credentials": {"Authorization": "Bearer t"},
        }
    ),
    "deployment-list": Body(
        lambda o: {
            "name": f"Analysts {_n()}",
            "template": _make("AgentTemplate", o).pk,
            "positions": [PositionFactory(organization=o.organization).pk],
            "channels": ["console"],
        }
    ),
    "run-list": Body(lambda o: {"agent": _make("Agent", o).pk, "text": "hello"}, status=202),
    "event-trigger-list": Body(
        lambda o: {
            "name": f"Tickets {_n()}",
            "deployment": _make("Deployment", o).pk,
            "member": o.pk,
            "tolerance_seconds": 120,
        }
    ),
    "agent-subscription-list": Body(
        lambda o: {
            "subscriber": _make("Agent", o).pk,
            "publisher": _make("Agent", o).pk,
            "topics": ["pricing"],
            "max_per_hour": 5,
        }
    ),
    "connector-list": Body(
        lambda o: {
            "platform": "webhook",
            "name": f"Hook {_n()}",
            "credentials": {"signing_secret": "body-secret-0123456789"},
        }
    ),
    "connector-binding-list": Body(
        lambda o: {
            "connector": _make("Connector", o).pk,
            "name": "Sales chats",
            "chat_ids": ["oc_1", "oc_2"],
            "positions": [PositionFactory(organization=o.organization).pk],
        }
    ),
    "directory-sync-list": Body(
        lambda o: {"connector": _directory_connector(o).pk},
        status=202,
    ),
    "hub-publish": Body(
        lambda o: {"bundle": _bundle(o), "version": "1.0.0", "changelog": "First cut"},
        formats=("multipart",),
        why="the bundle is a file upload",
    ),
    "hub-namespaces": Body(
        lambda o: {"handle": f"acme-team-{_n()}", "display_name": "Team"},
        formats=("json",),
        why="the Hub's namespace API parses JSON only (415 unsupported_media_type otherwise)",
    ),
    "skill-candidate-list": Body(
        lambda o: {"bundle": _bundle(o), "note": "From the sales playbook"},
        formats=("multipart",),
        why="the bundle is a file upload",
    ),
    "clawhub-skills": Body(
        _clawhub_publish,
        status=200,
        formats=("json",),
        why="ClawHub's publish sends `files` as a JSON list of objects",
    ),
    "clawhub-upload-url": Body(
        lambda o: {
            "path": "SKILL.md",
            "size": 12,
            "sha256": hashlib.sha256(b"# A skill\n\n").hexdigest(),
            "contentType": "text/markdown",
        },
        status=200,
        formats=("json",),
        why="ClawHub's CLI sends JSON; the announced size must be a JSON number, not text",
    ),
}


def _eval_turn(owner: Member) -> dict:
    """A suite and a completed turn of the owner's own agent, for "add to evaluation"."""
    from cadre.agents.runtime.lifecycle import execution as engine

    run = _make("Run", owner)
    engine.run_execute(run.pk)
    suite = _make("EvalSuite", owner)
    return {"suite": suite.pk, "run": run.pk, "required_facts": ["hello"]}


def _eval_jsonl(owner: Member) -> dict:
    upload = io.BytesIO(b'{"input": "hi", "required_facts": ["hello"]}\n{"input": "bye"}\n')
    upload.name = "cases.jsonl"
    return {"suite": _make("EvalSuite", owner).pk, "file": upload}


def _embedding_copy(owner: Member) -> dict:
    """A new id for the active embedding model (same provider, name and size), re-embedded
    for the owner's organization: with no memory missing a vector under it, it can be
    switched to."""
    from cadre.memory import embeddings

    active = embeddings.active_model(owner.organization)
    copy = embeddings.register_model(
        f"{active.pk}-copy-{_n()}", active.provider, active.name, active.dimension
    )
    embeddings.mark_building(copy, owner.organization)
    return {"model": copy.pk}


CREATE_BODIES.update(
    {
        "embedding-model-activate": Body(_embedding_copy, status=200),
        "eval-suite-list": Body(
            lambda o: {"name": f"Suite {_n()}", "kind": "retrieval", "regression_threshold": 0.1}
        ),
        "eval-case-list": Body(
            lambda o: {
                "suite": _make("EvalSuite", o).pk,
                "input": "What is the discount?",
                "required_facts": ["5 percent"],
                "forbidden_facts": ["50 percent"],
                "scopes": ["organization"],
                "expected_policy": "allow",
            }
        ),
        "eval-case-from-turn": Body(_eval_turn),
        "eval-case-import": Body(
            _eval_jsonl, formats=("multipart",), why="the cases are a JSONL file upload"
        ),
        "eval-run-list": Body(
            lambda o: {
                "suite": _make("EvalCase", o).suite_id,
                "candidate": {"kind": "model", "model_settings": {"model": "offline-2"}},
            },
            status=202,
        ),
    }
)


def _collection_posts() -> list[str]:
    return sorted(
        route.name
        for route in api_routes()
        if not route.kwargs and "post" in route.methods and route.name
    )


def test_every_collection_post_has_a_body():
    missing = sorted(set(_collection_posts()) - set(CREATE_BODIES))
    assert not missing, "add a body to CREATE_BODIES for: " + ", ".join(missing)
    assert len(_collection_posts()) >= 25


def _url(name: str) -> str:
    route = next(route for route in api_routes() if route.name == name)
    return route.url_for(None)


def _assert_refusal_has_a_code(name: str, response) -> None:
    assert 400 <= response.status_code < 500, (name, response.status_code, response.content)
    if response["Content-Type"].startswith("application/json"):
        assert response.json()["error"]["code"], response.content
    else:  # ClawHub's CLI prints a plain-text error body
        assert name.startswith(PLAIN_TEXT_ERROR_PREFIX), (name, response.content)
        assert response.content.strip()


@pytest.mark.parametrize("body_format", FORMATS)
@pytest.mark.parametrize("name", sorted(CREATE_BODIES))
def test_collection_post_takes_json_form_and_multipart(alice, client_for, name, body_format):
    body = CREATE_BODIES[name]
    data = body.make(alice)
    if body_format == "json" and has_file(data):
        data = {key: value for key, value in data.items() if not hasattr(value, "read")}
    audit_before = AuditEvent.objects.filter(organization=alice.organization).count()

    response = post_as(client_for(alice), _url(name), data, body_format)

    assert response.status_code < 500, (name, body_format, response.content)
    audit_after = AuditEvent.objects.filter(organization=alice.organization).count()
    if body_format in body.formats:
        assert response.status_code == body.status, (name, body_format, response.content)
        if body.status == 201:
            assert audit_after > audit_before, f"{name} created something without an audit event"
    else:
        _assert_refusal_has_a_code(name, response)
        assert audit_after == audit_before, f"{name} refused the body but recorded a change"
