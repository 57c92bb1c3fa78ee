"""Create (printed once), list or revoke an organization's SCIM provisioning tokens."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from cadre.errors import CadreError
from cadre.tenancy.actors import system_actor
from cadre.tenancy.models import Organization, ScimToken
from cadre.tenancy.services import scim_token_create, scim_token_revoke


class Command(BaseCommand):
    help = (
        "Create a SCIM bearer token for an organization and print it once (only its hash is "
        "kept); --list shows its tokens, --revoke PREFIX revokes one."
    )

    def add_arguments(self, parser):
        parser.add_argument("--org", required=True, help="organization slug")
        parser.add_argument("--name", default="", help="what the token is for, e.g. Okta")
        parser.add_argument("--list", action="store_true", help="list the tokens")
        parser.add_argument("--revoke", metavar="PREFIX", help="revoke the token with PREFIX")

    def handle(self, *args, org, name="", list=False, revoke=None, **options):
        organization = Organization.objects.filter(slug=org).first()
        if organization is None:
            raise CommandError(f"no organization with slug {org!r}")
        actor = system_actor(organization, label="cadre manage scim_token")
        tokens = ScimToken.objects.filter(organization=organization)
        if list:
            for token in tokens:
                used = token.last_used_at.isoformat() if token.last_used_at else "never"
                self.stdout.write(f"{token.prefix}  {token.state:8}  {token.name}  used {used}")
            return
        if revoke:
            token = tokens.filter(prefix=revoke).first()
            if token is None:
                raise CommandError(f"no SCIM token {revoke!r} in {org!r}")
            try:
                scim_token_revoke(actor=actor, token=token)
            except CadreError as exc:
                raise CommandError(str(exc)) from None
            self.stdout.write(f"revoked {token.prefix}")
            return
        token, secret = scim_token_create(actor=actor, name=name)
        self.stderr.write(f"SCIM token {token.prefix} for {org}; it is shown only this once:")
        self.stdout.write(secret)
