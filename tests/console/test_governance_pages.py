"""Governance console pages: who may open them, the policy chain editor (checked against the
real chain's decisions) and the masking test bench. Confirmations, alerts and exports are in
test_governance_pages_*.py."""

from __future__ import annotations

import logging

import pytest
from django.urls import reverse

from cadre.agents.template_policy import template_policy_chain
from cadre.governance import policy
from cadre.governance.masking.services import masking_rule_create
from cadre.governance.models import AuditEvent, MaskingRule, PolicyChain, PseudonymMapping
from cadre.governance.policy.services import policy_chain_set
from cadre.tenancy.actors import member_actor
from tests.refusals import nothing_changes

pytestmark = pytest.mark.django_db

PAGES = [
    # (url name, a role that may open it, a role that may not)
    ("console:policies", "it_admin", "business_admin"),
    ("console:masking_bench", "auditor", "business_admin"),
    ("console:confirmations", "it_admin", "business_admin"),
    ("console:confirmation_history", "auditor", "skill_reviewer"),
    ("console:alerts", "auditor", "business_admin"),
    ("console:alert_rules", "it_admin", "auditor"),
    ("console:alert_rule_create", "it_admin", "auditor"),
    ("console:audit_exports", "auditor", "business_admin"),
]


@pytest.fixture
def template(org_a):
    from cadre.agents.models import AgentTemplate, TemplateVersion

    template = AgentTemplate.objects.create(
        organization=org_a, name="Sales assistant", code="sales"
    )
    TemplateVersion.objects.create(
        organization=org_a, template=template, number=1, name=template.name
    )
    return template


def _chain_id(template) -> int | None:
    chain = template_policy_chain(template) if template is not None else None
    return chain.pk if chain is not None else None


def _tool_call(org, tool: str, template=None):
    return policy.evaluate(
        organization=org,
        stage="tool_call",
        payload={"tool": tool, "arguments": {}, "risk": "low"},
        chain_id=_chain_id(template),
    )


def _edit(client, **data):
    return client.post(reverse("console:policy_chain_edit"), data)


def _version(org, template=None) -> int:
    if template is not None:
        chain = template_policy_chain(template)
    else:
        chain = PolicyChain.objects.filter(organization=org, scope="organization").first()
    return chain.version if chain else 0


# --- access -------------------------------------------------------------------------------


@pytest.mark.parametrize(("url_name", "allowed", "denied"), PAGES)
def test_each_page_opens_for_an_allowed_role_and_refuses_a_denied_one(
    make_member, browser, url_name, allowed, denied
):
    url = reverse(url_name)
    assert browser(make_member(roles=[allowed])).get(url).status_code == 200
    refused = browser(make_member(roles=[denied])).get(url)
    assert refused.status_code == 403
    assert "permission" in refused.content.decode()


@pytest.mark.parametrize("url_name", [name for name, _, _ in PAGES])
def test_anonymous_visitors_are_sent_to_sign_in(browser, db, url_name):
    response = browser().get(reverse(url_name))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("console:login"))


def test_the_navigation_links_the_built_governance_pages(alice, browser):
    page = browser(alice).get(reverse("console:home")).content.decode()
    for name in ("console:policies", "console:alerts", "console:confirmations"):
        assert f'href="{reverse(name)}"' in page


def test_outsider_gets_404_for_another_organizations_template_chain(charlie, browser, template):
    client = browser(charlie)
    assert client.get(reverse("console:policies"), {"template": template.pk}).status_code == 404
    posted = _edit(client, template=template.pk, version=0, op="add", plugin="tool_access")
    assert posted.status_code == 404
    assert not PolicyChain.objects.filter(scope="template").exists()


# --- policy chain editor ------------------------------------------------------------------


def test_the_page_shows_the_default_chain_before_anything_is_saved(alice, browser):
    page = browser(alice).get(reverse("console:policies")).content.decode()
    assert "The default chain (not saved yet)" in page
    for name in ("masking", "prompt_injection", "recipient_limit"):
        assert name in page


def test_adding_a_plugin_changes_what_the_chain_decides(alice, org_a, browser):
    assert _tool_call(org_a, "crm_delete").action == "allow"
    response = _edit(
        browser(alice),
        template="",
        version=0,
        op="add",
        plugin="tool_access",
        config='{"deny": ["crm_*"]}',
    )
    assert response.status_code == 302
    denied = _tool_call(org_a, "crm_delete")
    assert denied.action == "deny" and "denied by policy" in denied.reason
    assert _tool_call(org_a, "calendar_read").action == "allow"
    chain = PolicyChain.objects.get(organization=org_a, scope="organization")
    # the default plugins were kept, the new one appended
    assert [entry["plugin"] for entry in chain.plugins] == [
        "masking",
        "prompt_injection",
        "recipient_limit",
        "tool_access",
    ]
    event = AuditEvent.objects.filter(action="policy.chain_update").latest("sequence")
    assert event.actor_label == alice.display_name


def test_disabling_enabling_reordering_and_removing_a_plugin(alice, org_a, browser):
    policy_chain_set(
        actor=member_actor(alice),
        plugins=[
            {"plugin": "tool_access", "config": {"deny": ["crm_*"]}},
            {"plugin": "tool_access", "config": {"confirm": ["crm_*"]}},
        ],
    )
    client = browser(alice)
    assert _edit(client, version=1, op="toggle", index=0).status_code == 302
    assert _tool_call(org_a, "crm_delete").action == "require_confirmation"
    assert _edit(client, version=2, op="down", index=1).status_code == 302  # last: no move
    assert _edit(client, version=3, op="up", index=1).status_code == 302
    chain = PolicyChain.objects.get(organization=org_a, scope="organization")
    assert [entry["config"] for entry in chain.plugins] == [
        {"confirm": ["crm_*"]},
        {"deny": ["crm_*"]},
    ]
    assert _edit(client, version=4, op="toggle", index=1).status_code == 302
    assert _tool_call(org_a, "crm_delete").action == "deny"
    assert _edit(client, version=5, op="remove", index=1).status_code == 302
    assert _tool_call(org_a, "crm_delete").action == "require_confirmation"


def test_saving_settings_is_validated_with_a_clear_error_and_changes_nothing(alice, org_a, browser):
    policy_chain_set(
        actor=member_actor(alice),
        plugins=[{"plugin": "rate_limit", "config": {"limits": []}}],
    )
    client = browser(alice)
    bad_limit = '{"limits": [{"scope": "member", "limit": 0, "window_seconds": 60}]}'
    response = _edit(client, version=1, op="save", index=0, config=bad_limit, enabled="on")
    assert response.status_code == 400
    page = response.content.decode()
    assert "limits.0.limit: 0 is less than the minimum of 1" in page
    assert "limit&quot;: 0" in page  # what was typed is kept for correcting
    not_json = _edit(client, version=1, op="save", index=0, config='{"limits": [', enabled="on")
    assert not_json.status_code == 400
    assert "Not valid JSON (line 1, column" in not_json.content.decode()
    unknown = _edit(client, version=1, op="save", index=0, config='{"limitz": []}', enabled="on")
    assert unknown.status_code == 400
    assert "&#x27;limits&#x27; is a required property" in unknown.content.decode()
    assert "&#x27;limitz&#x27; was unexpected" in unknown.content.decode()
    bad_regex = _edit(
        client,
        version=1,
        op="add",
        plugin="content_rules",
        config='{"rules": [{"pattern": "(", "action": "deny"}]}',
    )
    assert bad_regex.status_code == 400
    assert "was not added" in bad_regex.content.decode()
    assert _version(org_a) == 1


def test_saving_settings_applies_them(alice, org_a, browser):
    policy_chain_set(
        actor=member_actor(alice),
        plugins=[{"plugin": "content_rules", "config": {"rules": []}}],
    )
    rules = '{"rules": [{"pattern": "wire transfer", "action": "require_confirmation"}]}'
    response = _edit(browser(alice), version=1, op="save", index=0, config=rules, enabled="on")
    assert response.status_code == 302
    result = policy.evaluate(organization=org_a, stage="output", payload="Do a wire transfer")
    assert result.action == "require_confirmation"


def test_a_stale_form_is_refused_with_409(alice, org_a, browser):
    policy_chain_set(actor=member_actor(alice), plugins=[{"plugin": "masking"}])
    policy_chain_set(actor=member_actor(alice), plugins=[{"plugin": "prompt_injection"}])
    response = _edit(browser(alice), version=1, op="remove", index=0)
    assert response.status_code == 409
    assert "changed by someone else (now version 2)" in response.content.decode()
    assert PolicyChain.objects.get(organization=org_a).plugins[0]["plugin"] == "prompt_injection"


def test_htmx_edits_answer_with_the_chain_fragment(alice, org_a, browser):
    response = browser(alice).post(
        reverse("console:policy_chain_edit"),
        {"version": 0, "op": "toggle", "index": 0},
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 200
    page = response.content.decode()
    assert page.startswith('<div id="policy-chain">') and "<html" not in page
    assert "version 1" in page
    # the "what agents run" panel is refreshed out of band, showing masking as off
    effective = page[page.index('id="effective-chain" hx-swap-oob="true"') :]
    assert '<code>masking</code> <span class="badge badge-archived">off</span>' in effective
    assert PolicyChain.objects.get(organization=org_a).plugins[0]["enabled"] is False


def test_a_template_adds_plugins_after_the_organizations_and_the_page_says_so(
    alice, org_a, browser, template
):
    client = browser(alice)
    rules = '{"rules": [{"pattern": "discount", "action": "deny", "reason": "no discounts"}]}'
    response = _edit(
        client, template=template.pk, version=0, op="add", plugin="content_rules", config=rules
    )
    assert response.status_code == 302
    assert response["Location"] == f"{reverse('console:policies')}?template={template.pk}"
    with_template = policy.evaluate(
        organization=org_a, stage="output", payload="10% discount", chain_id=_chain_id(template)
    )
    assert with_template.action == "deny" and with_template.reason == "no discounts"
    assert policy.evaluate(organization=org_a, stage="output", payload="10% discount").allowed
    page = client.get(reverse("console:policies"), {"template": template.pk}).content.decode()
    effective = page[page.index('id="effective-chain"') :]
    assert effective.index("masking") < effective.index("content_rules")
    assert "default" in effective and "template" in effective
    assert "adds its own plugins" in page


# --- masking test bench -----------------------------------------------------------------------

SAMPLE = "请联系王小明 13812345678，邮箱 li.na@example.com，客户 Contoso Pharma 的报价"


def test_the_bench_shows_detections_and_the_masked_text(alice, browser, caplog):
    masking_rule_create(
        actor=member_actor(alice),
        name="Customers",
        entity_type="CUSTOMER_NAME",
        kind="dictionary",
        terms=["Contoso Pharma"],
    )
    events_before = AuditEvent.objects.count()
    caplog.set_level(logging.DEBUG)
    response = browser(alice).post(reverse("console:masking_bench"), {"text": SAMPLE})
    assert response.status_code == 200
    assert (
        response["Cache-Control"].startswith("max-age=0") or "no-cache" in response["Cache-Control"]
    )
    page = response.content.decode()
    masked = page[page.index('data-testid="masked-text"') :]
    masked = masked[: masked.index("</pre>")]
    assert "<PHONE_1>" in masked.replace("&lt;", "<").replace("&gt;", ">")
    assert "13812345678" not in masked and "li.na@example.com" not in masked
    assert "Contoso Pharma" not in masked
    table = page[page.index('data-testid="detections"') :]
    phone_start = SAMPLE.index("13812345678")
    assert f"{phone_start}\u2013{phone_start + 11}" in table  # the span, start to end
    for entity in ("CN_PHONE", "EMAIL", "CUSTOMER_NAME"):
        assert entity in table
    # nothing of the text is stored, audited or logged
    assert AuditEvent.objects.count() == events_before
    assert not PseudonymMapping.objects.exists()
    assert "13812345678" not in caplog.text and "li.na@example.com" not in caplog.text


def test_the_bench_uses_the_organizations_masking_settings(alice, browser, template):
    policy_chain_set(
        actor=member_actor(alice),
        plugins=[{"plugin": "masking", "config": {"default": "redact"}}],
    )
    client = browser(alice)
    page = client.post(reverse("console:masking_bench"), {"text": SAMPLE}).content.decode()
    assert "[CN_PHONE]" in page and "[EMAIL]" in page
    partial = client.post(
        reverse("console:masking_bench"), {"text": SAMPLE, "mode": "partial"}
    ).content.decode()
    assert "138****5678" in partial
    policy_chain_set(actor=member_actor(alice), plugins=[])
    unmasked = client.post(reverse("console:masking_bench"), {"text": SAMPLE}).content.decode()
    assert "The masking plugin is not enabled in this chain" in unmasked


def test_the_bench_refuses_empty_or_oversized_text(alice, browser):
    client = browser(alice)
    assert client.post(reverse("console:masking_bench"), {"text": ""}).status_code == 400
    huge = client.post(reverse("console:masking_bench"), {"text": "x" * 20_001})
    assert huge.status_code == 400
    assert "at most 20000 characters" in huge.content.decode()


def test_the_bench_answers_htmx_with_the_result_fragment(alice, browser):
    response = browser(alice).post(
        reverse("console:masking_bench"), {"text": SAMPLE}, HTTP_HX_REQUEST="true"
    )
    page = response.content.decode()
    assert page.startswith('<div id="masking-result">') and "CN_PHONE" in page


def test_an_outsider_templates_are_not_offered_on_the_bench(charlie, browser, template):
    with nothing_changes(PseudonymMapping):
        response = browser(charlie).post(
            reverse("console:masking_bench"), {"text": SAMPLE, "template": template.pk}
        )
    assert response.status_code == 400  # not one of the choices


def test_organization_masking_rules_are_managed_from_the_bench(
    alice, make_member, charlie, browser
):
    client = browser(alice)
    created = client.post(
        reverse("console:masking_rule_create"),
        {
            "name": "Customers",
            "entity_type": "customer_name",
            "kind": "dictionary",
            "terms": "Contoso Pharma\nFabrikam",
        },
    )
    assert created.status_code == 302
    rule = MaskingRule.objects.get()
    assert rule.entity_type == "CUSTOMER_NAME" and rule.term_list == ["Contoso Pharma", "Fabrikam"]
    event = AuditEvent.objects.get(action="masking_rule.create")
    assert "Fabrikam" not in str(event.changes)  # the terms are confidential
    page = client.get(reverse("console:masking_bench")).content.decode()
    assert "2 terms" in page and "Fabrikam" not in page

    def detected() -> bool:
        result = client.post(reverse("console:masking_bench"), {"text": "Call Fabrikam today"})
        page = result.content.decode()
        masked = page[page.index('data-testid="masked-text"') :].split("</pre>")[0]
        return "Fabrikam" not in masked and "CUSTOMER_NAME" in masked

    assert detected()
    assert client.post(reverse("console:masking_rule_toggle", args=[rule.pk])).status_code == 302
    assert not detected()
    for outsider in (charlie,):
        other = browser(outsider)
        assert other.post(reverse("console:masking_rule_toggle", args=[rule.pk])).status_code == 404
        assert other.post(reverse("console:masking_rule_delete", args=[rule.pk])).status_code == 404
    auditor = browser(make_member(roles=["auditor"]))
    assert auditor.post(reverse("console:masking_rule_delete", args=[rule.pk])).status_code == 403
    assert client.post(reverse("console:masking_rule_delete", args=[rule.pk])).status_code == 302
    assert not MaskingRule.objects.exists()


def test_a_bad_masking_rule_is_refused_next_to_the_field(alice, browser):
    response = browser(alice).post(
        reverse("console:masking_rule_create"),
        {"name": "Codes", "entity_type": "PROJECT_CODE", "kind": "pattern", "pattern": "a*"},
    )
    assert response.status_code == 400
    assert "The pattern matches the empty string." in response.content.decode()
    assert not MaskingRule.objects.exists()
