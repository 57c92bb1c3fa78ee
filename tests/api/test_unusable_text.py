"""Text no layer can hold is refused at the edge: NUL characters, lone surrogates and non-finite
numbers in a JSON body, NUL in a URL. Each was a 500 from whichever layer met it first
(PostgreSQL, the renderer echoing a choice, an integer column given infinity); now a 400 that
stores nothing."""

from __future__ import annotations

import pytest
from django.urls import reverse

from cadre.api.parsers import json_body_problem
from cadre.tenancy.models import Department
from cadre.tenancy.roles import SCOPES

RAW_BODIES = {
    "nul in a value": '{"name": "Sales\\u0000"}',
    "lone surrogate in a value": '{"name": "Sales \\ud800"}',
    "lone surrogate in a key": '{"name": "Sales", "\\udfff": 1}',
    "infinity for a related id": '{"name": "Sales", "parent": 1e309}',
    "nul in a nested list": '{"name": "Sales", "x": [[["\\u0000"]]]}',
}


@pytest.mark.parametrize("body", RAW_BODIES.values(), ids=RAW_BODIES.keys())
def test_unusable_text_in_a_json_body_is_a_400_and_stores_nothing(alice, key_client, body):
    client = key_client(alice, sorted(SCOPES))
    before = Department.objects.count()
    response = client.generic(
        "POST", reverse("department-list"), body, content_type="application/json"
    )
    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] == "parse_error"
    assert Department.objects.count() == before


def test_the_message_names_where_and_what():
    assert json_body_problem({"a": [1, {"b": "x\x00"}]}) == "body.a[1].b contains a NUL character."
    assert json_body_problem({"n": float("inf")}) == "body.n is not a finite number."
    assert json_body_problem({"ok": ["text", 1.5, None, True]}) is None


@pytest.mark.parametrize(
    "url",
    ["/api/v1/hub/search/?q=%00", "/api/v1/hub/search/?%00=1", "/api/v1/hub/skills/a%00/b/"],
)
def test_nul_in_a_url_is_a_400(alice, key_client, url):
    response = key_client(alice, sorted(SCOPES)).get(url)
    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] == "bad_request"
