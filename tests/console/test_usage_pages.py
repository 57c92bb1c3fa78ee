"""Usage page: totals, the daily chart and the breakdown match the per-call records; the CSV
export; budgets added, changed and deleted from the console (audited); who may see and change."""

from __future__ import annotations

import csv
import io
import re
from decimal import Decimal

import pytest
from django.urls import reverse

from cadre.governance import budgets
from cadre.governance.models import Alert, AuditEvent, Budget, UsageRecord
from cadre.llm import Usage
from cadre.tenancy.actors import member_actor
from tests.factories import DepartmentFactory, MemberFactory

pytestmark = pytest.mark.django_db


def _call(member, input_tokens, output_tokens, cost="0", model="gpt-4o", purpose="run"):
    account = budgets.account_for_member(member, purpose=purpose)
    record = budgets.usage_reserve(account=account, tokens=1, cost=Decimal(0), model=model)
    return budgets.usage_settle(
        record=record, usage=Usage(input_tokens, output_tokens), cost=Decimal(cost)
    )


@pytest.fixture
def spending(org_a):
    sales = DepartmentFactory(organization=org_a, name="Sales")
    support = DepartmentFactory(organization=org_a, name="Support")
    eve = MemberFactory(organization=org_a, display_name="Eve", department=sales)
    sam = MemberFactory(organization=org_a, display_name="Sam", department=support)
    _call(eve, 100, 20, "0.5")
    _call(eve, 300, 80, "1.25", model="gpt-4o-mini")
    _call(sam, 50, 10, "0.1", purpose="memory.extraction")
    return sales, support


def _number(page: str, total: str) -> str:
    return re.search(rf'data-total="{total}">([^<]+)<', page).group(1)


def test_usage_page_totals_chart_and_breakdown_match_the_records(alice, browser, spending):
    page = browser(alice).get(reverse("console:usage")).content.decode()
    records = UsageRecord.objects.filter(status="settled")
    assert _number(page, "calls") == str(records.count()) == "3"
    assert _number(page, "tokens") == "560"
    assert _number(page, "cost") == "$1.85"  # in the price currency (USD unless set)
    # The daily chart: today's bar holds every token.
    assert re.search(r'<rect [^>]*data-tokens="560"', page)
    # By department (the default): Sales 500 tokens, Support 60, with bars.
    assert page.index(">Sales<") < page.index(">Support<")
    sales_row = page[page.index(">Sales<") : page.index(">Support<")]
    assert 'data-col="total">500<' in sales_row and ">$1.75<" in sales_row
    by_model = browser(alice).get(reverse("console:usage") + "?by=model").content.decode()
    assert ">gpt-4o-mini<" in by_model and 'data-col="total">380<' in by_model
    by_purpose = browser(alice).get(reverse("console:usage") + "?by=purpose").content.decode()
    assert ">memory.extraction<" in by_purpose


def test_csv_export_has_one_row_per_call(alice, browser, spending):
    response = browser(alice).get(reverse("console:usage_export") + "?window=30d")
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert len(rows) == 3
    assert {r["department"] for r in rows} == {"Sales", "Support"}
    assert sum(Decimal(r["cost"]) for r in rows) == Decimal("1.85")


def test_budget_added_from_the_console_counts_this_periods_usage(alice, browser, spending):
    sales, _ = spending
    client = browser(alice)
    response = client.post(
        reverse("console:budget_create"),
        {
            "scope": "department",
            "department": sales.pk,
            "period": "monthly",
            "metric": "tokens",
            "limit": "1000",
            "enforcement": "hard",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    budget = Budget.objects.get()
    assert budget.used_tokens == 500
    page = client.get(reverse("console:usage")).content.decode()
    assert "department Sales" in page and "(50.0 %)" in page
    assert AuditEvent.objects.filter(action="budget.create").count() == 1
    edit = client.post(
        reverse("console:budget_edit", args=[budget.pk]),
        {"limit": "400", "enforcement": "soft", "is_active": "on"},
    )
    assert edit.status_code == 302
    budget.refresh_from_db()
    assert (budget.limit, budget.enforcement) == (400, "soft")
    # 500 of a lowered 400: both alerts are due at once.
    assert sorted(Alert.objects.values_list("details__level", flat=True)) == [80, 100]
    assert client.post(reverse("console:budget_delete", args=[budget.pk])).status_code == 302
    assert not Budget.objects.exists()
    assert AuditEvent.objects.filter(action__startswith="budget.").count() == 3


def test_a_department_budget_without_its_department_shows_the_error_and_stores_nothing(
    alice, browser
):
    response = browser(alice).post(
        reverse("console:budget_create"),
        {"scope": "department", "period": "monthly", "metric": "tokens", "limit": "10"},
    )
    assert response.status_code == 200
    assert "This field is required." in response.content.decode()
    assert not Budget.objects.exists()


def test_employee_sees_no_usage_and_outsider_gets_404_for_a_budget(alice, bob, charlie, browser):
    budget = budgets.budget_create(
        actor=member_actor(alice), scope="organization", period="daily", metric="tokens", limit=10
    )
    assert browser(bob).get(reverse("console:usage")).status_code == 403
    assert browser(bob).post(reverse("console:budget_delete", args=[budget.pk])).status_code == 403
    outsider = browser(charlie)
    assert outsider.get(reverse("console:budget_edit", args=[budget.pk])).status_code == 404
    assert outsider.post(reverse("console:budget_delete", args=[budget.pk])).status_code == 404
    assert Budget.objects.filter(pk=budget.pk).exists()


def test_a_budget_alert_names_its_budget_on_the_alerts_pages(alice, browser, spending):
    sales, _ = spending
    budgets.budget_create(
        actor=member_actor(alice),
        scope="department",
        department=sales,
        period="monthly",
        metric="tokens",
        limit=600,
    )
    alert = Alert.objects.get()  # 500 of 600: the 80 % alert, at once
    client = browser(alice)
    listing = client.get(reverse("console:alerts")).content.decode()
    assert "80 % of the monthly tokens budget of department Sales used" in listing
    assert "deleted rule" not in listing
    detail = client.get(reverse("console:alert", args=[alert.pk])).content.decode()
    assert f'href="{reverse("console:usage")}">budget<' in detail


@pytest.mark.parametrize(
    ("amount", "currency", "shown"),
    [
        ("0", "USD", "$0.00"),
        ("0.000001", "USD", "< $0.0001"),
        ("0.0012", "USD", "$0.0012"),
        ("0.001234", "USD", "$0.0012"),
        ("0.05", "USD", "$0.05"),
        ("0.35", "CNY", "¥0.35"),
        ("1234.5", "EUR", "€1,234.50"),
        ("1.85", "CHF", "1.85 CHF"),
    ],
)
def test_costs_show_their_currency_and_the_digits_that_matter(amount, currency, shown):
    from cadre.console.templatetags.console import format_money

    assert format_money(Decimal(amount), currency) == shown


def test_usage_page_shows_costs_in_the_configured_currency(alice, browser, spending, settings):
    settings.PRICE_CURRENCY = "CNY"
    page = browser(alice).get(reverse("console:usage")).content.decode()
    assert _number(page, "cost") == "¥1.85"
    assert "Cost · CNY" in page and "Cost (CNY)" in page
    # The chart's axes say what they measure: tokens up to the busiest day, and the days.
    assert 'data-axis="y-max">560<' in page and 'data-axis-title="y">Tokens<' in page
    assert re.search(r'data-axis="x"[^>]*>\d{4}-\d{2}-\d{2}<', page)
    form = browser(alice).get(reverse("console:budget_create")).content.decode()
    assert "an amount in CNY" in form
