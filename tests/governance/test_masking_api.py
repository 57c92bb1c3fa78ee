"""Masking test bench API and organization rules: permissions, tenancy, validation, storage."""

from __future__ import annotations

import pytest

from cadre.governance.masking import services
from cadre.governance.masking.engine import get_engine
from cadre.governance.models import AuditEvent, MaskingRule, PseudonymMapping
from cadre.tenancy.actors import member_actor

PREVIEW = "/api/v1/masking/preview"
RULES = "/api/v1/masking/rules/"


@pytest.fixture
def phoenix_rule(alice):
    return services.masking_rule_create(
        actor=member_actor(alice),
        name="Code names",
        entity_type="PROJECT_CODE",
        kind="dictionary",
        terms=["凤凰计划", "Project Phoenix"],
    )


@pytest.mark.django_db
def test_owner_previews_detections_and_masked_text(client_for, alice):
    response = client_for(alice).post(
        PREVIEW,
        {
            "text": "手机13812345678，邮箱a@example.com",
            "policy": {"modes": {"CN_PHONE": "partial"}},
        },
        format="json",
    )
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["text"] == "手机138****5678，邮箱<EMAIL_1>"
    assert [(d["type"], d["start"], d["end"]) for d in body["detections"]] == [
        ("CN_PHONE", 2, 13),
        ("EMAIL", 16, 29),
    ]
    assert all(0 < d["score"] <= 1 for d in body["detections"])


@pytest.mark.django_db
def test_preview_in_pseudonymize_mode_stores_no_mapping(client_for, alice):
    response = client_for(alice).post(PREVIEW, {"text": "13812345678"}, format="json")
    assert response.json()["text"] == "<PHONE_1>"
    assert not PseudonymMapping.objects.exists()


@pytest.mark.django_db
def test_auditor_may_preview(client_for, make_member):
    auditor = make_member(roles=["auditor"])
    response = client_for(auditor).post(PREVIEW, {"text": "a@example.com"}, format="json")
    assert response.status_code == 200


@pytest.mark.django_db
def test_employee_gets_403(client_for, bob):
    response = client_for(bob).post(PREVIEW, {"text": "a@example.com"}, format="json")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "permission_denied"


@pytest.mark.django_db
@pytest.mark.parametrize(
    "payload",
    [
        {},
        {"text": ""},
        {"text": 12},
        {"text": "x" * (services.MAX_PREVIEW_CHARS + 1)},
        {"text": "ok", "policy": {"default": "shred"}},
        {"text": "ok", "policy": {"modes": {"EMAIL": "burn"}}},
    ],
)
def test_bad_input_gets_400_envelope(client_for, alice, payload):
    response = client_for(alice).post(PREVIEW, payload, format="json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid" and error["message"]


@pytest.mark.django_db
def test_org_dictionary_applies_only_to_its_organization(client_for, alice, charlie, phoenix_rule):
    text = "凤凰计划下周启动，Project Phoenix kickoff"
    mine = (
        client_for(alice)
        .post(PREVIEW, {"text": text, "policy": {"default": "redact"}}, format="json")
        .json()
    )
    assert mine["text"] == "[PROJECT_CODE]下周启动，[PROJECT_CODE] kickoff"
    theirs = client_for(charlie).post(PREVIEW, {"text": text}, format="json").json()
    assert theirs["text"] == text and theirs["detections"] == []


@pytest.mark.django_db
def test_org_pattern_rule_and_cache_refresh_on_change(alice, org_a, org_b):
    actor = member_actor(alice)
    rule = services.masking_rule_create(
        actor=actor,
        name="Customer ids",
        entity_type="CUSTOMER_ID",
        kind="pattern",
        pattern=r"CUST-\d{6}",
    )
    text = "客户CUST-004211投诉"
    assert [
        (d.type, text[d.start : d.end]) for d in get_engine().analyze(text, organization=org_a)
    ] == [("CUSTOMER_ID", "CUST-004211")]
    assert get_engine().analyze(text, organization=org_b) == []
    services.masking_rule_update(actor=actor, rule=rule, is_active=False)
    assert get_engine().analyze(text, organization=org_a) == []
    actions = list(AuditEvent.objects.filter(organization=org_a).values_list("action", flat=True))
    assert "masking_rule.create" in actions and "masking_rule.update" in actions


@pytest.mark.django_db
def test_dictionary_terms_are_encrypted_at_rest(phoenix_rule):
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT terms FROM governance_maskingrule WHERE id = %s", [phoenix_rule.pk])
        (raw,) = cursor.fetchone()
    assert "凤凰" not in raw and "Phoenix" not in raw
    assert MaskingRule.objects.get(pk=phoenix_rule.pk).term_list == ["凤凰计划", "Project Phoenix"]


@pytest.mark.django_db
def test_rules_api_create_list_and_tenancy(client_for, alice, bob, charlie):
    created = client_for(alice).post(
        RULES,
        {
            "name": "Customers",
            "entity_type": "CUSTOMER_NAME",
            "kind": "dictionary",
            "terms": ["华信科技", "Globex"],
        },
        format="json",
    )
    assert created.status_code == 201, created.json()
    rule_id = created.json()["id"]
    assert created.json()["terms"] == ["华信科技", "Globex"]
    assert client_for(alice).get(RULES).json()["results"][0]["id"] == rule_id
    assert client_for(bob).get(RULES).status_code == 403
    assert client_for(charlie).get(f"{RULES}{rule_id}/").status_code == 404
    assert client_for(charlie).get(RULES).json()["results"] == []


@pytest.mark.django_db
@pytest.mark.parametrize(
    "payload",
    [
        {"name": "x", "entity_type": "EMAIL", "kind": "dictionary", "terms": ["a"]},
        {"name": "x", "entity_type": "lower", "kind": "dictionary", "terms": ["a"]},
        {"name": "x", "entity_type": "CODE", "kind": "pattern", "pattern": "("},
        {"name": "x", "entity_type": "CODE", "kind": "pattern", "pattern": "a*"},
        {"name": "x", "entity_type": "CODE", "kind": "dictionary", "terms": []},
    ],
)
def test_rules_api_rejects_bad_rules(client_for, alice, payload):
    response = client_for(alice).post(RULES, payload, format="json")
    assert response.status_code == 400, response.json()
    assert response.json()["error"]["details"]
