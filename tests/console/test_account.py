"""Signing in and out, invitation links, and the static assets the pages load."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync
from django.conf import settings
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from cadre.governance.models import AuditEvent
from cadre.tenancy import services
from cadre.tenancy.actors import member_actor
from cadre.tenancy.models import Invitation, Member
from tests.conftest import PASSWORD
from tests.refusals import nothing_changes


def test_login_page_renders_and_signs_in(alice):
    client = Client()
    page = client.get(reverse("console:login"))
    assert page.status_code == 200
    assert "Sign in" in page.content.decode()
    response = client.post(
        reverse("console:login"), {"username": "alice@acme.test", "password": PASSWORD}
    )
    assert response.status_code == 302
    assert client.get(reverse("console:home")).status_code == 200


def test_wrong_password_shows_an_error(alice):
    response = Client().post(
        reverse("console:login"), {"username": "alice@acme.test", "password": "wrong"}
    )
    assert response.status_code == 200
    assert "Please enter a correct" in response.content.decode()


def test_logout_is_post_only_and_signs_out(alice, browser):
    client = browser(alice)
    assert client.get(reverse("console:logout")).status_code == 405
    assert client.post(reverse("console:logout")).status_code == 302
    assert client.get(reverse("console:home")).status_code == 302


def _invite(alice, email="new@acme.test"):
    _, _, token = services.member_invite(
        actor=member_actor(alice), email=email, display_name="Newcomer"
    )
    return token


def test_invitation_accept_creates_account_and_signs_in(alice, db):
    token = _invite(alice)
    client = Client()
    page = client.get(f"/invite/{token}/")
    assert page.status_code == 200
    assert "Join Acme" in page.content.decode()
    response = client.post(
        f"/invite/{token}/",
        {
            "display_name": "New Person",
            "password": "a-long-unusual-passphrase-42",
            "password_confirm": "a-long-unusual-passphrase-42",
        },
    )
    assert response.status_code == 302
    member = Member.objects.get(email="new@acme.test")
    assert member.status == Member.Status.ACTIVE
    assert member.display_name == "New Person"
    assert member.user.check_password("a-long-unusual-passphrase-42")
    assert AuditEvent.objects.filter(target_id=str(member.pk), action__contains="accept").exists()
    assert client.get(reverse("console:home")).status_code == 200


def test_invitation_link_works_once(alice, db):
    token = _invite(alice)
    Client().post(
        f"/invite/{token}/",
        {
            "display_name": "New",
            "password": "a-long-unusual-passphrase-42",
            "password_confirm": "a-long-unusual-passphrase-42",
        },
    )
    again = Client().get(f"/invite/{token}/")
    assert again.status_code == 410
    assert "already used" in again.content.decode()
    with nothing_changes(Member, Invitation.objects.filter(accepted_at__isnull=False)):
        assert Client().post(f"/invite/{token}/", {}).status_code == 410


def test_expired_and_revoked_and_unknown_links(alice, db):
    token = _invite(alice)
    Invitation.objects.update(expires_at=timezone.now() - timedelta(minutes=1))
    expired = Client().get(f"/invite/{token}/")
    assert expired.status_code == 410
    assert "expired" in expired.content.decode()

    second = _invite(alice, email="other@acme.test")
    Invitation.objects.filter(email="other@acme.test").update(revoked_at=timezone.now())
    revoked = Client().get(f"/invite/{second}/")
    assert revoked.status_code == 410
    assert "withdrawn" in revoked.content.decode()

    assert Client().get("/invite/not-a-real-token/").status_code == 404


def test_weak_or_mismatched_password_is_refused(alice, db):
    token = _invite(alice)
    mismatch = Client().post(
        f"/invite/{token}/",
        {
            "display_name": "New",
            "password": "a-long-unusual-passphrase-42",
            "password_confirm": "something-else-entirely-42",
        },
    )
    assert "The two passwords differ." in mismatch.content.decode()
    weak = Client().post(
        f"/invite/{token}/",
        {
            "display_name": "New",
            "password": "password",
            "password_confirm": "password",
        },
    )
    assert weak.status_code == 200
    assert "too common" in weak.content.decode() or "too short" in weak.content.decode()
    assert Member.objects.get(email="new@acme.test").status == Member.Status.INVITED


def test_signed_in_user_accepts_with_existing_account(alice, charlie, browser):
    # charlie (owner of Globex) is invited to Acme and joins with his account.
    token = _invite(alice, email="charlie-at-acme@acme.test")
    client = browser(charlie)
    page = client.get(f"/invite/{token}/").content.decode()
    assert "charlie@globex.test" in page
    response = client.post(f"/invite/{token}/")
    assert response.status_code == 302
    member = Member.objects.get(email="charlie-at-acme@acme.test")
    assert member.user == charlie.user
    assert member.status == Member.Status.ACTIVE
    # Now acting in Acme; the switcher offers Globex too.
    home = client.get(reverse("console:home")).content.decode()
    assert "Your agents and your conversations at Acme." in home and "Globex" in home


def test_existing_email_must_sign_in_first(alice, charlie, db):
    token = _invite(alice, email="charlie@globex.test")
    response = Client().post(
        f"/invite/{token}/",
        {
            "display_name": "Charlie",
            "password": "a-long-unusual-passphrase-42",
            "password_confirm": "a-long-unusual-passphrase-42",
        },
    )
    assert response.status_code == 200
    assert "sign in, then open the link" in response.content.decode()


def test_invite_page_has_no_referrer_leak(alice, db):
    token = _invite(alice)
    page = Client().get(f"/invite/{token}/").content.decode()
    # same-origin: the token never goes to another site in a Referer, while the page's own
    # forms still send their Origin (with no-referrer browsers send "Origin: null", which the
    # CSRF check refuses)
    assert '<meta name="referrer" content="same-origin">' in page


def response_body(response) -> bytes:
    """A response's bytes; static files stream from an async iterator (ServeStatic under ASGI)."""
    if not response.streaming:
        return response.content
    content = response.streaming_content
    if hasattr(content, "__aiter__"):

        async def collect() -> bytes:
            return b"".join([chunk async for chunk in content])

        return async_to_sync(collect)()
    return b"".join(content)


HTMX = Path(settings.FRONTEND_DIR) / "node_modules" / "htmx.org" / "dist" / "htmx.min.js"


@pytest.mark.skipif(
    not HTMX.exists(),
    reason="front-end packages not installed: run `npm install` in platform/cadre/console/frontend",
)
def test_htmx_is_served_from_the_npm_package(db):
    response = Client().get("/static/vendor/htmx.org/dist/htmx.min.js")
    assert response.status_code == 200
    assert b"htmx" in response_body(response)[:2000]


def test_console_css_is_served_and_pages_reference_no_cdn(alice, browser, db):
    assert Client().get("/static/console/cadre.css").status_code == 200
    page = browser(alice).get(reverse("console:home")).content.decode()
    assert "/static/vendor/htmx.org/dist/htmx.min.js" in page
    assert not re.search(r"""(src|href)=["']https?://""", page)
