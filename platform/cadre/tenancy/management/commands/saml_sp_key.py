"""Show or rotate Cadre's SP key pair for one SAML identity provider (docs/identity.md)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from cadre.errors import CadreError
from cadre.tenancy.actors import system_actor
from cadre.tenancy.models import IdentityProvider
from cadre.tenancy.services import saml


class Command(BaseCommand):
    help = (
        "Cadre's SAML SP key pair for a provider: --show its certificates' fingerprints, "
        "--begin a rotation (a next key published in the SP metadata), --complete it (the next "
        "key becomes current)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--org", required=True, help="organization slug")
        parser.add_argument("--provider", required=True, help="identity provider slug")
        action = parser.add_mutually_exclusive_group(required=True)
        action.add_argument("--show", action="store_true")
        action.add_argument("--begin", action="store_true")
        action.add_argument("--complete", action="store_true")

    def handle(self, *args, org, provider, show=False, begin=False, complete=False, **options):
        found = (
            IdentityProvider.objects.select_related("organization")
            .filter(organization__slug=org, slug=provider, kind=IdentityProvider.Kind.SAML)
            .first()
        )
        if found is None:
            raise CommandError(f"no SAML identity provider {provider!r} in {org!r}")
        actor = system_actor(found.organization, label="cadre manage saml_sp_key")
        try:
            if begin:
                found = saml.sp_key_rotate_begin(actor=actor, provider=found)
            elif complete:
                found = saml.sp_key_rotate_complete(actor=actor, provider=found)
            else:
                found = saml.sp_keys_ensure(found)
        except CadreError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"current  {saml.certificate_fingerprint(found.saml_sp_certificate)}")
        if found.saml_sp_next_certificate:
            fingerprint = saml.certificate_fingerprint(found.saml_sp_next_certificate)
            self.stdout.write(f"next     {fingerprint}")
