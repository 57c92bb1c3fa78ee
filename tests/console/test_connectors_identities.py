"""Identity mapping in the console: CSV import with preview and all-or-nothing apply, the
unmapped-user queue (map or dismiss), scoped to the organization."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from cadre.governance.models import AuditEvent
from cadre.tenancy.actors import member_actor
from cadre.tenancy.models import IMIdentity
from connectors.base import services
from connectors.base.identities import identity_resolve
from connectors.models import UnmappedIdentity

pytestmark = pytest.mark.django_db


@pytest.fixture
def feishu(alice):
    return services.connector_create(
        actor=member_actor(alice),
        platform="feishu",
        name="Feishu HQ",
        credentials={"app_id": "cli_1", "app_secret": "s"},
    )


def _upload(client, connector, text: str):
    return client.post(
        reverse("console:connector_identity_import", args=[connector.pk]),
        {"file": SimpleUploadedFile("people.csv", text.encode(), content_type="text/csv")},
    )


def test_valid_csv_is_previewed_then_maps_every_row(alice, bob, make_member, browser, feishu):
    carol = make_member(display_name="Carol", email="carol@acme.test", employee_no="E7")
    UnmappedIdentity.objects.create(
        organization=alice.organization, connector=feishu, platform_user_id="ou_carol"
    )
    client = browser(alice)
    text = "platform_user_id,member_email,employee_no\nou_bob,BOB@acme.test,\nou_carol,,E7\n"
    preview = _upload(client, feishu, text)
    assert preview.status_code == 200
    page = preview.content.decode()
    assert "Map 2 accounts" in page and "Carol" in page
    assert not IMIdentity.objects.exists()  # a preview writes nothing
    content = preview.context["apply_form"].initial["content"]
    applied = client.post(
        reverse("console:connector_identity_import", args=[feishu.pk]), {"content": content}
    )
    assert applied.status_code == 302
    mapped = dict(IMIdentity.objects.values_list("platform_user_id", "member_id"))
    assert mapped == {"ou_bob": bob.pk, "ou_carol": carol.pk}
    assert UnmappedIdentity.objects.get().resolved_at is not None
    event = AuditEvent.objects.get(action="connector.identity_import")
    assert event.changes["created"] == 2
    listing = client.get(reverse("console:connector_identities", args=[feishu.pk]))
    assert "ou_carol" in listing.content.decode()


def test_a_file_with_one_bad_row_changes_nothing_and_names_the_line(alice, bob, browser, feishu):
    client = browser(alice)
    text = "platform_user_id,member_email\nou_bob,bob@acme.test\nou_ghost,nobody@acme.test\n"
    preview = _upload(client, feishu, text)
    assert preview.status_code == 400
    page = preview.content.decode()
    assert "Line 3" in page and "No member with email nobody@acme.test." in page
    assert "Map 1 account" not in page  # no apply button for a file with errors
    # Sending the content anyway (an old tab, a crafted post) still writes nothing.
    applied = client.post(
        reverse("console:connector_identity_import", args=[feishu.pk]), {"content": text}
    )
    assert applied.status_code == 400
    assert "nothing was imported" in applied.content.decode()
    assert not IMIdentity.objects.exists()
    assert not AuditEvent.objects.filter(action="connector.identity_import").exists()


def test_a_file_without_the_needed_columns_is_refused(alice, browser, feishu):
    response = _upload(browser(alice), feishu, "user,who\nou_1,bob\n")
    assert response.status_code == 400
    body = response.content.decode()
    assert "Unknown column(s): user, who" in body
    assert not IMIdentity.objects.exists()


def test_employee_and_outsider_cannot_import(bob, charlie, browser, feishu):
    text = "platform_user_id,member_email\nou_bob,bob@acme.test\n"
    assert _upload(browser(bob), feishu, text).status_code == 403
    assert _upload(browser(charlie), feishu, text).status_code == 404
    assert not IMIdentity.objects.exists()


def test_mapping_a_queued_user_removes_them_from_the_queue(alice, bob, browser, feishu):
    row = UnmappedIdentity.objects.create(
        organization=alice.organization,
        connector=feishu,
        platform_user_id="ou_newbie",
        display_name="Newbie",
    )
    client = browser(alice)
    identities = reverse("console:connector_identities", args=[feishu.pk])
    assert "ou_newbie" in client.get(identities).content.decode()
    url = reverse("console:connector_unmapped_map", args=[feishu.pk, row.pk])
    assert "Newbie" in client.get(url).content.decode()
    response = client.post(url, {"member": bob.pk})
    assert response.status_code == 302
    identity = IMIdentity.objects.get(platform_user_id="ou_newbie")
    assert identity.member == bob and identity.platform == "feishu"
    row.refresh_from_db()
    assert row.resolved_at is not None
    page = client.get(identities).content.decode()
    assert "Nobody is waiting." in page
    assert identity_resolve(feishu, platform_user_id="ou_newbie") == bob
    assert AuditEvent.objects.filter(action="member.identity_add", target_id=str(bob.pk)).exists()


def test_mapping_refuses_another_organizations_member(alice, charlie, browser, feishu):
    row = UnmappedIdentity.objects.create(
        organization=alice.organization, connector=feishu, platform_user_id="ou_x"
    )
    url = reverse("console:connector_unmapped_map", args=[feishu.pk, row.pk])
    response = browser(alice).post(url, {"member": charlie.pk})
    assert response.status_code == 200
    assert "Select a valid choice" in response.content.decode()
    assert not IMIdentity.objects.exists()
    assert browser(charlie).get(url).status_code == 404


def test_dismissing_a_queued_user(alice, bob, browser, feishu):
    row = UnmappedIdentity.objects.create(
        organization=alice.organization, connector=feishu, platform_user_id="ou_bot"
    )
    url = reverse("console:connector_unmapped_dismiss", args=[feishu.pk, row.pk])
    assert browser(bob).post(url).status_code == 403
    assert browser(alice).post(url).status_code == 302
    row.refresh_from_db()
    assert row.resolved_at is not None
    assert not IMIdentity.objects.exists()
    assert AuditEvent.objects.filter(action="connector.unmapped_dismiss").count() == 1


def test_identity_search_narrows_the_list_with_htmx(alice, bob, make_member, browser, feishu):
    carol = make_member(display_name="Carol")
    IMIdentity.objects.create(
        organization=alice.organization, member=bob, platform="feishu", platform_user_id="ou_b1"
    )
    IMIdentity.objects.create(
        organization=alice.organization, member=carol, platform="feishu", platform_user_id="ou_c1"
    )
    response = browser(alice).get(
        reverse("console:connector_identities", args=[feishu.pk]),
        {"q": "carol"},
        HTTP_HX_REQUEST="true",
    )
    body = response.content.decode()
    assert body.startswith('<div id="identity-results">')
    assert "ou_c1" in body and "ou_b1" not in body
