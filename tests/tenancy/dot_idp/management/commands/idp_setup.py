"""Register a relying party at the identity provider: a confidential client with the
authorization-code grant, RS256 id_tokens, its redirect and post-logout redirect URIs (added to
those already registered when run again)."""

from __future__ import annotations

from django.core.management.base import BaseCommand
from oauth2_provider.models import get_application_model


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser):
        parser.add_argument("--name", default="Cadre")
        parser.add_argument("--client-id", required=True)
        parser.add_argument("--client-secret", required=True)
        parser.add_argument("--redirect-uri", action="append", required=True)
        parser.add_argument("--post-logout-redirect-uri", action="append", default=[])

    def handle(self, *args, **options):
        Application = get_application_model()
        known = Application.objects.filter(client_id=options["client_id"]).first()

        def uris(field: str, added: list[str]) -> str:
            # Run again for the same client, the command adds URIs to those registered.
            registered = getattr(known, field).split() if known else []
            return " ".join(dict.fromkeys([*registered, *added]))

        Application.objects.update_or_create(
            client_id=options["client_id"],
            defaults={
                "name": options["name"],
                "client_secret": options["client_secret"],
                "client_type": Application.CLIENT_CONFIDENTIAL,
                "authorization_grant_type": Application.GRANT_AUTHORIZATION_CODE,
                "algorithm": Application.RS256_ALGORITHM,
                "redirect_uris": uris("redirect_uris", options["redirect_uri"]),
                "post_logout_redirect_uris": uris(
                    "post_logout_redirect_uris", options["post_logout_redirect_uri"]
                ),
                # A first-party application: no consent screen after the sign-in.
                "skip_authorization": True,
            },
        )
