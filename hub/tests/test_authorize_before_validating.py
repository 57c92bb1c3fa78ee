"""Hub writes check who may act (and what they may see) before they read the body.

A caller who may not act gets 403 — or 404 for a skill they cannot see — whatever the body, so
a 400 never tells a refused caller what a valid body would be, and nothing is stored. The
caller who may act still gets the 400 with its field errors.
"""

from __future__ import annotations

import pytest

from hub.models import DistTag, HubNamespace, SkillPackage, SkillVersion, UploadTicket
from hub.tests.factories import publish
from tests.refusals import nothing_changes

BASE = "/api/v1/hub"
SKILL = f"{BASE}/skills/@acme/pdf-tools"

# Bodies the serializers refuse: a wrong type for the one required field, or none at all.
MALFORMED_REVIEW = {"approve": "maybe", "note": ["x"]}
MALFORMED_YANK = {"reason": {"nested": "x"}}
MALFORMED_TAG = {"version": ["1.0.0"]}
MALFORMED_NAMESPACE = {"handle": ["acme-sales"], "department": "²"}


@pytest.fixture
def business_admin(make_member):
    """Holds skill.publish, but neither reviews nor owns alice's skill."""
    return make_member(roles=["business_admin"])


@pytest.fixture
def reviewer(make_member):
    return make_member(roles=["skill_reviewer"])


# --- POST namespaces/ --------------------------------------------------------------------------


@pytest.mark.parametrize("who", ["bob", "business_admin", "bob_key"])
@pytest.mark.parametrize("body", [MALFORMED_NAMESPACE, {}])
def test_a_non_reviewer_gets_403_not_400_for_a_malformed_namespace(
    request, alice, bob, business_admin, client_for, key_client, who, body
):
    if who == "bob_key":
        client = key_client(alice, ["hub:publish"])  # publishes; does not review
    else:
        client = client_for(request.getfixturevalue(who))
    with nothing_changes(HubNamespace):
        response = client.post(f"{BASE}/namespaces/", body, format="json")
    assert response.status_code == 403, response.content
    assert response.json()["error"]["code"] == "permission_denied"


def test_a_reviewer_still_gets_the_field_errors_for_a_malformed_namespace(reviewer, client_for):
    with nothing_changes(HubNamespace):
        response = client_for(reviewer).post(
            f"{BASE}/namespaces/", MALFORMED_NAMESPACE, format="json"
        )
    assert response.status_code == 400, response.content
    assert set(response.json()["error"]["details"]) >= {"handle", "department"}


# --- POST versions/<v>/review/ -----------------------------------------------------------------


@pytest.mark.parametrize("body", [MALFORMED_REVIEW, {}])
def test_a_non_reviewer_gets_403_not_400_for_a_malformed_review(
    alice, bob, business_admin, client_for, body
):
    pending = publish(business_admin)  # pending review; its author may see it
    # published, so a colleague with skill.view sees the version he may not review
    published = publish(alice, name="pdf-suite", visibility="organization")
    SkillVersion.objects.filter(pk=published.pk).update(status=SkillVersion.Status.PUBLISHED)
    for member, url in (
        (business_admin, f"{SKILL}/versions/1.0.0/review/"),
        (bob, f"{BASE}/skills/@acme/pdf-suite/versions/1.0.0/review/"),
    ):
        with nothing_changes(pending, SkillVersion, DistTag):
            response = client_for(member).post(url, body, format="json")
        assert response.status_code == 403, (member, response.content)


def test_a_review_of_a_version_the_caller_cannot_see_is_404_whatever_the_body(
    business_admin, bob, charlie, client_for
):
    pending = publish(business_admin)
    for member in (bob, charlie):  # a colleague; another organization's owner
        with nothing_changes(pending):
            response = client_for(member).post(
                f"{SKILL}/versions/1.0.0/review/", MALFORMED_REVIEW, format="json"
            )
        assert response.status_code == 404, (member, response.content)


def test_a_reviewer_still_gets_the_field_errors_for_a_malformed_review(
    business_admin, reviewer, client_for
):
    pending = publish(business_admin)
    with nothing_changes(pending):
        response = client_for(reviewer).post(
            f"{SKILL}/versions/1.0.0/review/", MALFORMED_REVIEW, format="json"
        )
    assert response.status_code == 400, response.content
    assert set(response.json()["error"]["details"]) >= {"approve", "note"}


# --- POST versions/<v>/yank/, PUT tags/<tag>/, PATCH and deprecate --------------------------------

WRITES = [
    ("post", "/versions/1.0.0/yank/", MALFORMED_YANK),
    ("post", "/versions/1.0.0/yank/", {}),
    ("put", "/tags/stable/", MALFORMED_TAG),
    ("put", "/tags/stable/", {}),
    ("patch", "/", {"visibility": "everyone", "department": "²", "badges": "x"}),
    ("post", "/deprecate/", {"deprecated": "maybe", "message": ["x"]}),
]


@pytest.fixture
def pdf_tools(alice, org_a):
    org_a.settings = {"hub": {"publish_without_review": True}}
    org_a.save()
    return publish(alice, visibility="instance")


@pytest.mark.parametrize(("method", "path", "body"), WRITES)
def test_a_caller_who_may_not_maintain_the_skill_gets_403_not_400(
    pdf_tools, alice, bob, business_admin, charlie, client_for, key_client, method, path, body
):
    """A colleague, a publisher who does not own it, a read-only key and another organization
    (the skill is visible to the whole instance) may read the skill but not change it."""
    package = pdf_tools.package
    for client in (
        client_for(bob),
        client_for(business_admin),
        key_client(alice, ["hub:read"]),
        client_for(charlie),
    ):
        with nothing_changes(package, pdf_tools, DistTag, SkillVersion):
            response = getattr(client, method)(f"{SKILL}{path}", body, format="json")
        assert response.status_code == 403, (method, path, response.content)
        assert response.json()["error"]["code"] == "permission_denied"


@pytest.mark.parametrize(("method", "path", "body"), WRITES)
def test_a_skill_the_caller_cannot_see_is_404_whatever_the_body(
    alice, charlie, client_for, method, path, body
):
    version = publish(alice)  # private to organization A
    with nothing_changes(version.package, version, DistTag):
        response = getattr(client_for(charlie), method)(f"{SKILL}{path}", body, format="json")
    assert response.status_code == 404, (method, path, response.content)


@pytest.mark.parametrize(
    ("method", "path", "body", "fields"),
    [
        ("post", "/versions/1.0.0/yank/", MALFORMED_YANK, {"reason"}),
        ("put", "/tags/stable/", MALFORMED_TAG, {"version"}),
        ("patch", "/", {"visibility": "everyone"}, {"visibility"}),
        ("post", "/deprecate/", {"deprecated": "maybe"}, {"deprecated"}),
    ],
)
def test_the_maintainer_still_gets_the_field_errors(
    pdf_tools, alice, client_for, method, path, body, fields
):
    with nothing_changes(pdf_tools.package, pdf_tools, DistTag):
        response = getattr(client_for(alice), method)(f"{SKILL}{path}", body, format="json")
    assert response.status_code == 400, response.content
    assert set(response.json()["error"]["details"]) >= fields


# --- ClawHub's POST /api/v1/skills (publish) ----------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [{}, {"slug": "pdf-tools", "version": "1.0.0", "files": "SKILL.md"}, {"files": [{"x": 1}]}],
)
def test_a_clawhub_publish_without_the_publish_scope_is_403_in_plain_text(
    alice, bob, client_for, key_client, body
):
    for client in (key_client(alice, ["hub:read"]), client_for(bob)):
        with nothing_changes(SkillPackage, SkillVersion, UploadTicket):
            response = client.post("/api/v1/skills", body, format="json")
        assert response.status_code == 403, response.content
        assert response["Content-Type"].startswith("text/plain")
        assert "skill.publish" in response.content.decode()


def test_a_clawhub_publisher_still_gets_the_plain_text_400(alice, key_client):
    publisher = key_client(alice, ["hub:publish"])
    with nothing_changes(SkillPackage, SkillVersion, UploadTicket):
        response = publisher.post("/api/v1/skills", {}, format="json")
    assert response.status_code == 400, response.content
    assert response["Content-Type"].startswith("text/plain")
    assert "slug, version and files are required" in response.content.decode()
