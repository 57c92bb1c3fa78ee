"""The demo organization `make up` creates on a fresh install, so there is something to try.

Idempotent: the first run creates "Demo Co" (slug `demo`) with an owner account and a few
departments and positions, all through the tenancy services (so they are audited like any other
change), the model provider the environment names (cadre.runtime.default_provider) and the
labelled sample data (cadre.runtime.demo_data); later runs find the organization and change
nothing. Its default language is the installer's (cadre.runtime.language): a Chinese-speaking
installer gets 演示公司, with Chinese departments, positions, templates and sample data.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.db import transaction
from django.utils.translation import gettext as _

from cadre.agents.models import ModelProviderConfig
from cadre.env import env_str
from cadre.errors import CadreError, Conflict
from cadre.runtime.default_provider import (
    ProviderSettings,
    default_provider_create,
    provider_from_env,
)
from cadre.runtime.demo_data import DemoSeed, demo_data_seed
from cadre.runtime.language import installer_language
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
# The same in Chinese, for a Chinese-speaking installer; a Chinese name slugifies to nothing,
# so each position gets the English one's code.
DEMO_NAME_ZH = "演示公司"
DEMO_OWNER = {"en": "Demo Admin", "zh-hans": "演示管理员"}
DEMO_STRUCTURE_ZH: dict[str, tuple[str, ...]] = {
    "研发部": ("软件工程师", "站点可靠性工程师"),
    "销售部": ("客户经理",),
    "客户支持部": ("技术支持专员",),
    "财务部": ("会计",),
}
POSITION_CODES = {
    zh: english
    for zh_names, en_names in zip(DEMO_STRUCTURE_ZH.values(), DEMO_STRUCTURE.values(), strict=True)
    for zh, english in zip(zh_names, en_names, strict=True)
}


def demo_structure(language: str) -> dict[str, tuple[str, ...]]:
    """Department -> positions, in the organization's language."""
    return DEMO_STRUCTURE_ZH if language == "zh-hans" else DEMO_STRUCTURE


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


def demo_setup(*, samples: bool = True, language: str | None = None) -> DemoAccount:
    """Create the demo organization once (with the sample data unless `samples` is False: a
    production install's first organization), in `language` (else the installer's: its
    default language, names and sample data); return who signs in to it."""
    language = language or installer_language()
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
                name=DEMO_NAME_ZH if language == "zh-hans" else DEMO_NAME,
                slug=DEMO_SLUG,
                owner_email=email,
                owner_name=DEMO_OWNER.get(language, DEMO_OWNER["en"]),
                password=password,
            )
            actor = member_actor(owner)
            if language != organization.locale:
                organization = services.organization_update(
                    actor=actor, organization=organization, locale=language
                )
            for department_name, positions in demo_structure(language).items():
                department = services.department_create(actor=actor, name=department_name)
                for position_name in positions:
                    services.position_create(
                        actor=actor,
                        name=position_name,
                        code=POSITION_CODES.get(position_name, ""),
                        department=department,
                    )
            seed, provider = _samples(organization, owner, chosen) if samples else (None, None)
    except Conflict:
        # Another process (a second `cadre up`) created it between our check and our insert.
        if Organization.objects.filter(slug=DEMO_SLUG).exists():
            return demo_setup(samples=samples, language=language)
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
    where to chat with the demo agent, in the active language (`cadre up` activates the
    installer's)."""
    name = account.organization.name
    values = {"name": name, "url": console_url, "email": account.email}
    if account.created and account.password:
        if console_url:
            lines = [_("Demo organization '%(name)s' created. Sign in at %(url)s as:") % values]
        else:
            lines = [_("Demo organization '%(name)s' created. Sign in as:") % values]
        lines.append("    " + _("e-mail:   %(email)s") % values)
        lines.append("    " + _("password: %(password)s") % {"password": account.password})
        if account.password_generated:
            lines.append(
                "  " + _("This password is shown only once (set CADRE_DEMO_PASSWORD to choose it).")
            )
    elif account.created:
        if console_url:
            line = _(
                "Demo organization '%(name)s' created, owned by the existing account "
                "%(email)s (sign in at %(url)s with its password)."
            )
        else:
            line = _(
                "Demo organization '%(name)s' created, owned by the existing account "
                "%(email)s (sign in with its password)."
            )
        lines = [line % values]
    else:
        if console_url:
            line = _(
                "Demo organization '%(name)s' exists; sign in at %(url)s as %(email)s with the "
                "password shown on the first start (or CADRE_DEMO_PASSWORD). Forgot it? Run: "
                "cadre manage changepassword %(email)s"
            )
        else:
            line = _(
                "Demo organization '%(name)s' exists; sign in as %(email)s with the password "
                "shown on the first start (or CADRE_DEMO_PASSWORD). Forgot it? Run: "
                "cadre manage changepassword %(email)s"
            )
        lines = [line % values]
    return lines + _describe_samples(account, console_url)


def _describe_samples(account: DemoAccount, console_url: str) -> list[str]:
    seed = account.seed
    if account.samples_refused:
        return [_("Demo data not added: %(reason)s") % {"reason": account.samples_refused}]
    if seed is None:
        return []
    lines = [_("Demo data added (labelled '(demo)'; remove it with: cadre manage demo_reset).")]
    email = {"email": seed.employee_email}
    if seed.employee_password:
        lines.append("  " + _("A colleague to try reviews and confirmations with:"))
        lines.append("    " + _("e-mail:   %(email)s") % email)
        lines.append(
            "    "
            + _("password: %(password)s   (shown only once)") % {"password": seed.employee_password}
        )
    else:
        lines.append("  " + _("A colleague: %(email)s (an existing account).") % email)
    if seed.agent is not None:
        chat = f"{console_url.rstrip('/')}/chat/agents/{seed.agent.pk}/"
        lines.append("  " + _("Chat with the demo agent: %(url)s") % {"url": chat})
    if account.provider is not None:
        provider = account.provider
        lines.append(
            "  "
            + _("Demo agents answer through %(provider)s (%(model)s).")
            % {"provider": provider.name, "model": provider.default_model}
        )
    else:
        lines.append(
            "  "
            + _(
                "Demo agents use the offline model (no language model configured): set "
                "OPENAI_API_KEY, ANTHROPIC_API_KEY or CADRE_MODEL_BASE_URL before the first "
                "start, or configure a model under Models."
            )
        )
    return lines
