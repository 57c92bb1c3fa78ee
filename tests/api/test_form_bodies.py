"""Form and multipart bodies are held to what a JSON body is held to: a NUL character or a lone
surrogate in a field's name or value is a 400 `parse_error`, and JSON text a JSON field reads
from a form is bounded like a JSON body — never a 500, nothing stored. Model provider
parameters are objects: anything else is refused, and one already stored cannot fail runs."""

from __future__ import annotations

import io
from urllib.parse import urlencode

import pytest

from cadre.agents import providers
from cadre.agents.models import ModelProviderConfig
from cadre.errors import InvalidInput
from cadre.governance.models import AlertRule
from cadre.llm import provider_for
from cadre.skills.models import SkillCandidate
from cadre.tenancy.actors import member_actor
from cadre.tenancy.roles import SCOPES
from tests.refusals import nothing_changes

pytestmark = pytest.mark.django_db

FORM = "application/x-www-form-urlencoded"
PROVIDERS = "/api/v1/model-providers/"


@pytest.fixture
def api(alice, key_client):
    client = key_client(alice, sorted(SCOPES))
    client.raise_request_exception = False
    return client


def post(api, url, fields, encoding="form", content_type=FORM):
    if encoding == "form":
        return api.post(url, urlencode(fields), content_type=content_type)
    data: dict[str, list] = {}
    for name, value in fields:
        data.setdefault(name, []).append(value)
    return api.post(url, data, format="multipart")


def assert_refused(response, code):
    assert response.status_code == 400, response.content[:300]
    assert response.json()["error"]["code"] == code


ALERT_RULE = [("kind", "high_risk_requests"), ("name", "hostile")]


@pytest.mark.parametrize("encoding", ["form", "multipart"])
@pytest.mark.parametrize(
    "field",
    [("params.k", "a\x00b"), ("name", "a\x00b"), ("params.a\x00", "1"), ("a\x00", "1")],
    ids=["nested-value", "value", "nested-name", "name"],
)
def test_nul_in_a_form_field_is_refused_and_no_alert_rule_stored(api, encoding, field):
    with nothing_changes(AlertRule):
        response = post(api, "/api/v1/alert-rules/", [*ALERT_RULE, field], encoding)
    assert_refused(response, "parse_error")
    assert "NUL" in response.json()["error"]["message"]


def test_utf7_lone_surrogate_in_a_form_is_refused_and_nothing_stored(api):
    body = "kind=high_risk_requests&name=x&params.k=%2B2AA-"  # UTF-7 for U+D800
    with nothing_changes(AlertRule):
        response = api.post("/api/v1/alert-rules/", body, content_type=f"{FORM}; charset=utf-7")
    assert_refused(response, "parse_error")
    assert "surrogate" in response.json()["error"]["message"]


def test_a_clean_form_body_still_creates(api):
    response = post(api, "/api/v1/alert-rules/", ALERT_RULE)
    assert response.status_code == 201, response.content[:300]


@pytest.mark.parametrize("encoding", ["form", "multipart"])
def test_nul_in_memory_search_attributes_is_refused(api, encoding):
    with nothing_changes():
        response = post(
            api,
            "/api/v1/memories/search/",
            [("query", "tea"), ("attributes.k", "a\x00b")],
            encoding,
        )
    assert_refused(response, "parse_error")


@pytest.mark.parametrize("field", ["version", "ownerHandle"])
def test_nul_in_a_clawhub_tag_form_is_refused(api, field):
    with nothing_changes():
        response = post(
            api, "/api/v1/skills/some-skill/tags/stable", [("version", "1.0.0"), (field, "a\x00b")]
        )
    # ClawHub's wire format: errors as plain text.
    assert response.status_code == 400
    assert "NUL" in response.content.decode()


@pytest.mark.parametrize(
    "part",
    [
        b'name="f"; filename="a.zip"\r\nContent-Type: appl\x00ication/zip',
        b'name="n\x00"; filename="a.zip"\r\nContent-Type: application/zip',
        b'name="n\x00"',
    ],
    ids=["file-content-type", "file-field-name", "field-name"],
)
def test_nul_in_a_multipart_part_header_is_refused(api, part):
    body = (
        b'--B\r\nContent-Disposition: form-data; name="kind"\r\n\r\nhigh_risk_requests\r\n'
        b'--B\r\nContent-Disposition: form-data; name="name"\r\n\r\nx\r\n'
        b"--B\r\nContent-Disposition: form-data; " + part + b"\r\n\r\nxyz\r\n--B--\r\n"
    )
    with nothing_changes(AlertRule):
        response = api.post(
            "/api/v1/alert-rules/", body, content_type="multipart/form-data; boundary=B"
        )
    assert_refused(response, "parse_error")


@pytest.mark.parametrize("field", ["note", "changelog"])
def test_nul_in_a_skill_candidate_upload_field_is_refused(api, field):
    from hub.tests.skill_samples import make_zip, skill_files

    bundle = io.BytesIO(make_zip(skill_files()))
    bundle.name = "skill.zip"
    with nothing_changes(SkillCandidate):
        response = api.post(
            "/api/v1/skills/candidates/", {"bundle": bundle, field: "a\x00b"}, format="multipart"
        )
    assert_refused(response, "parse_error")


# --- JSON fields read from a form ------------------------------------------------------------

JSON_TEXT = {
    "deep": "[" * 100_000 + "]" * 100_000,
    "nested-past-the-bound": "[" * 100 + "]" * 100,
    "nul": '"a\\u0000b"',
    "nul-in-key": '{"a\\u0000": 1}',
    "surrogate": '{"a": "\\ud800"}',
    "infinity": "1e309",
    "nan": '{"a": NaN}',
}


@pytest.mark.parametrize("encoding", ["form", "multipart"])
@pytest.mark.parametrize("field", ["parameters", "prices"])
@pytest.mark.parametrize("text", JSON_TEXT.values(), ids=JSON_TEXT.keys())
def test_json_text_in_a_form_is_bounded_like_a_json_body(api, encoding, field, text):
    with nothing_changes(ModelProviderConfig):
        response = post(
            api, PROVIDERS, [("name", "p"), ("kind", "offline"), (field, text)], encoding
        )
    assert_refused(response, "invalid")
    assert field in response.json()["error"]["details"]


def test_an_object_in_a_form_json_field_is_stored(api):
    response = post(
        api, PROVIDERS, [("name", "p"), ("kind", "offline"), ("parameters", '{"temperature": 0.2}')]
    )
    assert response.status_code == 201, response.content[:300]
    assert ModelProviderConfig.objects.get().parameters == {"temperature": 0.2}


# --- provider parameters are objects ---------------------------------------------------------


@pytest.mark.parametrize("parameters", [["x"], "str", 5, True])
def test_provider_parameters_that_are_not_an_object_are_refused(api, parameters):
    with nothing_changes(ModelProviderConfig):
        response = api.post(
            PROVIDERS, {"name": "p", "kind": "offline", "parameters": parameters}, format="json"
        )
    assert_refused(response, "invalid")
    assert "parameters" in response.json()["error"]["details"]


@pytest.mark.parametrize("parameters", [["x"], "str", 5])
def test_the_provider_service_refuses_parameters_that_are_not_an_object(alice, parameters):
    actor = member_actor(alice)
    with nothing_changes(ModelProviderConfig), pytest.raises(InvalidInput):
        providers.provider_config_create(
            actor=actor, name="p", kind="offline", parameters=parameters
        )
    config = providers.provider_config_create(actor=actor, name="q", kind="offline")
    with nothing_changes(config), pytest.raises(InvalidInput):
        providers.provider_config_update(actor=actor, config=config, parameters=parameters)


def test_stored_parameters_that_are_not_an_object_do_not_break_calls(alice, api):
    config = providers.provider_config_create(actor=member_actor(alice), name="p", kind="offline")
    ModelProviderConfig.objects.filter(pk=config.pk).update(parameters=["x"])
    config.refresh_from_db()

    assert provider_for({"parameters": "also not an object"}, config).parameters == {}
    response = api.post(f"{PROVIDERS}{config.pk}/test/", {}, format="json")
    assert response.status_code == 200, response.content[:300]


def test_json_text_nested_past_the_bound_names_the_field(api):
    response = post(
        api, PROVIDERS, [("name", "p"), ("kind", "offline"), ("parameters", "[" * 100 + "]" * 100)]
    )
    assert_refused(response, "invalid")
    assert response.json()["error"]["message"] == (
        "parameters: parameters nests deeper than 64 levels."
    )
