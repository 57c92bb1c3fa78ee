"""The ClawHub-compatible API: response shapes, visibility and the upload-ticket publish flow."""

from __future__ import annotations

import hashlib
import io
import zipfile

import pytest

from hub.bundles import fingerprint
from hub.models import SkillBlob, SkillFile, SkillVersion, UploadTicket
from hub.tests.factories import publish
from hub.tests.skill_samples import skill_files
from tests.refusals import nothing_changes


@pytest.fixture
def reader(alice, key_client):
    return key_client(alice, ["hub:read"])


def test_whoami_names_the_organization_namespace(reader):
    body = reader.get("/api/v1/whoami").json()
    assert body == {
        "user": {"handle": "acme", "displayName": "Alice", "image": None, "role": "user"}
    }


def test_anonymous_gets_a_plain_text_401(client):
    response = client.get("/api/v1/search?q=x")
    assert response.status_code == 401
    assert response["Content-Type"].startswith("text/plain")
    assert "clawhub login" in response.content.decode()


def test_well_known_has_an_absolute_api_base(client, settings):
    settings.CADRE_BASE_URL = "https://cadre.example.test"
    assert client.get("/.well-known/clawhub.json").json() == {
        "apiBase": "https://cadre.example.test"
    }


def test_skill_detail_shape(alice, reader):
    version = publish(alice, changelog="first")
    body = reader.get("/api/v1/skills/pdf-tools?ownerHandle=acme").json()
    assert set(body) == {"skill", "latestVersion", "owner", "moderation"}
    skill = body["skill"]
    assert skill["slug"] == "pdf-tools" and skill["tags"] == {"latest": "1.0.0"}
    assert isinstance(skill["createdAt"], int) and skill["createdAt"] > 10**12  # milliseconds
    assert set(skill["stats"]) >= {"downloads", "installsAllTime", "versions"}
    assert body["latestVersion"] == {
        "version": "1.0.0",
        "createdAt": int(version.published_at.timestamp() * 1000),
        "changelog": "first",
        "license": None,
    }
    assert body["owner"]["handle"] == "acme"
    assert body["moderation"]["isMalwareBlocked"] is False


def test_search_list_versions_version_file_download_resolve(alice, reader):
    version = publish(alice)
    result = reader.get("/api/v1/search?q=pdf&limit=5").json()["results"][0]
    assert (result["slug"], result["ownerHandle"], result["version"]) == (
        "pdf-tools",
        "acme",
        "1.0.0",
    )
    assert isinstance(result["score"], float)
    listing = reader.get("/api/v1/skills?limit=1").json()
    assert (
        listing["nextCursor"] is None and listing["items"][0]["latestVersion"]["version"] == "1.0.0"
    )
    versions = reader.get("/api/v1/skills/pdf-tools/versions").json()
    assert [v["version"] for v in versions["items"]] == ["1.0.0"]
    detail = reader.get("/api/v1/skills/pdf-tools/versions/1.0.0").json()
    assert {f["path"] for f in detail["version"]["files"]} == set(skill_files())
    assert detail["skill"] == {"slug": "pdf-tools", "displayName": "pdf-tools"}
    raw = reader.get("/api/v1/skills/pdf-tools/file?path=SKILL.md&version=1.0.0")
    assert raw.content == skill_files()["SKILL.md"]
    zipped = reader.get("/api/v1/download?slug=pdf-tools&ownerHandle=acme&version=1.0.0")
    with zipfile.ZipFile(io.BytesIO(zipped.content)) as archive:
        assert sorted(archive.namelist()) == sorted(skill_files())
    resolved = reader.get(f"/api/v1/resolve?slug=pdf-tools&hash={version.fingerprint}").json()
    assert resolved == {"match": {"version": "1.0.0"}, "latestVersion": {"version": "1.0.0"}}
    resolved = reader.get("/api/v1/resolve?slug=pdf-tools&hash=" + "0" * 64).json()
    assert resolved["match"] is None


def test_private_skill_is_not_found_for_another_organization(alice, charlie, key_client):
    publish(alice)
    outsider = key_client(charlie, ["hub:read"])
    response = outsider.get("/api/v1/skills/pdf-tools?ownerHandle=acme")
    assert response.status_code == 404 and "Skill not found" in response.content.decode()
    assert outsider.get("/api/v1/download?slug=pdf-tools&ownerHandle=acme").status_code == 404
    assert outsider.get("/api/v1/search?q=pdf").json() == {"results": []}


def test_unpublished_version_is_not_installable(make_member, alice, key_client):
    author = make_member(roles=["business_admin"])
    publish(author)
    client = key_client(alice, ["hub:read"])
    body = client.get("/api/v1/skills/pdf-tools").json()
    assert body["latestVersion"] is None
    assert client.get("/api/v1/download?slug=pdf-tools&version=1.0.0").status_code == 404
    assert client.get("/api/v1/skills/pdf-tools/versions/1.0.0").status_code == 404


def _upload(client, path: str, content: bytes) -> dict:
    ticket = client.post(
        "/api/v1/skills/-/upload-url",
        {
            "path": path,
            "size": len(content),
            "sha256": hashlib.sha256(content).hexdigest(),
            "contentType": "text/markdown",
        },
        format="json",
    ).json()
    url = ticket["uploadUrl"].removeprefix("http://testserver")
    stored = client.post(url, data=content, content_type="text/markdown").json()
    return {
        "path": path,
        "size": len(content),
        "storageId": stored["storageId"],
        "sha256": hashlib.sha256(content).hexdigest(),
        "contentType": "text/markdown",
        "uploadTicket": ticket["uploadTicket"],
    }


def test_upload_ticket_publish_flow(alice, key_client, org_a):
    org_a.settings = {"hub": {"publish_without_review": True}}
    org_a.save()
    client = key_client(alice, ["hub:publish"])
    files = [_upload(client, path, content) for path, content in skill_files().items()]
    response = client.post(
        "/api/v1/skills",
        {
            "slug": "pdf-tools",
            "displayName": "PDF tools",
            "ownerHandle": "acme",
            "version": "1.0.0",
            "changelog": "hi",
            "acceptLicenseTerms": True,
            "tags": ["latest", "beta"],
            "files": files,
        },
        format="json",
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["ok"] is True and body["publicationStatus"] == "published"
    tags = client.get("/api/v1/skills/pdf-tools").json()["skill"]["tags"]
    assert tags == {"latest": "1.0.0", "beta": "1.0.0"}
    expected = fingerprint((p, hashlib.sha256(c).hexdigest()) for p, c in skill_files().items())
    assert client.get(f"/api/v1/resolve?slug=pdf-tools&hash={expected}").json()["match"]


def test_upload_with_wrong_bytes_is_refused(alice, key_client):
    client = key_client(alice, ["hub:publish"])
    ticket = client.post(
        "/api/v1/skills/-/upload-url",
        {"path": "SKILL.md", "size": 3, "sha256": "0" * 64},
        format="json",
    ).json()
    url = ticket["uploadUrl"].removeprefix("http://testserver")
    with nothing_changes(SkillBlob, SkillFile, SkillVersion):
        response = client.post(url, data=b"abc", content_type="text/markdown")
    assert response.status_code == 400 and "sha256" in response.content.decode()


def test_upload_url_needs_the_publish_scope(reader):
    with nothing_changes(UploadTicket):
        response = reader.post(
            "/api/v1/skills/-/upload-url",
            {"path": "SKILL.md", "size": 1, "sha256": "0" * 64},
            format="json",
        )
    assert response.status_code == 403


def test_tag_endpoint(alice, key_client):
    publish(alice, version="1.0.0")
    publish(alice, version="1.1.0")
    client = key_client(alice, ["hub:publish"])
    response = client.post(
        "/api/v1/skills/pdf-tools/tags/stable",
        {"version": "1.0.0", "ownerHandle": "acme"},
        format="json",
    )
    assert response.json() == {"ok": True, "slug": "pdf-tools", "tag": "stable", "version": "1.0.0"}


def test_moderation_evidence_is_for_maintainers(alice, key_client):
    publish(alice, files=skill_files() | {"scripts/a.py": b"import requests\nrequests.get(u)\n"})
    body = key_client(alice, ["hub:read"]).get("/api/v1/skills/pdf-tools/moderation").json()
    assert body["moderation"]["evidence"] == []  # a read key is not a maintainer
    body = key_client(alice, ["hub:publish"]).get("/api/v1/skills/pdf-tools/moderation").json()
    assert body["moderation"]["evidence"][0]["code"] == "network_reach"
