"""The demo organization `make up` creates on a fresh install, so there is something to try.

Idempotent: the first run creates "Demo Co" (slug `demo`) with an owner account and a few
departments and positions, all through the tenancy services (so they are audited like any other
change), the model provider the environment names (cadre.runtime.default_provider) and the
labelled sample data (cadre.runtime.demo_data); later runs find the organization and change
nothing.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.db import transaction

from cadre.agents.models import ModelProviderConfig
from cadre.env import env_str
from cadre.errors import CadreError, Conflict
from cadre.runtime.default_provider import (
    ProviderSettings,
    default_provider_create,
    provider_from_env,
)
from cadre.runtime.demo_data import DemoSeed, demo_data_seed
from cadre.runtime.models import DemoData
from cadre.tenancy import services
from cadre.tenancy.actors import member_actor
from cadre.tenancy.models import Member, Organization, User

DEMO_NAME = "Demo Co"
DEMO_SLUG = "demo"
DEFAULT_EMAIL = "admin@demo.local"

# Department -> positions in it: enough structure for every console page to show something.
DEMO_STRUCTURE: dict[str, tuple[str, ...]] = {
    "Engineering": ("Software Engineer", "Site Reliability Engineer"),
    "Sales": ("Account Executive",),
    "Customer Support": ("Support Specialist",),
    "Finance": ("Accountant",),
}


@dataclass(frozen=True)
class DemoAccount:
    organization: Organization
    email: str
    created: bool  # this run created the organization
    password: str | None  # set only when this run chose the password (show it once)
    password_generated: bool = False
    seed: DemoSeed | None = None  # the sample data, when this run seeded it
    provider: ModelProviderConfig | None = None  # the provider the environment named
    samples_refused: str = ""  # why an organization in use got no sample data


def _demo_password() -> tuple[str, bool]:
    chosen = env_str("CADRE_DEMO_PASSWORD")
    if chosen is None:
        # 16 url-safe characters: strong, and easy to copy from a terminal
        return secrets.token_urlsafe(12), True
    try:
        validate_password(chosen)
    except ValidationError as error:
        raise ImproperlyConfigured(f"CADRE_DEMO_PASSWORD: {' '.join(error.messages)}") from None
    return chosen, False


def _samples(
    organization: Organization, owner: Member, chosen: ProviderSettings | None
) -> tuple[DemoSeed | None, ModelProviderConfig | None]:
    """The environment's model provider and the sample data, once per organization."""
    if DemoData.objects.filter(organization=organization).exists():
        return None, None
    provider = default_provider_create(actor=member_actor(owner), chosen=chosen)
    return demo_data_seed(organization=organization, owner=owner, provider=provider), provider


def demo_setup(*, samples: bool = True) -> DemoAccount:
    """Create the demo organization once (with the sample data unless `samples` is False: a
    production install's first organization); return who signs in to it."""
    email = (env_str("CADRE_DEMO_EMAIL", DEFAULT_EMAIL) or DEFAULT_EMAIL).strip().lower()
    chosen = provider_from_env()  # a misconfigured variable stops here, before any write
    existing = Organization.objects.filter(slug=DEMO_SLUG).first()
    if existing is not None:
        owner = (
            Member.objects.filter(organization=existing, roles__contains=["owner"])
            .order_by("pk")
            .first()
        )
        # An organization created before the sample data existed gets it once, unless its own
        # objects clash with it (a template code, the colleague's e-mail): then the start goes
        # on without it.
        seed, provider, refused = None, None, ""
        if owner is not None and samples:
            try:
                seed, provider = _samples(existing, owner, chosen)
            except CadreError as error:
                refused = str(error)
        return DemoAccount(
            existing,
            owner.email if owner else email,
            created=False,
            password=None,
            seed=seed,
            provider=provider,
            samples_refused=refused,
        )

    password, generated = _demo_password()
    # An account with this e-mail may exist already (another organization): it keeps its own
    # password, so there is nothing to show.
    user_existed = User.objects.filter(email=email).exists()
    try:
        with transaction.atomic():
            organization, owner = services.organization_create(
                name=DEMO_NAME,
                slug=DEMO_SLUG,
                owner_email=email,
                owner_name="Demo Admin",
                password=password,
            )
            actor = member_actor(owner)
            for department_name, positions in DEMO_STRUCTURE.items():
                department = services.department_create(actor=actor, name=department_name)
                for position_name in positions:
                    services.position_create(actor=actor, name=position_name, department=department)
            seed, provider = _samples(organization, owner, chosen) if samples else (None, None)
    except Conflict:
        # Another process (a second `cadre up`) created it between our check and our insert.
        if Organization.objects.filter(slug=DEMO_SLUG).exists():
            return demo_setup(samples=samples)
        raise
    return DemoAccount(
        organization,
        email,
        created=True,
        password=None if user_existed else password,
        password_generated=generated and not user_existed,
        seed=seed,
        provider=provider,
    )


def describe(account: DemoAccount, console_url: str = "") -> list[str]:
    """Lines telling a person how to sign in (passwords only when this run set them) and
    where to chat with the demo agent."""
    where = f" at {console_url}" if console_url else ""
    if account.created and account.password:
        lines = [f"Demo organization '{DEMO_NAME}' created. Sign in{where} as:"]
        lines.append(f"    e-mail:   {account.email}")
        lines.append(f"    password: {account.password}")
        if account.password_generated:
            lines.append(
                "  This password is shown only once (set CADRE_DEMO_PASSWORD to choose it)."
            )
    elif account.created:
        lines = [
            f"Demo organization '{DEMO_NAME}' created, owned by the existing account "
            f"{account.email} (sign in{where} with its password)."
        ]
    else:
        lines = [
            f"Demo organization '{DEMO_NAME}' exists; sign in{where} as {account.email} with "
            "the password shown on the first start (or CADRE_DEMO_PASSWORD). Forgot it? Run: "
            f"cadre manage changepassword {account.email}"
        ]
    return lines + _describe_samples(account, console_url)


def _describe_samples(account: DemoAccount, console_url: str) -> list[str]:
    seed = account.seed
    if account.samples_refused:
        return [f"Demo data not added: {account.samples_refused}"]
    if seed is None:
        return []
    lines = ["Demo data added (labelled '(demo)'; remove it with: cadre manage demo_reset)."]
    if seed.employee_password:
        lines.append("  A colleague to try reviews and confirmations with:")
        lines.append(f"    e-mail:   {seed.employee_email}")
        lines.append(f"    password: {seed.employee_password}   (shown only once)")
    else:
        lines.append(f"  A colleague: {seed.employee_email} (an existing account).")
    if seed.agent is not None:
        chat = f"{console_url.rstrip('/')}/chat/agents/{seed.agent.pk}/"
        lines.append(f"  Chat with the demo agent: {chat}")
    if account.provider is not None:
        provider = account.provider
        lines.append(f"  Demo agents answer through {provider.name} ({provider.default_model}).")
    else:
        lines.append(
            "  Demo agents use the offline model (no language model configured): set "
            "OPENAI_API_KEY, ANTHROPIC_API_KEY or CADRE_MODEL_BASE_URL before the first start, "
            "or configure a model under Models."
        )
    return lines
