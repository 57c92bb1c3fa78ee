"""Who may publish into which namespace: a team namespace (tied to a department) takes its
members, holders of a grant on it and organization admins; another organization's namespace
nobody. Enforced by the service, so the Cadre API, the ClawHub API and `cadre skill` agree."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

import pytest

from cadre.errors import NotPermitted
from cadre.tenancy import services as tenancy
from cadre.tenancy.actors import member_actor
from hub import services
from hub.cli import main
from hub.models import SkillPackage, SkillVersion
from hub.tests.factories import publish
from hub.tests.skill_samples import make_zip, skill_files
from tests.factories import DepartmentFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def team(org_a, alice, make_member):
    """Acme: Sales (with East below it) owns the team namespace @acme-sales; Support."""
    sales = DepartmentFactory(organization=org_a, name="Sales")
    east = DepartmentFactory(organization=org_a, name="East", parent=sales)
    support = DepartmentFactory(organization=org_a, name="Support")
    namespace = services.namespace_create(
        actor=member_actor(alice), handle="acme-sales", department=sales
    )
    # business_admin carries `skill.publish` organization-wide, but is no org admin.
    publisher = ["business_admin"]
    return {
        "namespace": namespace,
        "sales": sales,
        "seller": make_member(roles=publisher, display_name="Sam", department=sales),
        "east_seller": make_member(roles=publisher, display_name="Eve", department=east),
        "supporter": make_member(roles=publisher, display_name="Pat", department=support),
        "it_admin": make_member(roles=["it_admin"], display_name="Ivan"),
    }


def _refusal(member, **kwargs) -> NotPermitted:
    with pytest.raises(NotPermitted) as caught:
        publish(member, namespace="acme-sales", **kwargs)
    assert caught.value.status == 403
    return caught.value


def test_a_member_of_the_team_publishes_into_its_namespace(team):
    version = publish(team["seller"], namespace="acme-sales")
    assert version.package.full_name == "@acme-sales/pdf-tools"


def test_a_member_of_a_sub_department_publishes_into_the_team_namespace(team):
    version = publish(team["east_seller"], namespace="acme-sales", name="east-tools")
    assert version.package.full_name == "@acme-sales/east-tools"


def test_a_colleague_from_another_department_is_refused(team):
    error = _refusal(team["supporter"])
    assert error.code == "namespace_not_member"
    assert "@acme-sales" in error.message and error.details == {"namespace": "@acme-sales"}
    assert not SkillPackage.objects.exists() and not SkillVersion.objects.exists()


def test_the_colleague_still_publishes_into_the_organization_namespace(team):
    assert publish(team["supporter"]).package.full_name == "@acme/pdf-tools"


def test_a_grant_on_the_team_department_admits_a_colleague(alice, team):
    supporter = team["supporter"]
    tenancy.object_grant(
        actor=member_actor(alice),
        member=supporter,
        permission="skill.review",
        target=team["sales"],
    )
    assert publish(supporter, namespace="acme-sales").package.namespace == team["namespace"]


def test_an_org_admin_publishes_into_any_team_namespace(alice, team):
    assert publish(team["it_admin"], namespace="acme-sales", name="admin-tools").package
    assert publish(alice, namespace="acme-sales", name="owner-tools").package  # owner


def test_an_outsider_is_refused_even_as_owner_of_their_organization(alice, team, charlie):
    error = _refusal(charlie)
    assert error.code == "namespace_foreign"
    publish(alice)  # creates @acme
    with pytest.raises(NotPermitted) as caught:
        publish(charlie, namespace="acme", version="9.0.0")
    assert caught.value.code == "namespace_foreign"


def test_leaving_the_team_stops_new_versions(team):
    seller = team["seller"]
    publish(seller, namespace="acme-sales", version="1.0.0")
    seller.department = None
    seller.save(update_fields=["department"])
    assert _refusal(seller, version="1.1.0").code == "namespace_not_member"
    assert list(SkillVersion.objects.values_list("version", flat=True)) == ["1.0.0"]


# --- the three ways in -----------------------------------------------------------------------


def _api_publish(client, namespace: str, name: str = "pdf-tools"):
    return client.post(
        f"/api/v1/hub/publish/?version=1.0.0&namespace={namespace}&name={name}",
        data=make_zip(skill_files(name)),
        content_type="application/zip",
    )


def test_cadre_api_answers_403_with_the_code(team, client_for):
    refused = _api_publish(client_for(team["supporter"]), "acme-sales")
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "namespace_not_member"
    allowed = _api_publish(client_for(team["seller"]), "acme-sales")
    assert allowed.status_code == 201, allowed.content
    assert allowed.json()["package"] == "@acme-sales/pdf-tools"


def test_cadre_api_refuses_an_outsider_with_the_code(team, charlie, key_client):
    refused = _api_publish(key_client(charlie, ["hub:publish"]), "acme-sales")
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "namespace_foreign"


def _clawhub_publish(client, owner_handle: str):
    files = []
    for path, content in skill_files().items():
        digest = hashlib.sha256(content).hexdigest()
        ticket = client.post(
            "/api/v1/skills/-/upload-url",
            {"path": path, "size": len(content), "sha256": digest},
            format="json",
        ).json()
        url = ticket["uploadUrl"].removeprefix("http://testserver")
        client.post(url, data=content, content_type="application/octet-stream")
        files.append(
            {
                "path": path,
                "size": len(content),
                "sha256": digest,
                "storageId": ticket["uploadTicket"],
                "uploadTicket": ticket["uploadTicket"],
            }
        )
    return client.post(
        "/api/v1/skills",
        {"slug": "pdf-tools", "ownerHandle": owner_handle, "version": "1.0.0", "files": files},
        format="json",
    )


def test_clawhub_api_refuses_a_colleague_with_a_plain_403(team, client_for):
    refused = _clawhub_publish(client_for(team["supporter"]), "acme-sales")
    assert refused.status_code == 403
    assert "team namespace" in refused.content.decode()
    allowed = _clawhub_publish(client_for(team["east_seller"]), "acme-sales")
    assert allowed.status_code == 200, allowed.content


def test_cadre_skill_cli_reports_the_refusal(team, live_server, tmp_path, capsys):
    folder = Path(tmp_path) / "pdf-tools"
    for path, content in skill_files().items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_bytes(content)
    # API keys are created by admins; a key acts with its creator's current roles.
    ivan = team["it_admin"]
    ivan.department = team["supporter"].department
    ivan.save(update_fields=["department"])
    _, token = tenancy.api_key_create(
        actor=member_actor(ivan), name="ci", scopes=["hub:read", "hub:publish"]
    )

    def run(version: str) -> int:
        argv = ["publish", str(folder), "--version", version, "--namespace", "acme-sales"]
        return main(
            ["--url", live_server.url, "--token", token, *argv, "--quiet"], out=io.StringIO()
        )

    assert run("1.0.0") == 0  # as an org admin
    assert SkillPackage.objects.get().full_name == "@acme-sales/pdf-tools"
    ivan.roles = ["business_admin"]  # no longer an admin, and not in Sales
    ivan.save(update_fields=["roles"])
    capsys.readouterr()
    assert run("1.1.0") == 1
    assert "[namespace_not_member]" in capsys.readouterr().err
    assert not SkillVersion.objects.filter(version="1.1.0").exists()
